#include "tests/valgrind/valgrind_ground_truth.h"

#include <algorithm>
#include <memory>
#include <regex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "decoder/output/slice_sink.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {

std::vector<std::string> ValgrindToolCommand(const std::string& tool, const std::vector<std::string>& extra,
                                             const std::vector<std::string>& command) {
  std::vector<std::string> argv = {"valgrind",
                                   absl::StrCat("--tool=", tool),
                                   "--vex-guest-chase=no",
                                   "--vex-iropt-unroll-thresh=0",
                                   "--run-libc-freeres=no",
                                   "--run-cxx-freeres=no",
                                   "--trace-children=yes"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

absl::StatusOr<uint64_t> LackeyInstructions(const std::vector<std::string>& command) {
  CommandResult r = RunCommand(ValgrindToolCommand("lackey", {"--basic-counts=yes"}, command));
  // "==PID==   guest instrs:  127,604" (one line per process with --trace-children).
  std::regex line(R"(guest instrs:\s+([0-9,]+))");
  uint64_t total = 0;
  bool found = false;
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), line), end; it != end; ++it) {
    std::string digits = (*it)[1];
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
    uint64_t n = 0;
    if (!absl::SimpleAtoi(digits, &n)) return absl::InternalError(absl::StrCat("lackey: bad count ", digits));
    total += n;
    found = true;
  }
  if (!found) return absl::InternalError(absl::StrCat("lackey printed no count: ", r.err));
  return total;
}

absl::StatusOr<std::map<std::string, uint64_t>> CallgrindCalls(const std::vector<std::string>& command,
                                                               const std::string& work_dir) {
  const std::string out = absl::StrCat(work_dir, "/callgrind.out.%p");
  CommandResult r = RunCommand(ValgrindToolCommand("callgrind", {absl::StrCat("--callgrind-out-file=", out)}, command));
  if (r.exit_code != 0) return absl::InternalError(absl::StrCat("callgrind failed: ", r.err));
  std::map<std::string, uint64_t> calls;
  CommandResult ls = RunCommand({"sh", "-c", absl::StrCat("ls ", work_dir, "/callgrind.out.*")});
  for (absl::string_view path : absl::StrSplit(ls.out, '\n', absl::SkipEmpty())) {
    absl::StatusOr<std::string> text = ReadFileToString(std::string(path));
    if (!text.ok()) return text.status();
    // Names are compressed: "cfn=(12) name" the first time, "cfn=(12)" after. A
    // "calls=N target" line follows the cfn= it counts for.
    std::map<std::string, std::string> names;
    std::string callee;
    std::istringstream lines(*text);
    std::regex fn_line(R"(^c?fn=\((\d+)\)(?: (.*))?$)");
    for (std::string l; std::getline(lines, l);) {
      std::smatch m;
      if (std::regex_match(l, m, fn_line)) {
        if (m[2].matched) {
          // Recursion levels are separate functions to callgrind: "fib'2".
          std::string name = m[2];
          if (const size_t quote = name.rfind('\''); quote != std::string::npos &&
              name.find_first_not_of("0123456789", quote + 1) == std::string::npos) {
            name.resize(quote);
          }
          names[m[1]] = name;
        }
        if (l[0] == 'c') callee = names[m[1]];
      } else if (l.rfind("calls=", 0) == 0) {
        uint64_t n = 0;
        const std::string count = l.substr(6, l.find(' ') - 6);
        if (absl::SimpleAtoi(count, &n)) calls[callee] += n;
      }
    }
  }
  return calls;
}

namespace {

class CountingSink : public decoder::SliceSink {
 public:
  CountingSink(DecodedTrace* out, int tid, const std::string& watch) : out_(out), tid_(tid), watch_(watch) {}
  void Begin(uint64_t time, absl::string_view name) override {
    ++out_->calls[std::string(name)];
    ++out_->thread_calls[tid_][std::string(name)];
    ++out_->parents[std::string(name)][open_.empty() ? std::string() : open_.back().name];
    open_.push_back({name == watch_, time, std::string(name)});
    out_->max_depth = std::max<uint64_t>(out_->max_depth, open_.size());
    last_ = std::max(last_, time);
  }
  void End(uint64_t time, const decoder::SliceCounts&) override {
    last_ = std::max(last_, time);
    if (open_.empty()) {
      ++out_->unbalanced;
      return;
    }
    if (open_.back().watched) out_->watched.push_back(WatchedSlice{tid_, open_.back().begin, time, false});
    open_.pop_back();
  }
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override {
    last_ = std::max(last_, time);
    if (name == "decode error") {
      out_->error_details.push_back(absl::StrCat("tid ", tid_, ": ", detail));
      ++out_->thread_errors[tid_];
    }
  }
  uint64_t last() const { return last_; }
  size_t open() const { return open_.size(); }
  int tid() const { return tid_; }

 private:
  struct Open {
    bool watched = false;
    uint64_t begin = 0;
    std::string name;
  };
  DecodedTrace* out_;
  int tid_;
  std::string watch_;
  std::vector<Open> open_;
  uint64_t last_ = 0;
};

class CountingFactory : public decoder::ThreadSinkFactory {
 public:
  CountingFactory(DecodedTrace* out, const std::string& watch) : out_(out), watch_(watch) {}
  decoder::SliceSink* ForThread(int, int tid, const std::string&, const std::string& process_name) override {
    out_->threads[tid] = process_name;
    sinks_.push_back(std::make_unique<CountingSink>(out_, tid, watch_));
    return sinks_.back().get();
  }
  // Slices closed by the end of their thread's trace did not return.
  void MarkReturns() {
    for (const auto& sink : sinks_) out_->unbalanced += sink->open();
    for (WatchedSlice& slice : out_->watched) {
      for (const auto& sink : sinks_) {
        if (sink->tid() == slice.tid) slice.returned = slice.end < sink->last();
      }
    }
  }

 private:
  DecodedTrace* out_;
  std::string watch_;
  std::vector<std::unique_ptr<CountingSink>> sinks_;
};

}  // namespace

absl::StatusOr<DecodedTrace> DecodeForTest(const std::string& trace_dir, const std::string& watch, bool cycles_axis) {
  DecodedTrace out;
  CountingFactory factory(&out, watch);
  decoder::DecodeOptions options;
  // Calls as callgrind and lackey count them: real calls only (inlined calls, which the
  // DWARF of a program built with -O2 adds, are checked against addr2line elsewhere).
  options.inlined_frames = false;
  if (cycles_axis) options.axis = decoder::TimeAxisChoice::kCycles;
  absl::StatusOr<decoder::DecodeResult> result = decoder::DecodeTrace(trace_dir, options, &factory);
  if (!result.ok()) return result.status();
  out.instructions = result->stats[decoder::Stat::kInstructions];
  out.errors = result->stats[decoder::Stat::kErrors];
  factory.MarkReturns();
  out.warnings = result->warnings;
  return out;
}

DecodedRecording RecordForTest(const EmulatedRecorder& record, const RecordOptions& options) {
  DecodedRecording rec;
  absl::StatusOr<EmulatedRecordSummary> summary = record(options);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (!summary.ok()) return rec;
  rec.summary = *summary;
  rec.dir = options.output_dir;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec.dir);
  EXPECT_TRUE(meta.ok()) << meta.status();
  if (meta.ok()) rec.meta = *meta;
  return rec;
}

DecodedRecording RecordAndDecodeForTest(const EmulatedRecorder& record, const RecordOptions& options,
                                        const std::string& watch) {
  DecodedRecording rec = RecordForTest(record, options);
  if (rec.dir.empty()) return rec;
  absl::StatusOr<DecodedTrace> decoded = DecodeForTest(rec.dir, watch);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (decoded.ok()) rec.decoded = *decoded;
  return rec;
}

RecordOptions EmulatedRecordOptions(const std::vector<std::string>& command, const std::string& dir,
                                    const std::string& emulator) {
  RecordOptions options;
  options.command = command;
  options.output_dir = dir + "/trace.dir";
  options.emulate = true;
  options.emulator = emulator;
  options.quiet = true;
  return options;
}

DecodedRecording RecordUnderValgrindForTest(const std::vector<std::string>& command, const std::string& dir) {
  DecodedRecording rec = RecordAndDecodeForTest(RecordValgrind, EmulatedRecordOptions(command, dir, "valgrind"));
  EXPECT_EQ(rec.decoded.errors, 0u);
  return rec;
}

void SkipUnlessValgrindRecords() {
  std::string why;
  if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
}

uint64_t CallsOf(const std::map<std::string, uint64_t>& calls, const std::string& function) {
  auto it = calls.find(function);
  return it == calls.end() ? 0 : it->second;
}

}  // namespace ptd::testing
