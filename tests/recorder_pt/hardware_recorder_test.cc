// The whole hardware recording flow (RecordHardware: PMU discovery, event attr, target
// launch/attach, rings, session, meta.json) with the kernel's rings replaced by the fake.
#include <cstdlib>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <climits>

#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <x86intrin.h>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "decoder/trace_decoder.h"
#include "absl/strings/str_format.h"
#include "recorder/images/elf_symbol.h"
#include "recorder/pt/hardware_recorder.h"
#include "recorder/pt/pt_recording.h"
#include "recorder/sideband/sideband_events.h"
#include "recorder/target/target_process.h"
#include "sideband/record_builder.h"
#include "sideband/record_reader.h"
#include "tests/recorder_pt/fake_ring_factory.h"
#include "tests/recorder_pt/fake_sysfs.h"
#include "tests/testing/psb_stream.h"
#include "tests/testing/test_util.h"

namespace ptd::pt {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::FakePtKernel;
using testing::FakePtSysfs;
using testing::FakeRingFactory;

std::string AsText(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

class HardwareRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakePtSysfs().WriteTo(sysfs_.path());
    env_.sysfs_root = sysfs_.path();
    env_.ring_factory = &factory_;
    env_.handle_signals = false;
    options_.output_dir = out_.Sub("trace.dir");
    options_.quiet = true;
    options_.snapshot = true;
    options_.snapshot_size = 16 * 4096;
    options_.data_size = 16 * 4096;
  }
  TraceMeta Meta() {
    auto meta = ReadTraceMeta(options_.output_dir);
    EXPECT_TRUE(meta.ok()) << meta.status();
    return meta.ok() ? *meta : TraceMeta{};
  }
  // Starts `/bin/sleep 30` (killed when the returned process goes) and points
  // options_.pids at it, for the --pid attach tests.
  absl::StatusOr<TargetProcess> AttachToSleeper() {
    LaunchOptions launch;
    launch.argv = {"/bin/sleep", "30"};
    absl::StatusOr<TargetProcess> target = TargetProcess::Launch(launch);
    if (!target.ok()) return target.status();
    if (absl::Status released = target->Release(); !released.ok()) return released;
    options_.pids = {target->pid()};
    return target;
  }
  // tests/recorder_pt/trigger_target.c making `calls` calls of ptd_trigger_point, with
  // --trigger on it.
  void TriggerOnTarget(int calls) {
    options_.command = {std::string(PTD_BINARY_DIR) + "/tests/recorder_pt/ptd-trigger-target",
                        std::to_string(calls), "300"};
    options_.trigger_symbol = "ptd_trigger_point";
  }
  std::string Chunk(const PtStream& stream, size_t i) {
    auto bytes = ReadFileToString(options_.output_dir + "/" + stream.file);
    EXPECT_TRUE(bytes.ok());
    const PtChunk& c = stream.chunks.at(i);
    return bytes->substr(c.file_offset, c.size);
  }

  ptd::testing::TempDir sysfs_;
  ptd::testing::TempDir out_;
  FakeRingFactory factory_;
  HardwareRecordEnv env_;
  RecordOptions options_;
};

TEST_F(HardwareRecorderTest, LaunchSnapshotAtExitWritesEveryRingAndTheConfig) {
  factory_.on_open = [](FakePtKernel& k) {
    k.WriteTrace(testing::TraceBytes(5000, 100 + k.options().cpu));
  };
  options_.command = {"/bin/sleep", "0.2"};
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "exit");
  EXPECT_EQ(summary->exit_status, 0);

  // One per-CPU ring per CPU, every event attribute as the kernel needs it.
  const int cpus = get_nprocs();
  auto requests = factory_.requests();
  ASSERT_EQ(requests.size(), static_cast<size_t>(cpus));
  for (const PtRingRequest& r : requests) {
    EXPECT_EQ(r.attr.type, 8u);  // from the fake sysfs "type"
    EXPECT_EQ(r.attr.enable_on_exec, 1u);
    EXPECT_EQ(r.attr.inherit, 1u);
    EXPECT_EQ(r.attr.exclude_kernel, 1u);
    // Sideband rides on the tracking (dummy) event, never on the PT event, which each
    // snapshot disables.
    EXPECT_EQ(r.attr.context_switch, 0u);
    EXPECT_EQ(r.attr.mmap2, 0u);
    EXPECT_EQ(r.tracking_attr.type, static_cast<uint32_t>(PERF_TYPE_SOFTWARE));
    EXPECT_EQ(r.tracking_attr.config, static_cast<uint64_t>(PERF_COUNT_SW_DUMMY));
    EXPECT_EQ(r.tracking_attr.context_switch, 1u);
    EXPECT_EQ(r.tracking_attr.mmap2, 1u);
    EXPECT_EQ(r.tracking_attr.enable_on_exec, 1u);
    EXPECT_EQ(r.tracking_attr.inherit, 1u);
    EXPECT_EQ(r.attr.sample_id_all, 1u);
    EXPECT_TRUE(r.overwrite);
    EXPECT_EQ(r.aux_size, options_.snapshot_size);
    EXPECT_GT(r.tid, 0);  // the launched child; its threads inherit
  }
  EXPECT_EQ(factory_.enables(), 0);  // enable_on_exec does it at the exec

  TraceMeta meta = Meta();
  EXPECT_EQ(meta.mode, TraceMode::kHardware);
  EXPECT_EQ(meta.per, "cpu");
  EXPECT_EQ(meta.end_reason, "exit");
  EXPECT_EQ(meta.command, options_.command);
  EXPECT_EQ(meta.pt.pmu_type, 8);
  // normal preset with psb_cyc: pt(0) cyc(1) mtc(9) tsc(10) branch(13) mtc_period=3 (14-17)
  // cyc_thresh=1 (19-22) psb_period=3 (24-27)
  EXPECT_EQ(meta.pt.config, (1ull << 0) | (1ull << 1) | (1ull << 9) | (1ull << 10) |
                                (1ull << 13) | (3ull << 14) | (1ull << 19) | (3ull << 24));
  EXPECT_EQ(meta.pt.timing, "normal");
  EXPECT_EQ(meta.pt.nom_freq, 24u);
  EXPECT_EQ(meta.pt.tsc_art_ratio_num, 188u);
  EXPECT_EQ(meta.pt.caps.at("psb_cyc"), "1");
  ASSERT_EQ(meta.streams.size(), static_cast<size_t>(cpus));
  for (const PtStream& s : meta.streams) {
    ASSERT_EQ(s.chunks.size(), 1u) << s.file;
    EXPECT_EQ(s.chunks[0].reason, "exit");
    EXPECT_TRUE(s.chunks[0].overwrite);
    EXPECT_EQ(Chunk(s, 0), AsText(testing::TraceBytes(5000, 100 + s.cpu))) << s.file;
  }
  EXPECT_EQ(meta.sideband.size(), static_cast<size_t>(cpus));
  bool vdso = false;
  for (const ImageEntry& image : meta.images) vdso |= image.kind == ImageKind::kVdso;
  EXPECT_TRUE(vdso) << "the vDSO of the launched image is dumped";
  EXPECT_THAT(meta.notes, Contains(HasSubstr("exited with 0")));
  // `info` shows the preset and every field it set.
  ptd::testing::CommandResult info = ptd::testing::RunCommand({PTD_CLI_PATH, "info", options_.output_dir});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("timing normal ("));
  EXPECT_THAT(info.out, HasSubstr("mtc_period=3"));
  EXPECT_THAT(info.out, HasSubstr("psb_period=3"));
}

// The session blocks SIGINT, SIGTERM and SIGUSR2 to read them from a signalfd; the
// launched program must start with the recorder's own mask and dispositions instead.
TEST_F(HardwareRecorderTest, LaunchedProgramStartsWithTheRecordersOwnSignalState) {
  const ptd::testing::SignalMasks parent =
      ptd::testing::SignalMasksOf(*ReadFileToString("/proc/self/status"));
  env_.handle_signals = true;
  const std::string report = out_.Sub("signals.txt");
  options_.command = {ptd::testing::Program("ptd_prog_signal_state"), report};
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->exit_status, 0);
  absl::StatusOr<std::string> status = ReadFileToString(report);
  ASSERT_TRUE(status.ok()) << status.status();
  const ptd::testing::SignalMasks child = ptd::testing::SignalMasksOf(*status);
  EXPECT_EQ(child.blocked, "0000000000000000");
  EXPECT_EQ(child.blocked, parent.blocked);
  EXPECT_EQ(child.ignored, parent.ignored);
}

// The child is resolved before it execs: its /proc/PID/exe is still ptrace-direct (or
// this test), whose own main must not be what the kernel filters on.
TEST_F(HardwareRecorderTest, FilterByNameResolvesInTheLaunchedProgram) {
  const std::string program = std::string(PTD_BINARY_DIR) + "/tests/recorder_pt/ptd-trigger-target";
  options_.command = {program, "1", "1"};
  options_.filter = "filter main";
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  char real[PATH_MAX];
  ASSERT_NE(realpath(program.c_str(), real), nullptr);
  absl::StatusOr<ElfSymbolAddress> main_symbol = FindElfFunction(real, "main");
  ASSERT_TRUE(main_symbol.ok()) << main_symbol.status();
  ASSERT_FALSE(factory_.requests().empty());
  for (const PtRingRequest& r : factory_.requests()) {
    EXPECT_EQ(r.filter, absl::StrFormat("filter 0x%x/0x%x@%s", main_symbol->file_offset,
                                        main_symbol->size, real));
  }
}

TEST_F(HardwareRecorderTest, ControlFifoSnapshotsAreSeparateChunks) {
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(3000, 1)); };
  options_.command = {"/bin/sleep", "30"};
  options_.per_thread = true;
  options_.control_fifo = out_.Sub("ctl");
  absl::StatusOr<HardwareRecordSummary> summary;
  std::thread recorder([&] { summary = RecordHardware(options_, env_); });
  EXPECT_EQ(ptd::testing::ControlFifoCommand(options_.control_fifo, "snapshot"), "ack");
  // The rings exist once the first snapshot is acknowledged.
  ASSERT_EQ(factory_.size(), 1u);
  factory_.kernel(0).WriteTrace(testing::TraceBytes(7000, 2));
  EXPECT_EQ(ptd::testing::ControlFifoCommand(options_.control_fifo, "stop"), "ack");
  recorder.join();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "control");
  TraceMeta meta = Meta();
  EXPECT_EQ(meta.per, "thread");
  ASSERT_EQ(meta.streams.size(), 1u);
  const PtStream& s = meta.streams[0];
  EXPECT_GT(s.tid, 0);
  EXPECT_EQ(s.file, "aux/tid" + std::to_string(s.tid) + ".pt");
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].reason, "control");
  EXPECT_EQ(s.chunks[1].reason, "control");
  EXPECT_EQ(Chunk(s, 0), AsText(testing::TraceBytes(3000, 1)));
  EXPECT_EQ(Chunk(s, 1), AsText(testing::TraceBytes(7000, 2)));
  EXPECT_EQ(s.chunks[1].aux_offset, 3000u);
  EXPECT_EQ(factory_.requests()[0].attr.inherit, 0u);  // per-thread rings cannot inherit
}

TEST_F(HardwareRecorderTest, LinearModeTruncationReachesMetaJson) {
  const size_t ring = 4 * 4096;
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(3 * 4 * 4096, 3)); };
  options_.command = {"/bin/sleep", "0.2"};
  options_.per_thread = true;
  options_.snapshot = false;
  options_.buffer_size = ring;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(factory_.requests()[0].attr.aux_watermark, ring / 4);
  TraceMeta meta = Meta();
  ASSERT_EQ(meta.streams.size(), 1u);
  const PtStream& s = meta.streams[0];
  ASSERT_GE(s.chunks.size(), 1u);
  EXPECT_TRUE(s.chunks[0].truncated);  // read back from meta.json, not from memory
  EXPECT_FALSE(s.chunks[0].overwrite);
  EXPECT_EQ(Chunk(s, 0), AsText(testing::TraceBytes(3 * ring, 3)).substr(0, ring));
  EXPECT_GE(summary->lost_chunks, 1u);
}

// Linear mode publishes aux_head only at the wakeup watermark and when the event stops
// (perf_aux_output_end from the PMI or pt_event_stop): a stop other than the target's
// exit must disable the events before its last read, or the newest trace is never seen.
TEST_F(HardwareRecorderTest, LinearModeStopReadsTheTraceBelowTheWatermark) {
  const size_t ring = 16 * 4096;
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(5000, 7)); };
  options_.command = {"/bin/sleep", "30"};
  options_.per_thread = true;
  options_.snapshot = false;
  options_.buffer_size = ring;
  options_.duration_s = 0.3;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "duration");
  TraceMeta meta = Meta();
  ASSERT_EQ(meta.streams.size(), 1u);
  const PtStream& s = meta.streams[0];
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(Chunk(s, 0), AsText(testing::TraceBytes(5000, 7)));
}

TEST_F(HardwareRecorderTest, AttachEnablesEventsAndSynthesizesExistingMappings) {
  absl::StatusOr<TargetProcess> target = AttachToSleeper();
  ASSERT_TRUE(target.ok()) << target.status();
  options_.duration_s = 0.2;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "duration");
  EXPECT_EQ(factory_.enables(), static_cast<int>(factory_.size()));
  for (const PtRingRequest& r : factory_.requests()) {
    EXPECT_EQ(r.attr.enable_on_exec, 0u);
    EXPECT_EQ(r.tid, target->pid());
  }
  TraceMeta meta = Meta();
  EXPECT_EQ(meta.pids, std::vector<int>{target->pid()});
  bool synthesized = false;
  for (const SidebandFile& f : meta.sideband) synthesized |= f.origin == "synthesized";
  EXPECT_TRUE(synthesized);
  for (const PtStream& s : meta.streams) {
    ASSERT_EQ(s.chunks.size(), 0u) << "nothing was produced";
  }
}

TEST_F(HardwareRecorderTest, TriggerSymbolTakesTheSnapshot) {
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(1000, 4)); };
  TriggerOnTarget(2);
  options_.per_thread = true;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "trigger");
  TraceMeta meta = Meta();
  ASSERT_EQ(meta.streams.size(), 1u);
  ASSERT_EQ(meta.streams[0].chunks.size(), 1u);
  EXPECT_EQ(meta.streams[0].chunks[0].reason, "trigger");
  EXPECT_THAT(meta.notes, Contains(HasSubstr("trigger hit")));
}

TEST_F(HardwareRecorderTest, TriggerAfterTakesTheSnapshotOnTheNthHit) {
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(1000, 4)); };
  TriggerOnTarget(3);
  options_.per_thread = true;
  options_.trigger_after = 3;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "trigger");
  EXPECT_THAT(Meta().notes, Contains(AllOf(HasSubstr("--trigger-after 3"), HasSubstr("first on hit 3"))));
}

// tests/programs/prog_slow_call.c: handle_request sleeps 300 ms on its 7th call, made by
// a thread created after the recording started; calls 1..10 are the worker's, 11..14 main's.
std::vector<std::string> SlowCallCommand() { return {ptd::testing::Program("ptd_prog_slow_call"), "sleep"}; }

TEST_F(HardwareRecorderTest, SlowerThanFiresOnTheSlowCallOfAThreadCreatedLater) {
  // The return breakpoint is placed after the entry sample is read: too late under ASan.
  if (std::getenv("PTD_UNDER_SANITIZER") != nullptr) GTEST_SKIP() << "racy under ASan/UBSan (the return breakpoint comes late)";
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(1000, 4)); };
  options_.command = SlowCallCommand();
  options_.trigger_symbol = "handle_request";
  options_.trigger_slower_than = "100ms";
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "trigger");
  TraceMeta meta = Meta();
  ASSERT_TRUE(meta.trigger.has_value());
  ASSERT_FALSE(meta.pids.empty());
  EXPECT_NE(meta.trigger->tid, meta.pids[0]);
  EXPECT_EQ(meta.trigger->hit, 1u);
  EXPECT_GT(meta.trigger->return_ns - meta.trigger->entry_ns, 100'000'000u);
  // The return site's breakpoint is placed once the first entry's sample is read: the
  // calls before it may have returned unseen, the slow one's return is what fired.
  EXPECT_THAT(meta.notes, Contains(AllOf(HasSubstr("--trigger-slower-than handle_request"), HasSubstr("1 slower"))));
}

TEST_F(HardwareRecorderTest, TriggerAfterCountsTheHitsOfEveryThread) {
  factory_.on_open = [](FakePtKernel& k) { k.WriteTrace(testing::TraceBytes(1000, 4)); };
  for (uint64_t after : {5u, 12u}) {
    options_.command = SlowCallCommand();
    options_.force = true;
    options_.trigger_symbol = "handle_request";
    options_.trigger_after = after;
    auto summary = RecordHardware(options_, env_);
    ASSERT_TRUE(summary.ok()) << summary.status();
    TraceMeta meta = Meta();
    EXPECT_EQ(summary->end_reason, "trigger") << "--trigger-after " << after << ": " << absl::StrJoin(meta.notes, "; ");
    ASSERT_TRUE(meta.trigger.has_value());
    EXPECT_EQ(meta.trigger->hit, after);
    ASSERT_FALSE(meta.pids.empty());
    if (after <= 10) {
      EXPECT_NE(meta.trigger->tid, meta.pids[0]);
    } else {
      EXPECT_EQ(meta.trigger->tid, meta.pids[0]);
    }
  }
}

TEST_F(HardwareRecorderTest, TriggerProblemsAreRefusedBeforeAnyWork) {
  TriggerOnTarget(3);
  options_.trigger_symbol = "ptd_trigger_pont";
  auto missing = RecordHardware(options_, env_);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("ptd_trigger_pont"));
  options_.trigger_symbol = "ptd_trigger_point";
  options_.trigger_slower_than = "soon";
  EXPECT_FALSE(RecordHardware(options_, env_).ok());
  EXPECT_FALSE(PathExists(options_.output_dir));
  EXPECT_EQ(factory_.size(), 0u);
}

// --trim's fixture: rings whose pages convert the TSC to the perf clock at 1.5 ns per tick
// from 10 s before the recording started (a raw TSC is nowhere near a perf-clock time),
// and PSB+ groups timed around the trigger's entry, which comes after the rings open.
class HardwareTrimTest : public HardwareRecorderTest {
 protected:
  void SetUp() override {
    HardwareRecorderTest::SetUp();
    TriggerOnTarget(2);
    options_.trim = true;
    options_.snapshot = false;
    options_.buffer_size = 16 * 4096;
  }
  // The TSC the fake's pages convert to `ns`.
  uint64_t TscAt(uint64_t ns) const { return (ns - zero_) * 2 / 3; }
  // Sets the pages' conversion and fills each ring with PsbStream(psb_times(ring's cpu)),
  // where times are perf-clock ns relative to when the ring opened (nullopt: no TSC).
  void WriteStreams(std::function<std::vector<std::optional<int64_t>>(int cpu)> psb_times) {
    factory_.on_open = [this, psb_times](FakePtKernel& k) {
      if (opened_ns_ == 0) {  // one conversion for every ring, as one clock gives
        absl::StatusOr<int64_t> offset = MeasurePerfClockOffset();
        ASSERT_TRUE(offset.ok()) << offset.status();
        opened_ns_ = PerfClockNs() + *offset;
        zero_ = opened_ns_ - 10'000'000'000;
      }
      const uint64_t now = opened_ns_;
      k.header()->time_zero = zero_;
      k.header()->time_mult = 3 << 20;
      k.header()->time_shift = 21;
      k.header()->cap_user_time_zero = 1;
      std::vector<std::optional<uint64_t>> tscs;
      for (std::optional<int64_t> t : psb_times(k.options().cpu)) {
        tscs.push_back(t ? std::optional<uint64_t>(TscAt(now + *t)) : std::nullopt);
      }
      std::vector<uint64_t> offsets;
      written_.push_back(ptd::testing::PsbStream(tscs, &offsets));
      psb_offsets_.push_back(offsets);
      k.WriteTrace(written_.back());
    };
  }
  uint64_t opened_ns_ = 0;  // perf clock when the first ring opened
  uint64_t zero_ = 0;
  std::vector<std::vector<uint8_t>> written_;  // per ring, in opening order
  std::vector<std::vector<uint64_t>> psb_offsets_;
};

constexpr int64_t kSecond = 1'000'000'000;

TEST_F(HardwareTrimTest, TrimCutsTheStreamAtItsLastPsbBeforeTheTriggersEntry) {
  // PSBs 2 s and 1 ms before the ring opened, then 1 h after: the trigger fires between.
  WriteStreams([](int) { return std::vector<std::optional<int64_t>>{-2 * kSecond, -kSecond / 1000, 3600 * kSecond}; });
  options_.per_thread = true;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->end_reason, "trigger");
  TraceMeta meta = Meta();
  ASSERT_TRUE(meta.trigger.has_value());
  EXPECT_EQ(meta.trigger->trimmed_from_ns, meta.trigger->entry_ns);
  ASSERT_EQ(meta.streams.size(), 1u);
  ASSERT_EQ(written_.size(), 1u);
  const PtStream& s = meta.streams[0];
  const uint64_t cut = psb_offsets_[0][1];
  // The file starts exactly at the second PSB; the chunk is re-based on it.
  auto file = ReadFileBytes(options_.output_dir + "/" + s.file);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(AsText(*file), AsText(written_[0]).substr(cut));
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].file_offset, 0u);
  EXPECT_EQ(s.chunks[0].size, written_[0].size() - cut);
  EXPECT_EQ(s.chunks[0].aux_offset, cut);
  EXPECT_TRUE(s.chunks[0].lost_before);
  EXPECT_THAT(meta.notes, Contains(HasSubstr("--trim: 1 stream(s) cut")));

  // What is left decodes: every PSB kept is a sync point, and nothing is an error.
  decoder::DecodeOptions decode;
  auto decoded = decoder::DecodeTraceToFtf(options_.output_dir, "", decode);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->stats[decoder::Stat::kErrors], 0u);
  EXPECT_EQ(decoded->stats[decoder::Stat::kBytes], written_[0].size() - cut);
}

TEST_F(HardwareTrimTest, PerCpuStreamsWithNoPsbBeforeTheEntryAreKeptWhole) {
  // Only an untimed PSB and one an hour after the ring opened: nothing to cut at.
  WriteStreams([](int) { return std::vector<std::optional<int64_t>>{std::nullopt, 3600 * kSecond}; });
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  TraceMeta meta = Meta();
  ASSERT_TRUE(meta.trigger.has_value());
  EXPECT_EQ(meta.trigger->trimmed_from_ns, meta.trigger->entry_ns);
  ASSERT_EQ(meta.streams.size(), written_.size());
  for (size_t i = 0; i < meta.streams.size(); ++i) {
    const PtStream& s = meta.streams[i];
    EXPECT_GE(s.cpu, 0);
    auto file = ReadFileBytes(options_.output_dir + "/" + s.file);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(AsText(*file), AsText(written_[i])) << s.file;
    ASSERT_EQ(s.chunks.size(), 1u);
    EXPECT_EQ(s.chunks[0].file_offset, 0u);
    EXPECT_EQ(s.chunks[0].size, written_[i].size());
    EXPECT_FALSE(s.chunks[0].lost_before);
  }
  EXPECT_THAT(meta.notes, Contains(HasSubstr(absl::StrCat("0 stream(s) cut"))));
}

TEST_F(HardwareTrimTest, WithoutATscConversionTheStreamsAreKeptWholeAndSaySo) {
  WriteStreams([](int) { return std::vector<std::optional<int64_t>>{-2 * kSecond, 3600 * kSecond}; });
  auto set_times = factory_.on_open;
  factory_.on_open = [set_times](FakePtKernel& k) {
    set_times(k);
    k.header()->cap_user_time_zero = 0;
  };
  options_.per_thread = true;
  auto summary = RecordHardware(options_, env_);
  ASSERT_TRUE(summary.ok()) << summary.status();
  TraceMeta meta = Meta();
  ASSERT_TRUE(meta.trigger.has_value());
  EXPECT_EQ(meta.trigger->trimmed_from_ns, 0u);
  ASSERT_EQ(meta.streams.size(), 1u);
  auto file = ReadFileBytes(options_.output_dir + "/" + meta.streams[0].file);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(AsText(*file), AsText(written_[0]));
  EXPECT_THAT(meta.notes, Contains(HasSubstr("cap_user_time_zero 0")));
}

TEST_F(HardwareRecorderTest, PerThreadModeFollowsThreadsCreatedAfterStart) {
  // The target's ring reports a new thread the way the kernel does: PERF_RECORD_FORK
  // with pid == ppid, in the sideband layout of the PT event.
  constexpr uint32_t kNewTid = 4000000;  // any tid: the fake opens whatever it is asked
  factory_.on_open = [](FakePtKernel& k) {
    if (k.options().tid == static_cast<int>(kNewTid)) return;
    k.WriteTrace(testing::TraceBytes(1000, 5));
    RecordFormat format;
    format.sample_type = kSidebandSampleType;
    format.sample_id_all = true;
    RecordBuilder builder(format);
    ForkRecord fork;
    fork.pid = fork.ppid = k.options().pid;
    fork.tid = kNewTid;
    fork.ptid = k.options().pid;
    fork.time = 123;
    SampleId id;
    id.pid = k.options().pid;
    id.tid = static_cast<uint32_t>(k.options().tid);
    id.time = 123;
    builder.Append(fork, id);
    EXPECT_TRUE(k.WriteRecord(builder.bytes()));
  };
  options_.command = {"/bin/sleep", "30"};
  options_.per_thread = true;
  options_.control_fifo = out_.Sub("ctl");
  absl::StatusOr<HardwareRecordSummary> summary;
  std::thread recorder([&] { summary = RecordHardware(options_, env_); });
  // Periodic drains read the FORK and open the new thread's ring.
  for (int i = 0; i < 1000 && factory_.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Its events are opened disabled and enabled once its ring exists: it traces from then.
  for (int i = 0; i < 1000 && factory_.size() == 2 && !factory_.kernel(1).pt_enabled(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (factory_.size() == 2) {
    EXPECT_EQ(factory_.kernel(1).WriteTrace(testing::TraceBytes(2000, 6)), 2000u);
  }
  EXPECT_EQ(ptd::testing::ControlFifoCommand(options_.control_fifo, "stop"), "ack");
  recorder.join();
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(factory_.size(), 2u);
  const std::vector<PtRingRequest> requests = factory_.requests();
  EXPECT_EQ(requests[1].tid, static_cast<int>(kNewTid));
  EXPECT_EQ(requests[1].cpu, -1);
  EXPECT_EQ(requests[1].attr.enable_on_exec, 0u) << "the thread runs already";
  EXPECT_EQ(requests[1].attr.inherit, 0u);
  EXPECT_EQ(factory_.enables(), 1) << "only the new ring is enabled explicitly";
  TraceMeta meta = Meta();
  ASSERT_EQ(meta.streams.size(), 2u);
  const PtStream& added = meta.streams[1];
  EXPECT_EQ(added.tid, static_cast<int>(kNewTid));
  ASSERT_EQ(added.chunks.size(), 1u);
  EXPECT_EQ(Chunk(added, 0), AsText(testing::TraceBytes(2000, 6)));
  EXPECT_THAT(meta.notes, Contains(HasSubstr("was created while recording")));
}

// perf_event_mmap_page's documented TSC -> perf time conversion, written out here.
uint64_t PerfTime(uint64_t tsc, uint64_t zero, uint32_t mult, uint16_t shift) {
  const uint64_t quot = tsc >> shift;
  const uint64_t rem = tsc & ((1ull << shift) - 1);
  return zero + quot * mult + ((rem * mult) >> shift);
}

TEST_F(HardwareRecorderTest, SynthesizedRecordsCarryTheEventClock) {
  // Conversion values as a hardware PT event's page has them (cap_user_time_zero).
  constexpr uint64_t kZero = 5000000000ull;
  constexpr uint32_t kMult = 3 << 20;
  constexpr uint16_t kShift = 21;  // 1.5 ns per TSC tick
  factory_.on_open = [](FakePtKernel& k) {
    k.header()->time_zero = kZero;
    k.header()->time_mult = kMult;
    k.header()->time_shift = kShift;
    k.header()->cap_user_time_zero = 1;
  };
  absl::StatusOr<TargetProcess> target = AttachToSleeper();
  ASSERT_TRUE(target.ok()) << target.status();
  options_.duration_s = 0.1;
  const uint64_t before = PerfTime(__rdtsc(), kZero, kMult, kShift);
  auto summary = RecordHardware(options_, env_);
  const uint64_t after = PerfTime(__rdtsc(), kZero, kMult, kShift);
  ASSERT_TRUE(summary.ok()) << summary.status();
  TraceMeta meta = Meta();
  size_t records = 0;
  for (const SidebandFile& f : meta.sideband) {
    if (f.origin != "synthesized") continue;
    auto bytes = ReadFileBytes(options_.output_dir + "/" + f.file);
    ASSERT_TRUE(bytes.ok());
    RecordFormat format;
    format.sample_type = f.sample_type;
    format.sample_id_all = f.sample_id_all;
    RecordReader reader(*bytes, f.file, format);
    while (true) {
      auto record = reader.Next();
      ASSERT_TRUE(record.ok()) << record.status();
      if (!record->has_value()) break;
      ++records;
      // Not 0: a time on the event's clock, taken while RecordHardware ran.
      EXPECT_GE((*record)->sample_id.time, before);
      EXPECT_LE((*record)->sample_id.time, after);
    }
  }
  EXPECT_GT(records, 2u);  // MMAP2 of the executable, libc, ld.so, [vdso]; COMM
}

TEST_F(HardwareRecorderTest, BadOptionsFailBeforeAnythingIsCreated) {
  options_.command = {"/bin/true"};
  options_.snapshot_size = 3000;
  auto summary = RecordHardware(options_, env_);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("--snapshot-size"));
  EXPECT_FALSE(PathExists(options_.output_dir));
  EXPECT_EQ(factory_.size(), 0u);
  options_.snapshot_size = 16 * 4096;
  options_.pt_config = "nonsense=1";
  summary = RecordHardware(options_, env_);
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("nonsense"));
}

TEST_F(HardwareRecorderTest, NoPmuIsTheExactMessageAndNothingIsTouched) {
  ptd::testing::TempDir empty_sysfs;
  env_.sysfs_root = empty_sysfs.path();
  options_.pids = {getpid()};
  auto summary = RecordHardware(options_, env_);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(summary.status().message()),
            "no intel_pt PMU on this machine (AMD, VM, or old kernel); use --emulate");
  EXPECT_FALSE(PathExists(options_.output_dir));
}

}  // namespace
}  // namespace ptd::pt
