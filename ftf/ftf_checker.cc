#include "ftf/ftf_checker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ftf/ftf_reader.h"

namespace ptd::ftf {

void FtfChecker::Problem(std::string text) {
  ++problem_count_;
  if (problems_.size() < max_problems_) problems_.push_back(std::move(text));
}

void FtfChecker::AddReadError(const std::string& message) {
  Problem(absl::StrCat("unreadable: ", message));
}

void FtfChecker::Add(const FtfRecord& record) {
  if (record.skipped) return;
  if (record.type == RecordType::kEvent) {
    AddEvent(record);
    return;
  }
  if (record.type != RecordType::kKernelObject) return;
  const KernelObjectRecord& object = record.object;
  if (object.obj_type == kObjTypeProcess) {
    named_processes_.insert(object.koid);
  } else if (object.obj_type == kObjTypeThread) {
    ThreadObject& thread = thread_objects_[object.koid];
    for (const ArgValue& arg : object.args) {
      if (arg.name != "process") continue;
      if (arg.type != ArgType::kKoid) {
        Problem(absl::StrFormat(
            "offset %u: thread %u's `process` argument is %s, Perfetto needs a koid",
            record.offset, object.koid, ArgTypeName(arg.type)));
        continue;
      }
      thread.has_process = true;
      thread.process = arg.bits;
    }
  }
}

void FtfChecker::AddEvent(const FtfRecord& record) {
  const EventRecord& event = record.event;
  auto [it, inserted] = threads_.try_emplace({event.thread.pid, event.thread.tid});
  ThreadState& thread = it->second;
  if (inserted) thread.first_event_offset = record.offset;
  const uint64_t pid = event.thread.pid;
  const uint64_t tid = event.thread.tid;
  switch (event.type) {
    case EventType::kDurationBegin:
    case EventType::kDurationEnd:
      if (thread.has_begin_end && event.ts < thread.last_ts) {
        Problem(absl::StrFormat(
            "thread %u/%u: offset %u: %s at ts %u goes back in time (previous begin/end at %u)",
            pid, tid, record.offset, EventTypeName(event.type), event.ts, thread.last_ts));
      }
      thread.has_begin_end = true;
      thread.last_ts = std::max(thread.last_ts, event.ts);
      if (event.type == EventType::kDurationBegin) {
        thread.stack.push_back(OpenSlice{event.name, event.ts});
        if (thread.stack.size() > kPerfettoMaxDepth && !thread.depth_reported) {
          thread.depth_reported = true;
          Problem(absl::StrFormat(
              "thread %u/%u: offset %u: nesting depth %u exceeds Perfetto's limit of %u "
              "('%s'); deeper slices would be dropped",
              pid, tid, record.offset, thread.stack.size(), kPerfettoMaxDepth, event.name));
        }
      } else if (thread.stack.empty()) {
        Problem(absl::StrFormat("thread %u/%u: offset %u: end at ts %u with no open slice",
                                pid, tid, record.offset, event.ts));
      } else {
        thread.stack.pop_back();
      }
      break;
    case EventType::kDurationComplete:
      if (event.trailer < event.ts) {
        Problem(absl::StrFormat(
            "thread %u/%u: offset %u: complete event '%s' ends (%u) before it begins (%u)", pid,
            tid, record.offset, event.name, event.trailer, event.ts));
      }
      break;
    default:
      break;
  }
}

std::vector<std::string> FtfChecker::Finish() {
  // Sorted so the report does not depend on hash order.
  std::vector<std::pair<uint64_t, uint64_t>> keys;
  keys.reserve(threads_.size());
  for (const auto& [key, state] : threads_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  absl::flat_hash_set<uint64_t> unnamed_processes_reported;
  for (const auto& key : keys) {
    const auto [pid, tid] = key;
    const ThreadState& thread = threads_[key];
    if (!thread.stack.empty()) {
      const OpenSlice& innermost = thread.stack.back();
      Problem(absl::StrFormat(
          "thread %u/%u: %u slice(s) never end (innermost '%s' began at ts %u)", pid, tid,
          thread.stack.size(), innermost.name, innermost.ts));
    }
    auto object = thread_objects_.find(tid);
    if (object == thread_objects_.end()) {
      Problem(absl::StrFormat(
          "thread %u/%u: has events (first at offset %u) but no kernel object record names it",
          pid, tid, thread.first_event_offset));
    } else if (!object->second.has_process) {
      Problem(absl::StrFormat(
          "thread %u/%u: its kernel object record has no `process` koid argument", pid, tid));
    } else if (object->second.process != pid) {
      Problem(absl::StrFormat(
          "thread %u/%u: its kernel object record links it to process %u, its events to %u",
          pid, tid, object->second.process, pid));
    }
    if (!named_processes_.contains(pid) && unnamed_processes_reported.insert(pid).second) {
      Problem(absl::StrFormat("process %u: has threads with events but no kernel object record "
                              "names it",
                              pid));
    }
  }
  std::vector<std::string> result = problems_;
  if (problem_count_ > problems_.size()) {
    result.push_back(absl::StrCat("... and ", problem_count_ - problems_.size(), " more"));
  }
  return result;
}

}  // namespace ptd::ftf
