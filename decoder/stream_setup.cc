#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/trace_dir.h"
#include "decoder/decoding.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "decoder/packets/cycle_index.h"
#include "decoder/packets/psb_window.h"
#include "image/mapped_file.h"

namespace ptd::decoder {

// A chunk that takes up the stream where the previous one stopped (the next bytes of the
// same AUX stream, next in the file, nothing lost between: a drain or a snapshot of a
// full-trace ring) is the same byte stream: decoded as one, so a packet or PSB interval
// cut at the border is not lost to a resync.
static bool ContinuesChunk(const std::vector<PtChunk>& chunks, const PtChunk& chunk) {
  if (chunks.empty()) return false;
  const PtChunk& last = chunks.back();
  return !chunk.lost_before && !last.truncated && !last.overwrite && !chunk.overwrite &&
         chunk.file_offset == last.file_offset + last.size && chunk.aux_offset == last.aux_offset + last.size;
}

absl::StatusOr<std::unique_ptr<Decoding::StreamState>> Decoding::PrepareStream(const PtStream& stream,
                                                                                size_t index) {
  std::string path = ResolveTracePath(dir_, stream.file);
  absl::StatusOr<std::shared_ptr<const image::MappedFile>> file = image::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::Span<const uint8_t> bytes = (*file)->bytes();

  // Which process and thread this stream belongs to.
  int default_pid = meta_.pids.empty() ? 1 : meta_.pids[0];
  int tid = stream.tid;
  int pid = default_pid;
  if (tid >= 0 && sideband_ && sideband_->threads.PidOf(tid) >= 0) pid = sideband_->threads.PidOf(tid);
  if (tid >= 0 && tid == default_pid) pid = tid;
  bool route_by_schedule = false;
  if (stream.cpu >= 0 && sideband_ && !sideband_->schedule.Intervals(stream.cpu).empty()) {
    route_by_schedule = true;
    // The first interval that ran a traced process (not idle, pid 0, nor unknown).
    for (const CpuInterval& interval : sideband_->schedule.Intervals(stream.cpu)) {
      if (interval.pid > 0) {
        pid = interval.pid;
        break;
      }
    }
  }
  if (tid < 0 && !route_by_schedule) tid = stream.cpu >= 0 ? 0x7f000000 + stream.cpu : pid + static_cast<int>(index);

  auto state = std::make_unique<StreamState>();
  state->name = stream.file;
  PtDecodeConfig& config = state->job.config;
  config.kind = options_.decoder;
  config.section_blocks = &section_blocks_;
  // An emulated trace was written by no real CPU: it has no errata to apply or warn about.
  if (meta_.mode != TraceMode::kEmulated) config.cpu = meta_.host.cpu;
  config.pt = meta_.pt;
  config.conversion = meta_.time;
  // The time axis needs timing packets; without them instructions stand in for time.
  bool has_tsc = false;
  if (!stream.chunks.empty()) {
    const PtChunk& first = stream.chunks.front();
    if (first.file_offset < bytes.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(first.size, bytes.size() - first.file_offset));
      has_tsc = StreamHasTsc(bytes.subspan(first.file_offset, n), n);
      // CYC: meta.json's cyc field when it says off (no look at all), else the first 64 KiB.
      auto cyc = meta_.pt.fields.find("cyc");
      if (cyc == meta_.pt.fields.end() || cyc->second != 0) config.cycles = StreamHasCyc(bytes.subspan(first.file_offset, n));
    }
  }
  config.axis = TimeAxis::kInstructions;
  if (options_.axis == TimeAxisChoice::kTime) {
    if (has_tsc) {
      config.axis = TimeAxis::kTime;
    } else {
      result_.time_axis_is_instructions = true;
      if (index == 0) result_.warnings.push_back(absl::StrCat(stream.file, ": no timing packets: the time axis counts instructions"));
    }
  } else if (options_.axis == TimeAxisChoice::kCycles) {
    if (config.cycles) {
      config.axis = TimeAxis::kCycles;
      result_.time_axis_is_cycles = true;
    } else {
      result_.time_axis_is_instructions = true;
      result_.warnings.push_back(absl::StrCat(stream.file, ": no CYC packets: its time axis counts instructions, not cycles"));
    }
  } else {
    result_.time_axis_is_instructions = true;
  }
  if (route_by_schedule && config.axis != TimeAxis::kTime) route_by_schedule = false;
  if (!route_by_schedule && tid < 0) tid = 0x7f000000 + stream.cpu;

  // The image timeline (docs/decoder.md): with timing packets each decoder's image
  // follows them, whatever the output axis (code replaced at run time decodes with the
  // bytes of its time); a per-CPU stream's follows the process the schedule runs.
  const bool timed = has_tsc;
  if (!images_timed_.has_value()) images_timed_ = timed;
  auto switches = std::make_shared<std::vector<ProcessSwitch>>();
  if (route_by_schedule) {
    for (const CpuInterval& interval : sideband_->schedule.Intervals(stream.cpu)) {
      if (interval.pid > 0 && (switches->empty() || switches->back().pid != interval.pid)) {
        switches->push_back({interval.begin_ns, interval.pid});
      }
    }
  }
  // A decoder's own images (workers, and a stream timed unlike the first).
  auto own_images = [this, timed]() -> StreamImageClock::Images {
    auto own = std::make_shared<std::map<int, std::unique_ptr<image::TimedProcessImage>>>();
    return [this, own, timed](int p) {
      std::unique_ptr<image::TimedProcessImage>& image = (*own)[p];
      if (image == nullptr) image = MakeImage(p, timed, ThreadSections());
      return image.get();
    };
  };
  StreamImageClock::Images shared = [this](int p) { return ImageFor(p); };
  state->clock = std::make_unique<StreamImageClock>(timed == *images_timed_ ? shared : own_images(), pid, switches);
  if (timed) state->job.clock = state->clock.get();
  // Workers decode with images of their own, timed or not (their own sections too).
  state->job.make_clock = [own_images, pid, switches]() -> std::unique_ptr<ImageClock> {
    return std::make_unique<StreamImageClock>(own_images(), pid, switches);
  };
  if (route_by_schedule) {
    int cpu = stream.cpu;
    state->router = std::make_unique<ThreadRouter>(nullptr, [this, cpu, pid](uint64_t time) -> ThreadState* {
      std::optional<CpuInterval> interval = sideband_->schedule.ThreadAt(cpu, time);
      if (!interval) return nullptr;
      return Thread(interval->pid >= 0 ? interval->pid : pid, interval->tid, false);
    });
    if (meta_.pt.user_only) state->router->RouteWholeSegments();
  } else {
    // --tid filtering: a stream of another thread feeds nothing.
    state->router = std::make_unique<ThreadRouter>(Thread(pid, tid, config.cycles), nullptr);
  }
  state->job.image = state->clock->image();
  state->job.consumer = state->router.get();
  state->job.file = *file;
  for (size_t c = 0; c < stream.chunks.size(); ++c) {
    PtChunk chunk = stream.chunks[c];
    if (chunk.file_offset >= bytes.size()) {
      result_.warnings.push_back(absl::StrFormat("%s: chunk %d [0x%x, +0x%x) is beyond the file's end (0x%x)",
                                                 stream.file, c, chunk.file_offset, chunk.size, bytes.size()));
      continue;
    }
    if (chunk.size > bytes.size() - chunk.file_offset) {
      // A truncated file (copy cut short, disk full): decode the bytes that are there.
      result_.warnings.push_back(absl::StrFormat(
          "%s: chunk %d [0x%x, +0x%x) reaches past the file's end (0x%x): decoding the 0x%x bytes there",
          stream.file, c, chunk.file_offset, chunk.size, bytes.size(), bytes.size() - chunk.file_offset));
      chunk.size = bytes.size() - chunk.file_offset;
      chunk.truncated = true;
    }
    if (ContinuesChunk(state->job.chunks, chunk)) {
      state->job.chunks.back().size += chunk.size;
      state->job.chunks.back().truncated = chunk.truncated;
      continue;
    }
    state->job.chunks.push_back(chunk);
  }
  return state;
}

void Decoding::MarkMissingStreams(const std::vector<const PtStream*>& missing,
                                  const std::vector<std::unique_ptr<StreamState>>& streams) {
  if (missing.empty()) return;
  uint64_t first_time = UINT64_MAX;
  for (const auto& state : streams) {
    if (state->job.config.axis != TimeAxis::kTime || state->job.chunks.empty()) continue;
    const PtChunk& chunk = state->job.chunks.front();
    absl::Span<const uint8_t> bytes = state->job.file->bytes();
    if (chunk.file_offset >= bytes.size()) continue;
    bytes = bytes.subspan(chunk.file_offset, std::min<uint64_t>(chunk.size, bytes.size() - chunk.file_offset));
    if (std::optional<PsbTime> t = FirstTimedPsbAtOrAfter(bytes, 0, meta_.time)) first_time = std::min(first_time, t->time);
  }
  if (first_time == UINT64_MAX) first_time = 0;
  for (const PtStream* stream : missing) {
    if (stream->tid < 0) continue;
    const int pid = sideband_ && sideband_->threads.PidOf(stream->tid) >= 0 ? sideband_->threads.PidOf(stream->tid)
                                                                            : stream->tid;
    if (ThreadState* thread = Thread(pid, stream->tid, false)) {
      thread->sink->Instant(first_time, "trace missing",
                            absl::StrCat(stream->file, " is missing from the trace directory: this thread's "
                                                       "execution is not in this file"));
    }
  }
}

absl::Status Decoding::CheckTidIsInTrace(int tid) const {
  std::set<int> known;
  for (const PtStream& stream : meta_.streams) {
    if (stream.tid >= 0) known.insert(stream.tid);
  }
  if (sideband_) {
    for (const ThreadInfo& thread : sideband_->threads.Threads()) known.insert(thread.tid);
  }
  if (known.empty() || known.count(tid) != 0) return absl::OkStatus();
  std::vector<std::string> listed;
  for (int t : known) {
    if (listed.size() == 20) {
      listed.push_back(absl::StrCat("... (", known.size(), " in all; `ptrace-direct info` lists them)"));
      break;
    }
    listed.push_back(absl::StrCat(t));
  }
  return absl::NotFoundError(absl::StrCat("--tid ", tid, ": no such thread in ", dir_, "; its threads: ",
                                          absl::StrJoin(listed, ", ")));
}

}  // namespace ptd::decoder
