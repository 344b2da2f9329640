// record --emulate=ptrace on its default time axis, virtual time (recorder/emulate/
// stepper_clock.h): one ns per retired instruction, each system call as long as it really
// took, the kernel's sideband placed on the same axis. tests/programs/prog_nap.c spins,
// sleeps 50 ms in nap(), spins again and loads a library; one recording from main is
// decoded and checked slice by slice, another stops where --trigger-slower-than nap 40ms
// fires.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/trace_meta.h"
#include "decoder/output/slice_sink.h"
#include "decoder/trace_decoder.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/testing/test_util.h"

namespace ptd::testing {
namespace {

constexpr uint64_t kNapNs = 50'000'000;
constexpr char kSyscall[] = "[syscall]";
// How far the decoder places a slice's ends from its instructions' times. Every timing
// packet says the time after the instructions before it (a branch's CYC its retirement,
// a syscall's TIP.PGD its kernel entry, a TIP.PGE the next instruction's start), and the
// decoder takes each packet's time at the instruction that consumed it (TimeIndex), so
// calls, returns and system calls are exact. An inlined frame's ends lie inside a run
// between two branches and are interpolated there: a dozen of about 300 slices of this
// recording are 1 ns off.
constexpr uint64_t kDecoderPlacementNs = 1;

struct Slice {
  std::string name;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t instructions = 0;
  uint64_t syscall_ns = 0;  // the [syscall] slices under it (itself included)
};

// Every closed slice of a thread, with the time of the system calls under it.
class SliceTimeSink : public decoder::SliceSink {
 public:
  void Begin(uint64_t time, absl::string_view name) override { open_.push_back(Slice{std::string(name), time}); }
  void End(uint64_t time, const decoder::SliceCounts& counts) override {
    if (open_.empty()) return;
    Slice slice = open_.back();
    open_.pop_back();
    slice.end = time;
    slice.instructions = counts.instructions;
    if (slice.name == kSyscall) slice.syscall_ns += slice.end - slice.begin;
    if (!open_.empty()) open_.back().syscall_ns += slice.syscall_ns;
    slices.push_back(slice);
  }
  void Instant(uint64_t, absl::string_view name, absl::string_view detail) override {
    if (name == "decode error") errors.push_back(std::string(detail));
  }
  std::vector<Slice> slices;
  std::vector<std::string> errors;

 private:
  std::vector<Slice> open_;
};

class SliceTimeSinks : public decoder::ThreadSinkFactory {
 public:
  decoder::SliceSink* ForThread(int, int tid, const std::string&, const std::string&) override {
    auto& sink = sinks[tid];
    if (!sink) sink = std::make_unique<SliceTimeSink>();
    return sink.get();
  }
  std::map<int, std::unique_ptr<SliceTimeSink>> sinks;
};

struct NapRecording {
  TempDir tmp;
  std::string error;
  TraceMeta meta;
  uint64_t decode_errors = 0;
  SliceTimeSinks decoded;
  std::vector<GroundTruthThread> truth;  // the stepper's own times
  // The program's thread: every slice, in the order they ended.
  const std::vector<Slice>& slices() const { return decoded.sinks.begin()->second->slices; }
};

// `trigger`: --trigger-slower-than nap 40ms (the recording stops after the slow call).
std::unique_ptr<NapRecording> RecordNap(bool trigger) {
  auto rec = std::make_unique<NapRecording>();
  RecordOptions options;
  options.command = {Program("ptd_prog_nap")};
  options.output_dir = rec->tmp.Sub("trace.dir");
  options.emulate = true;
  options.emulator = "ptrace";
  options.quiet = true;
  options.ground_truth_path = rec->tmp.Sub("truth");
  options.start_at_symbol = "main";  // the dynamic loader's start-up is not what is checked
  if (trigger) {
    options.trigger_symbol = "nap";
    options.trigger_slower_than = "40ms";
  }
  absl::StatusOr<EmulatedRecordSummary> summary = RecordEmulated(options);
  if (!summary.ok()) {
    rec->error = std::string(summary.status().message());
    return rec;
  }
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(options.output_dir);
  if (!meta.ok()) {
    rec->error = std::string(meta.status().message());
    return rec;
  }
  rec->meta = *meta;
  absl::StatusOr<decoder::DecodeResult> result =
      decoder::DecodeTrace(options.output_dir, decoder::DecodeOptions{}, &rec->decoded);
  if (!result.ok()) {
    rec->error = std::string(result.status().message());
    return rec;
  }
  rec->decode_errors = result->stats[decoder::Stat::kErrors];
  absl::StatusOr<std::vector<GroundTruthThread>> truth = LoadGroundTruth(options.ground_truth_path);
  if (!truth.ok()) {
    rec->error = std::string(truth.status().message());
    return rec;
  }
  rec->truth = *truth;
  if (rec->decoded.sinks.size() != 1) rec->error = absl::StrCat(rec->decoded.sinks.size(), " threads decoded, want 1");
  return rec;
}

class PtraceVirtualTimeTest : public SuiteSharedTest<PtraceVirtualTimeTest, NapRecording> {
 protected:
  static void SetUpTestSuite() { shared_ = RecordNap(/*trigger=*/false); }
  void SetUp() override { ASSERT_TRUE(shared_->error.empty()) << shared_->error; }
  std::vector<Slice> SlicesNamed(const std::string& name) const {
    std::vector<Slice> out;
    for (const Slice& s : shared_->slices()) {
      if (s.name == name) out.push_back(s);
    }
    return out;
  }
};

// The stepper's measure of a system call: from its kernel entry (the truth's SYSCALL
// record) to the thread's next instruction.
std::vector<uint64_t> MeasuredSyscalls(const GroundTruthThread& thread) {
  std::vector<uint64_t> measured;
  for (size_t e = 0; e < thread.events.size(); ++e) {
    if (thread.events[e].type != GroundTruthTag::kSyscall) continue;
    const size_t next = thread.event_insn_index[e];
    if (next < thread.ip_times.size()) measured.push_back(thread.ip_times[next] - thread.events[e].time);
  }
  return measured;
}

TEST_F(PtraceVirtualTimeTest, TheNapsSystemCallLastsAsLongAsItSlept) {
  EXPECT_EQ(shared_->meta.time_axis, "virtual");
  const std::vector<Slice> naps = SlicesNamed("nap");
  ASSERT_EQ(naps.size(), 1u);
  EXPECT_GE(naps[0].syscall_ns, kNapNs);
  // The sleep and ptrace's wake-ups on a loaded 2-core machine: a few ms at most.
  EXPECT_LT(naps[0].syscall_ns, kNapNs + 10'000'000) << "the sleep's [syscall] slices";
  EXPECT_GE(naps[0].end - naps[0].begin, kNapNs);
  // Exactly what the stepper measured for the one call that slept.
  ASSERT_EQ(shared_->truth.size(), 1u);
  std::vector<uint64_t> sleeps;
  for (uint64_t took : MeasuredSyscalls(shared_->truth[0])) {
    if (took >= kNapNs) sleeps.push_back(took);
  }
  ASSERT_EQ(sleeps.size(), 1u);
  EXPECT_EQ(naps[0].syscall_ns, sleeps[0]);
}

TEST_F(PtraceVirtualTimeTest, EverySyscallSliceLastsWhatTheStepperMeasured) {
  std::vector<uint64_t> decoded;
  for (const Slice& s : SlicesNamed(kSyscall)) {
    if (s.end > s.begin) decoded.push_back(s.end - s.begin);  // exit_group's ends the trace
  }
  ASSERT_EQ(shared_->truth.size(), 1u);
  std::vector<uint64_t> measured = MeasuredSyscalls(shared_->truth[0]);
  EXPECT_GT(measured.size(), 10u);
  EXPECT_EQ(decoded, measured);
  for (uint64_t took : measured) EXPECT_GE(took, 1000u) << "a call lasts at least 1 us";
}

TEST_F(PtraceVirtualTimeTest, ABusyLoopLastsItsInstructionCountInNanoseconds) {
  const std::vector<Slice> spins = SlicesNamed("spin");
  ASSERT_EQ(spins.size(), 2u);
  for (const Slice& spin : spins) {
    EXPECT_GT(spin.instructions, 1000u);  // 500 iterations
    EXPECT_EQ(spin.end - spin.begin, spin.instructions) << "spin at " << spin.begin;
  }
}

// The stepper's own times (the ground truth, which stamps each run of instructions with
// its first one's time): an instruction lasts 1 ns, and a system call enters the kernel
// 1 ns after its instruction, so every call of the truth lasts its instructions plus its
// system calls exactly.
TEST_F(PtraceVirtualTimeTest, TheStepperAdvancesOneNanosecondPerInstruction) {
  ASSERT_EQ(shared_->truth.size(), 1u);
  const GroundTruthThread& thread = shared_->truth[0];
  std::map<size_t, uint64_t> kernel_entry;  // index of the instruction after a syscall -> its entry
  for (size_t e = 0; e < thread.events.size(); ++e) {
    if (thread.events[e].type == GroundTruthTag::kSyscall) kernel_entry[thread.event_insn_index[e]] = thread.events[e].time;
  }
  size_t run = 0;  // first instruction of the current run
  size_t checked = 0;
  for (size_t i = 1; i < thread.ip_times.size(); ++i) {
    if (thread.ip_times[i] == thread.ip_times[run]) continue;
    const uint64_t after_run = thread.ip_times[run] + (i - run);  // after the run's last instruction
    if (auto entry = kernel_entry.find(i); entry != kernel_entry.end()) {
      EXPECT_EQ(entry->second, after_run) << "the syscall before instruction " << i;
      EXPECT_GE(thread.ip_times[i], after_run + 1000) << "instruction " << i;
    } else {
      EXPECT_EQ(thread.ip_times[i], after_run) << "instruction " << i;
    }
    run = i;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

// The exactness rule: every slice lasts its instructions x 1 ns plus the measured
// time of the system calls under it; the decoder places a slice's ends within a few ns
// of its instructions (on the wall axis an instruction alone takes microseconds).
TEST_F(PtraceVirtualTimeTest, EverySliceLastsItsInstructionsPlusItsSystemCalls) {
  size_t checked = 0;
  uint64_t trace_end = 0;
  for (const Slice& s : shared_->slices()) trace_end = std::max(trace_end, s.end);
  for (const Slice& s : shared_->slices()) {
    if (s.end == trace_end) continue;  // closed by the end of the trace (exit_group), not returned
    const uint64_t expected = s.instructions + s.syscall_ns;
    const uint64_t duration = s.end - s.begin;
    EXPECT_LE(std::max(duration, expected) - std::min(duration, expected), kDecoderPlacementNs)
        << s.name << " at " << s.begin << ": " << duration << " ns, " << s.instructions << " instructions, "
        << s.syscall_ns << " ns of system calls";
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

TEST_F(PtraceVirtualTimeTest, TheLibraryLoadedAfterTheSleepDecodesWithoutErrors) {
  EXPECT_EQ(shared_->decode_errors, 0u);
  for (const auto& [tid, sink] : shared_->decoded.sinks) {
    for (const std::string& error : sink->errors) ADD_FAILURE() << "tid " << tid << ": " << error;
  }
  EXPECT_EQ(SlicesNamed("plugin_run").size(), 1u);
  EXPECT_EQ(SlicesNamed("plugin_step").size(), 5u);
}

class PtraceVirtualTimeTriggerTest : public SuiteSharedTest<PtraceVirtualTimeTriggerTest, NapRecording> {
 protected:
  static void SetUpTestSuite() { shared_ = RecordNap(/*trigger=*/true); }
  void SetUp() override { ASSERT_TRUE(shared_->error.empty()) << shared_->error; }
};

TEST_F(PtraceVirtualTimeTriggerTest, SlowerThanFiresOnTheSleepOnTheDefaultAxis) {
  EXPECT_EQ(shared_->meta.end_reason, "trigger");
  ASSERT_TRUE(shared_->meta.trigger.has_value()) << "nap was not slower than 40 ms on the trace's axis";
  const TriggerPoint& fired = *shared_->meta.trigger;
  EXPECT_EQ(fired.symbol, "nap");
  EXPECT_EQ(fired.hit, 1u);
  EXPECT_GE(fired.return_ns - fired.entry_ns, kNapNs);
  EXPECT_LT(fired.return_ns - fired.entry_ns, kNapNs + 10'000'000);
  // The decoded call lasts what the trigger measured: the same axis.
  std::vector<Slice> naps;
  for (const Slice& s : shared_->slices()) {
    if (s.name == "nap") naps.push_back(s);
  }
  ASSERT_EQ(naps.size(), 1u);
  const uint64_t decoded = naps[0].end - naps[0].begin;
  const uint64_t measured = fired.return_ns - fired.entry_ns;
  EXPECT_LE(std::max(decoded, measured) - std::min(decoded, measured), kDecoderPlacementNs);
}

}  // namespace
}  // namespace ptd::testing
