#include "ftf/ftf_summary.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"
#include "ftf/ftf_reader.h"

namespace ptd::ftf {

namespace {

// The `instructions` argument of a slice's End (or complete event), if it has one.
std::optional<uint64_t> InstructionsArg(const EventRecord& event) {
  for (const ArgValue& arg : event.args) {
    if (arg.name == "instructions" && (arg.type == ArgType::kUint64 || arg.type == ArgType::kUint32)) return arg.bits;
  }
  return std::nullopt;
}

// The `source` argument of a slice's Begin (where its function is defined), or "".
absl::string_view SourceArg(const EventRecord& event) {
  for (const ArgValue& arg : event.args) {
    if (arg.name == "source" && arg.type == ArgType::kString) return arg.string_value;
  }
  return {};
}

}  // namespace

uint64_t FtfSummarizer::ToNs(uint64_t ticks) const {
  if (ticks_per_second_ == 1'000'000'000) return ticks;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(ticks) * 1'000'000'000u /
                               ticks_per_second_);
}

void FtfSummarizer::Add(const FtfRecord& record) {
  ++summary_.records;
  if (record.skipped) return;
  switch (record.type) {
    case RecordType::kInitialization:
      ticks_per_second_ = record.ticks_per_second;
      summary_.ticks_per_second = record.ticks_per_second;
      return;
    case RecordType::kKernelObject:
      if (record.object.obj_type == kObjTypeThread) {
        thread_names_[record.object.koid] = record.object.name;
      } else if (record.object.obj_type == kObjTypeProcess) {
        process_names_[record.object.koid] = record.object.name;
      }
      return;
    case RecordType::kEvent:
      break;
    default:
      return;
  }
  ++summary_.events;
  const EventRecord& event = record.event;
  ThreadState& thread = threads_[{event.thread.pid, event.thread.tid}];
  ThreadSummary& ts = thread.summary;
  uint64_t now = ToNs(event.ts);
  if (!thread.has_events) {
    thread.has_events = true;
    ts.pid = event.thread.pid;
    ts.tid = event.thread.tid;
    ts.first_ts_ns = now;
  }
  ts.first_ts_ns = std::min(ts.first_ts_ns, now);
  ts.last_ts_ns = std::max(ts.last_ts_ns, now);
  switch (event.type) {
    case EventType::kDurationBegin:
      functions_.Begin(ts.pid, ts.tid, now, event.name, SourceArg(event));
      ++thread.depth;
      ts.max_depth = std::max(ts.max_depth, thread.depth);
      break;
    case EventType::kDurationEnd:
      if (thread.depth == 0) {
        ++ts.unmatched_ends;
      } else {
        functions_.End(ts.pid, ts.tid, now, InstructionsArg(event));
        --thread.depth;
        ++ts.slices;
      }
      break;
    case EventType::kDurationComplete: {
      // Counted as a leaf of whatever Begin/End slice is open.
      uint64_t end = ToNs(event.trailer);
      ts.last_ts_ns = std::max(ts.last_ts_ns, end);
      functions_.Begin(ts.pid, ts.tid, now, event.name, SourceArg(event));
      ts.max_depth = std::max(ts.max_depth, thread.depth + 1);
      functions_.End(ts.pid, ts.tid, end, InstructionsArg(event));
      ++ts.slices;
      break;
    }
    case EventType::kInstant:
      ++ts.instants;
      break;
    case EventType::kCounter:
      ++ts.counters;
      break;
    default:
      break;
  }
}

FtfSummary FtfSummarizer::Finish() {
  for (auto& [key, thread] : threads_) {
    thread.summary.unfinished = functions_.CloseThread(key.first, key.second, thread.summary.last_ts_ns);
    thread.summary.slices += thread.summary.unfinished;
    auto name = thread_names_.find(key.second);
    if (name != thread_names_.end()) thread.summary.name = name->second;
    auto process = process_names_.find(key.first);
    if (process != process_names_.end()) thread.summary.process_name = process->second;
    summary_.threads.push_back(std::move(thread.summary));
  }
  threads_.clear();
  std::sort(summary_.threads.begin(), summary_.threads.end(),
            [](const ThreadSummary& a, const ThreadSummary& b) {
              return std::tie(a.pid, a.tid) < std::tie(b.pid, b.tid);
            });
  summary_.functions = functions_.Finish();
  return std::move(summary_);
}

absl::StatusOr<FtfSummary> SummarizeFtfFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<FtfReader>> reader = FtfReader::Open(path);
  if (!reader.ok()) return reader.status();
  FtfSummarizer summarizer;
  absl::Status read = ForEachRecord(**reader, [&](const FtfRecord& record) { summarizer.Add(record); });
  if (!read.ok()) return read;
  return summarizer.Finish();
}


std::string FormatFtfSummary(const FtfSummary& summary, size_t top_functions) {
  std::string out;
  absl::StrAppendFormat(&out, "records: %u  events: %u  threads: %u  functions: %u\n",
                        summary.records, summary.events, summary.threads.size(),
                        summary.functions.functions.size());
  absl::StrAppend(&out, "threads:\n");
  absl::StrAppendFormat(&out, "  %8s %8s %10s %6s %12s  %s\n", "pid", "tid", "slices", "depth",
                        "span", "name (process)");
  for (const ThreadSummary& t : summary.threads) {
    absl::StrAppendFormat(&out, "  %8u %8u %10u %6u %12s  %s (%s)", t.pid, t.tid, t.slices,
                          t.max_depth, FormatDurationNs(t.last_ts_ns - t.first_ts_ns),
                          t.name.empty() ? "?" : t.name,
                          t.process_name.empty() ? "?" : t.process_name);
    if (t.unfinished > 0) absl::StrAppendFormat(&out, "  [%u unfinished]", t.unfinished);
    if (t.unmatched_ends > 0) absl::StrAppendFormat(&out, "  [%u unmatched ends]", t.unmatched_ends);
    if (t.instants > 0) absl::StrAppendFormat(&out, "  [%u instants]", t.instants);
    if (t.counters > 0) absl::StrAppendFormat(&out, "  [%u counters]", t.counters);
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, FormatFunctionStats(summary.functions, top_functions));
  return out;
}

}  // namespace ptd::ftf
