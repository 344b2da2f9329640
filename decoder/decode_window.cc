#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"
#include "decoder/decoding.h"
#include "decoder/packets/psb_window.h"

namespace ptd::decoder {

// Cuts every stream's chunks down to the PSB intervals the window needs. Errors (a window
// outside the trace, a time window on an untimed trace) come before any decoding.
absl::Status Decoding::ApplyWindow(const std::vector<std::unique_ptr<StreamState>>& streams) {
  const DecodeWindow& window = options_.window;
  const bool by_time = window.kind == DecodeWindow::Kind::kTime;
  auto chunk_bytes = [](const StreamState& state, const PtChunk& chunk) {
    return state.job.file->bytes().subspan(chunk.file_offset, chunk.size);
  };
  // The trace's span as its PSB+ groups give it: first and last PSB time of all streams.
  uint64_t first_time = UINT64_MAX, last_time = 0;
  uint64_t total_bytes = 0;
  for (const auto& state : streams) {
    if (by_time && state->job.config.axis != TimeAxis::kTime) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--window: ", state->name,
          " has no timing packets (or the time axis is not time): use --window-offset (PT byte offsets)"));
    }
    for (const PtChunk& chunk : state->job.chunks) {
      total_bytes += chunk.size;
      if (!by_time) continue;
      absl::Span<const uint8_t> bytes = chunk_bytes(*state, chunk);
      if (std::optional<PsbTime> first = FirstTimedPsbAtOrAfter(bytes, 0, meta_.time)) {
        first_time = std::min(first_time, first->time);
        last_time = std::max(last_time, first->time);
      }
      if (std::optional<uint64_t> last = LastPsbAtOrBefore(bytes, bytes.size())) {
        if (std::optional<PsbTime> t = FirstTimedPsbAtOrAfter(bytes, *last, meta_.time)) {
          last_time = std::max(last_time, t->time);
        }
      }
    }
  }
  uint64_t begin = window.begin, end = window.end;
  if (by_time && window.relative && first_time != UINT64_MAX) {
    begin = first_time + window.begin;
    end = window.end == UINT64_MAX ? UINT64_MAX : first_time + window.end;
  }
  // The trace goes on past its last PSB+, to the recording's end (meta.json's end_ns,
  // on the same clock when it is not before the first PSB+): a window that begins in
  // between decodes the last PSB's interval.
  const uint64_t trace_end = meta_.end_ns >= first_time && first_time != UINT64_MAX
                                 ? std::max(last_time, meta_.end_ns) : last_time;
  if (by_time && (first_time == UINT64_MAX || end <= first_time || begin > trace_end)) {
    return absl::InvalidArgumentError(
        first_time == UINT64_MAX
            ? std::string("--window: the trace has no PSB+ with a TSC")
            : absl::StrFormat("--window [%d, %d) lies outside the trace: its PSB+ times run from %d to %d "
                              "(+0 to +%s), and the trace ends at %d",
                              begin, end, first_time, last_time, FormatDurationNs(last_time - first_time),
                              trace_end));
  }
  uint64_t kept_bytes = 0;
  for (const auto& state : streams) {
    std::vector<PtChunk> kept;
    const std::vector<PtChunk>& chunks = state->job.chunks;
    for (size_t c = 0; c < chunks.size(); ++c) {
      absl::Span<const uint8_t> bytes = chunk_bytes(*state, chunks[c]);
      ByteRange range;
      if (by_time) {
        // A chunk whose successor starts at or before the window needs nothing.
        if (c + 1 < chunks.size()) {
          std::optional<PsbTime> next = FirstTimedPsbAtOrAfter(chunk_bytes(*state, chunks[c + 1]), 0, meta_.time);
          if (next && next->time <= begin) continue;
        }
        range = PsbRangeForTimes(bytes, begin, end, meta_.time);
      } else {
        // Offsets are stream file offsets; each chunk holds a part of them.
        const uint64_t lo = chunks[c].file_offset, hi = lo + chunks[c].size;
        if (end <= lo || begin >= hi) continue;
        range = PsbRangeForOffsets(bytes, begin > lo ? begin - lo : 0, end < hi ? end - lo : chunks[c].size);
      }
      if (range.empty()) continue;
      PtChunk part = chunks[c];
      part.file_offset += range.begin;
      part.size = range.end - range.begin;
      if (kept.empty()) part.lost_before = false;
      kept.push_back(part);
      kept_bytes += part.size;
      std::string times;
      if (by_time) {
        absl::Span<const uint8_t> cut = bytes.subspan(range.begin, range.end - range.begin);
        std::optional<PsbTime> t0 = FirstTimedPsbAtOrAfter(cut, 0, meta_.time);
        std::optional<PsbTime> t1 = FirstTimedPsbAtOrAfter(bytes, range.end, meta_.time);
        if (t0) times = absl::StrFormat(", times from %d (+%s)", t0->time, FormatDurationNs(t0->time - first_time));
        if (t0 && t1) absl::StrAppendFormat(&times, " to %d (+%s)", t1->time, FormatDurationNs(t1->time - first_time));
      }
      result_.notes.push_back(absl::StrFormat("window: %s: decoding PT bytes [0x%x, 0x%x)%s", state->name,
                                              part.file_offset, part.file_offset + part.size, times));
    }
    state->job.chunks = std::move(kept);
  }
  if (kept_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s [%d, %d) holds no PT data (the streams hold %d bytes)",
                                                      by_time ? "--window" : "--window-offset", begin, end,
                                                      total_bytes));
  }
  result_.notes.push_back(absl::StrFormat("window: %s of %s of PT (%.1f%%)", FormatByteSize(kept_bytes),
                                          FormatByteSize(total_bytes), 100.0 * kept_bytes / std::max<uint64_t>(1, total_bytes)));
  total_bytes_ = kept_bytes;
  return absl::OkStatus();
}

}  // namespace ptd::decoder
