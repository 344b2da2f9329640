#include "ftf/ftf_summary.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ftf/ftf_reader.h"

namespace ptd::ftf {

uint64_t FtfSummarizer::ToNs(uint64_t ticks) const {
  if (ticks_per_second_ == 1'000'000'000) return ticks;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(ticks) * 1'000'000'000u /
                               ticks_per_second_);
}

uint32_t FtfSummarizer::FunctionIndex(const std::string& name) {
  auto it = function_index_.find(name);
  if (it != function_index_.end()) return it->second;
  auto index = static_cast<uint32_t>(functions_.size());
  functions_.push_back(FunctionTime{name, 0, 0, 0});
  function_index_.emplace(name, index);
  return index;
}

void FtfSummarizer::CloseFrame(ThreadState& thread, uint64_t end_ns) {
  Frame frame = thread.stack.back();
  thread.stack.pop_back();
  uint64_t duration = end_ns > frame.start_ns ? end_ns - frame.start_ns : 0;
  FunctionTime& function = functions_[frame.function];
  ++function.calls;
  function.self_ns += duration > frame.callees_ns ? duration - frame.callees_ns : 0;
  uint32_t& open = thread.open_count[frame.function];
  if (--open == 0) function.total_ns += duration;
  if (!thread.stack.empty()) thread.stack.back().callees_ns += duration;
  ++thread.summary.slices;
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
    case EventType::kDurationBegin: {
      uint32_t function = FunctionIndex(event.name);
      thread.stack.push_back(Frame{function, now, 0});
      ++thread.open_count[function];
      ts.max_depth = std::max(ts.max_depth, thread.stack.size());
      break;
    }
    case EventType::kDurationEnd:
      if (thread.stack.empty()) {
        ++ts.unmatched_ends;
      } else {
        CloseFrame(thread, now);
      }
      break;
    case EventType::kDurationComplete: {
      // Counted as a leaf of whatever Begin/End slice is open.
      uint64_t end = ToNs(event.trailer);
      ts.last_ts_ns = std::max(ts.last_ts_ns, end);
      uint32_t function = FunctionIndex(event.name);
      thread.stack.push_back(Frame{function, now, 0});
      ++thread.open_count[function];
      ts.max_depth = std::max(ts.max_depth, thread.stack.size());
      CloseFrame(thread, end);
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
    while (!thread.stack.empty()) {
      ++thread.summary.unfinished;
      CloseFrame(thread, thread.summary.last_ts_ns);
    }
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
  summary_.functions = std::move(functions_);
  std::sort(summary_.functions.begin(), summary_.functions.end(),
            [](const FunctionTime& a, const FunctionTime& b) {
              return std::tie(b.total_ns, a.name) < std::tie(a.total_ns, b.name);
            });
  return std::move(summary_);
}

absl::StatusOr<FtfSummary> SummarizeFtfFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<FtfReader>> reader = FtfReader::Open(path);
  if (!reader.ok()) return reader.status();
  FtfSummarizer summarizer;
  FtfRecord record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    summarizer.Add(record);
  }
  return summarizer.Finish();
}

namespace {

std::string FormatNs(uint64_t ns) {
  if (ns >= 1'000'000'000) return absl::StrFormat("%.3f s", ns / 1e9);
  if (ns >= 1'000'000) return absl::StrFormat("%.3f ms", ns / 1e6);
  if (ns >= 1'000) return absl::StrFormat("%.3f us", ns / 1e3);
  return absl::StrFormat("%u ns", ns);
}

void AppendFunctions(std::string& out, std::vector<FunctionTime> functions, size_t top,
                     bool by_self) {
  if (by_self) {
    std::sort(functions.begin(), functions.end(), [](const FunctionTime& a, const FunctionTime& b) {
      return std::tie(b.self_ns, a.name) < std::tie(a.self_ns, b.name);
    });
  }
  absl::StrAppend(&out, by_self ? "top functions by self time:\n" : "top functions by total time:\n");
  absl::StrAppendFormat(&out, "  %14s %14s %10s  %s\n", "total", "self", "calls", "name");
  for (size_t i = 0; i < functions.size() && i < top; ++i) {
    const FunctionTime& f = functions[i];
    absl::StrAppendFormat(&out, "  %14s %14s %10u  %s\n", FormatNs(f.total_ns),
                          FormatNs(f.self_ns), f.calls, f.name);
  }
}

}  // namespace

std::string FormatFtfSummary(const FtfSummary& summary, size_t top_functions) {
  std::string out;
  absl::StrAppendFormat(&out, "records: %u  events: %u  threads: %u  functions: %u\n",
                        summary.records, summary.events, summary.threads.size(),
                        summary.functions.size());
  absl::StrAppend(&out, "threads:\n");
  absl::StrAppendFormat(&out, "  %8s %8s %10s %6s %12s  %s\n", "pid", "tid", "slices", "depth",
                        "span", "name (process)");
  for (const ThreadSummary& t : summary.threads) {
    absl::StrAppendFormat(&out, "  %8u %8u %10u %6u %12s  %s (%s)", t.pid, t.tid, t.slices,
                          t.max_depth, FormatNs(t.last_ts_ns - t.first_ts_ns),
                          t.name.empty() ? "?" : t.name,
                          t.process_name.empty() ? "?" : t.process_name);
    if (t.unfinished > 0) absl::StrAppendFormat(&out, "  [%u unfinished]", t.unfinished);
    if (t.unmatched_ends > 0) absl::StrAppendFormat(&out, "  [%u unmatched ends]", t.unmatched_ends);
    if (t.instants > 0) absl::StrAppendFormat(&out, "  [%u instants]", t.instants);
    if (t.counters > 0) absl::StrAppendFormat(&out, "  [%u counters]", t.counters);
    absl::StrAppend(&out, "\n");
  }
  AppendFunctions(out, summary.functions, top_functions, false);
  AppendFunctions(out, summary.functions, top_functions, true);
  return out;
}

}  // namespace ptd::ftf
