// Real programs recorded with the ptrace emulation backend, retraced by libipt's block
// decoder (tests/emulate/libipt_retrace.cc) and compared with the ground truth the
// emulator wrote from the registers it saw.
#include "recorder/emulate/emulated_recorder.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/emulate/ground_truth.h"
#include "tests/emulate/libipt_retrace.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

// The recording (not decoded: libipt retraces it) and the emulator's ground truth.
struct Recording : DecodedRecording {
  std::string truth;
  std::vector<GroundTruthThread> threads;
};

Recording Record(const TempDir& tmp, const std::vector<std::string>& command,
                 const std::string& start_at, int virtual_cpus = 0,
                 const std::function<void(RecordOptions&)>& tweak = nullptr) {
  RecordOptions options;
  options.command = command;
  options.output_dir = tmp.Sub("trace.dir");
  options.ground_truth_path = tmp.Sub("truth.bin");
  options.start_at_symbol = start_at;
  options.virtual_cpus = virtual_cpus;
  options.emulate = true;
  options.quiet = true;
  if (tweak) tweak(options);
  Recording rec;
  static_cast<DecodedRecording&>(rec) = RecordForTest(RecordEmulated, options);
  if (rec.dir.empty()) return rec;
  rec.truth = options.ground_truth_path;
  absl::StatusOr<std::vector<GroundTruthThread>> threads = LoadGroundTruth(rec.truth);
  EXPECT_TRUE(threads.ok()) << threads.status();
  if (threads.ok()) rec.threads = *threads;
  return rec;
}

// Every per-thread stream decodes without error to exactly the thread's ground truth.
void ExpectPerThreadRetraceMatchesTruth(const Recording& rec) {
  ASSERT_EQ(rec.meta.mode, TraceMode::kEmulated);
  ASSERT_EQ(rec.meta.per, "thread");
  ASSERT_FALSE(rec.threads.empty());
  uint64_t total = 0;
  for (const GroundTruthThread& thread : rec.threads) {
    auto stream = std::find_if(rec.meta.streams.begin(), rec.meta.streams.end(),
                               [&](const PtStream& s) { return s.tid == thread.tid; });
    if (thread.ips.empty()) continue;
    ASSERT_NE(stream, rec.meta.streams.end()) << "no stream for thread " << thread.tid;
    RetraceResult result = RetraceStream(rec.dir, rec.meta, *stream);
    EXPECT_EQ(result.errors, 0) << result.first_error;
    EXPECT_EQ(result.instructions, thread.ips.size()) << "thread " << thread.tid;
    total += thread.ips.size();
  }
  EXPECT_EQ(total, rec.summary.instructions);
}

// libipt's time (MTC + CYC with the conversion meta.json states) against the truth's
// clock. The truth stamps a run of instructions with the time of its first one, so an
// instruction retired between its run's time L and the next record's time U. After a
// block, libipt's time is that of the packet that resolved the block's last branch, or of
// the status packets it read ahead of the next one (PSB+, MTC): not after the next
// block's last instruction, and not before the oldest branch a TNT packet may hold
// (6 bits: a few blocks back; the CYC before a TNT is its first branch's time).
void ExpectLibiptTimeFollowsTheTruth(const Recording& rec) {
  ASSERT_EQ(rec.meta.pt.fields.count("cyc"), 1u);
  ASSERT_EQ(rec.threads.size(), 1u);
  const int tid = rec.threads[0].tid;
  absl::StatusOr<GroundTruthReader> reader = GroundTruthReader::Open(rec.truth);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint64_t> low;           // per instruction: its run's time
  std::vector<uint64_t> later_record;  // per instruction: index into `times` of what follows
  std::vector<uint64_t> times;         // every record time of the thread, in order
  GroundTruthRecord record;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    if (record.tid != tid) continue;
    times.push_back(record.time);
    if (record.type == GroundTruthTag::kInsns) low.push_back(record.time);
  }
  // U: the first record time after the instruction's run time.
  std::vector<uint64_t> high(low.size(), UINT64_MAX);
  for (size_t j = 0, k = 0; j < low.size(); ++j) {
    while (k < times.size() && times[k] <= low[j]) ++k;
    if (k < times.size()) high[j] = times[k];
  }
  RetraceResult result = RetraceStream(rec.dir, rec.meta, rec.meta.streams[0]);
  ASSERT_EQ(result.errors, 0) << result.first_error;
  EXPECT_EQ(result.lost_mtc, 0u);
  EXPECT_EQ(result.lost_cyc, 0u);
  ASSERT_EQ(result.instructions, low.size());
  const size_t blocks = result.block_ninsn.size();
  std::vector<uint64_t> first(blocks + 1, 0);
  for (size_t i = 0; i < blocks; ++i) first[i + 1] = first[i] + result.block_ninsn[i];
  uint64_t previous = 0;
  for (size_t i = 0; i < blocks; ++i) {
    const uint64_t t = result.block_times[i];
    EXPECT_GE(t, previous) << "block " << i;
    previous = t;
    const uint64_t next_end = first[std::min(i + 2, blocks)] - 1;
    EXPECT_LE(t, high[next_end]) << "block " << i << " is ahead of the next block";
    // A TNT packet's six branches end at most six blocks; libipt also ends blocks where
    // no packet is used (e.g. its block cache), so allow twelve.
    const uint64_t oldest = first[i >= 12 ? i - 12 : 0];
    EXPECT_GE(t, low[oldest]) << "block " << i << " lags more than a TNT packet";
  }
}

size_t CountEvents(const Recording& rec, GroundTruthTag tag) {
  size_t n = 0;
  for (const GroundTruthThread& t : rec.threads) {
    for (const GroundTruthRecord& e : t.events) n += e.type == tag;
  }
  return n;
}

// Records tests/programs/<program> from main and checks every thread's retrace.
Recording RecordFromMainAndRetrace(const TempDir& tmp, const std::string& program) {
  Recording rec = Record(tmp, {Program(program)}, "main");
  ExpectPerThreadRetraceMatchesTruth(rec);
  return rec;
}

TEST(EmulatedRecorderTest, RetracesCallsRecursionTailCallsAndPlt) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_calls");
  ExpectLibiptTimeFollowsTheTruth(rec);
  EXPECT_EQ(rec.summary.exit_status, 0);
  // fib(12) alone makes 465 calls, each returning.
  EXPECT_GT(CountEvents(rec, GroundTruthTag::kCall), 465u);
  EXPECT_GT(CountEvents(rec, GroundTruthTag::kReturn), 465u);
}

// On the default time axis each [syscall] slice lasts what the stepper measured: from
// the syscall's entry (its SYSCALL record) to the thread's next instruction.
TEST(EmulatedRecorderTest, SyscallSlicesLastTheTimeTheStepperMeasured) {
  TempDir tmp;
  Recording rec = Record(tmp, {Program("ptd_prog_calls")}, "");
  ASSERT_EQ(rec.threads.size(), 1u);
  const GroundTruthThread& thread = rec.threads[0];
  std::vector<uint64_t> measured;  // per syscall: entry to the next instruction
  for (size_t e = 0; e < thread.events.size(); ++e) {
    if (thread.events[e].type != GroundTruthTag::kSyscall) continue;
    const size_t next = thread.event_insn_index[e];
    if (next < thread.ip_times.size()) measured.push_back(thread.ip_times[next] - thread.events[e].time);
  }
  absl::StatusOr<DecodedTrace> decoded = DecodeForTest(rec.dir, "[syscall]");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  std::vector<uint64_t> slices;
  for (const WatchedSlice& slice : decoded->watched) {
    if (slice.returned) slices.push_back(slice.end - slice.begin);
  }
  ASSERT_GT(measured.size(), 20u);
  EXPECT_EQ(slices, measured);
}

TEST(EmulatedRecorderTest, RetracesClockGettimeInTheVdso) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_vdso");
  // The truth shows execution inside the dumped vDSO; the retrace above only succeeds
  // if the dump was in the image.
  const ImageEntry* vdso = nullptr;
  for (const ImageEntry& e : rec.meta.images) {
    if (e.kind == ImageKind::kVdso) vdso = &e;
  }
  ASSERT_NE(vdso, nullptr);
  ASSERT_FALSE(rec.threads.empty());
  size_t in_vdso = 0;
  for (uint64_t ip : rec.threads[0].ips) in_vdso += ip >= vdso->vaddr && ip < vdso->vaddr + vdso->size;
  EXPECT_GT(in_vdso, 100u * 10);  // 100 calls of at least ten instructions
}

TEST(EmulatedRecorderTest, RetracesEveryThreadOfAPthreadProgram) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_threads");
  EXPECT_EQ(rec.threads.size(), 3u);
  EXPECT_EQ(rec.meta.streams.size(), 3u);
}

TEST(EmulatedRecorderTest, SignalHandlerIsAnAsynchronousTransfer) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_signal");
  EXPECT_EQ(rec.summary.exit_status, 0);
  EXPECT_EQ(CountEvents(rec, GroundTruthTag::kSignal), 3u);
  EXPECT_EQ(rec.summary.signals_delivered, 3u);
}

TEST(EmulatedRecorderTest, LongjmpUnwindsSeveralFramesAtOnce) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_longjmp");
  ASSERT_FALSE(rec.threads.empty());
  int deep_unwinds = 0;
  for (const GroundTruthRecord& e : rec.threads[0].events) {
    // dive(0..4) plus longjmp's own frame at least.
    if (e.type == GroundTruthTag::kUnwind && e.count >= 5) ++deep_unwinds;
  }
  EXPECT_EQ(deep_unwinds, 3);
}

TEST(EmulatedRecorderTest, RetracesCxxExceptionsThroughSeveralFrames) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_cxx_exceptions");
  EXPECT_EQ(rec.summary.exit_status, 0);
  EXPECT_GE(CountEvents(rec, GroundTruthTag::kUnwind), 2u);
}

TEST(EmulatedRecorderTest, RetracesCodeOfADlopenedLibrary) {
  TempDir tmp;
  Recording rec = RecordFromMainAndRetrace(tmp, "ptd_prog_dlopen");
  EXPECT_EQ(rec.summary.exit_status, 0);
}

TEST(EmulatedRecorderTest, RetracesOcamlExceptions) {
  if (!PathExists(Program("ptd_prog_ocaml"))) GTEST_SKIP() << "ocamlopt not installed";
  TempDir tmp;
  Recording rec = Record(tmp, {Program("ptd_prog_ocaml")}, "camlProg_ocaml__entry");
  ExpectPerThreadRetraceMatchesTruth(rec);
  EXPECT_EQ(rec.summary.exit_status, 0);
  // `search i 5` raises out of six frames of `search` once per loop iteration (3), and
  // `deep 300` raises out of 301 frames of `deep` once.
  size_t multi_frame = 0, very_deep = 0;
  for (const GroundTruthRecord& e : rec.threads[0].events) {
    if (e.type != GroundTruthTag::kUnwind) continue;
    multi_frame += e.count >= 6;
    very_deep += e.count >= 301;
  }
  EXPECT_GE(multi_frame, 3u);
  EXPECT_EQ(very_deep, 1u);
}

TEST(EmulatedRecorderTest, PerCpuStreamsCarryAConsistentSchedule) {
  TempDir tmp;
  Recording rec = Record(tmp, {Program("ptd_prog_threads")}, "main", /*virtual_cpus=*/2);
  ASSERT_EQ(rec.meta.per, "cpu");
  ASSERT_EQ(rec.meta.streams.size(), 2u);
  std::map<int, uint64_t> decoded;
  for (const PtStream& stream : rec.meta.streams) {
    ASSERT_GE(stream.cpu, 0);
    RetraceResult result = RetraceStream(rec.dir, rec.meta, stream);
    EXPECT_EQ(result.errors, 0) << result.first_error;
    for (auto [tid, n] : result.per_tid) decoded[tid] += n;
  }
  // Attributing blocks by the synthesized switch records gives every thread exactly its
  // ground-truth instructions: the schedule and the streams agree.
  ASSERT_EQ(rec.threads.size(), 3u);
  for (const GroundTruthThread& thread : rec.threads) {
    EXPECT_EQ(decoded[thread.tid], thread.ips.size()) << "thread " << thread.tid;
  }
  EXPECT_EQ(decoded.count(-1), 0u) << "instructions outside any scheduled thread";
}

TEST(EmulatedRecorderTest, FrequentPsbsWithAndWithoutReturnCompressionRetrace) {
  for (bool noretcomp : {false, true}) {
    TempDir tmp;
    Recording rec = Record(tmp, {Program("ptd_prog_calls")}, "main", 0, [&](RecordOptions& o) {
      o.psb_period = 256;
      o.noretcomp = noretcomp;
      o.timing = TimingPreset::kLow;
    });
    ExpectPerThreadRetraceMatchesTruth(rec);
    EXPECT_EQ(rec.meta.pt.fields["noretcomp"], noretcomp ? 1u : 0u);
    EXPECT_EQ(rec.meta.pt.psb_period_bytes, 256u);
  }
}

TEST(EmulatedRecorderTest, SnapshotKeepsTheNewestBytesAndDecodesFromTheFirstPsb) {
  TempDir tmp;
  Recording rec = Record(tmp, {Program("ptd_prog_calls")}, "main", 0, [](RecordOptions& o) {
    o.snapshot = true;
    o.snapshot_size = 4096;
    o.psb_period = 256;
    // The wall clock's timing packets (a single step is microseconds) make the stream about
    // twice the smallest ring; on the virtual axis it would fit whole.
    o.wall_clock = true;
  });
  ASSERT_EQ(rec.meta.streams.size(), 1u);
  const PtStream& stream = rec.meta.streams[0];
  ASSERT_EQ(stream.chunks.size(), 1u);
  EXPECT_EQ(stream.chunks[0].size, 4096u);
  EXPECT_TRUE(stream.chunks[0].overwrite);
  EXPECT_EQ(stream.chunks[0].reason, "exit");
  ASSERT_GT(rec.summary.pt_bytes, 4096u);  // the ring did wrap
  EXPECT_EQ(stream.chunks[0].aux_offset, rec.summary.pt_bytes - 4096);
  RetraceResult result = RetraceStream(rec.dir, rec.meta, stream);
  EXPECT_EQ(result.errors, 0) << result.first_error;
  ASSERT_FALSE(rec.threads.empty());
  const std::vector<uint64_t>& ips = rec.threads[0].ips;
  EXPECT_GT(result.instructions, 0u);
  EXPECT_LT(result.instructions, ips.size());
  // What survives is the end of the run: the last decoded block starts at one of the
  // last instructions of the ground truth.
  ASSERT_FALSE(result.block_ips.empty());
  const uint64_t last_block = result.block_ips.back();
  EXPECT_NE(std::find(ips.end() - std::min<size_t>(ips.size(), 64), ips.end(), last_block), ips.end());
}

// The emulator catches SIGINT, SIGTERM and SIGUSR2 and its control thread blocks every
// signal; the launched program must start with the recorder's own mask and dispositions.
TEST(EmulatedRecorderTest, LaunchedProgramStartsWithTheRecordersOwnSignalState) {
  TempDir tmp;
  const SignalMasks parent = SignalMasksOf(*ReadFileToString("/proc/self/status"));
  const std::string report = tmp.Sub("signals.txt");
  Recording rec = Record(tmp, {Program("ptd_prog_signal_state"), report}, "main");
  ASSERT_FALSE(rec.dir.empty());
  ExpectSignalStateOf(parent, report);
}

TEST(EmulatedRecorderTest, RefusesBadOptions) {
  RecordOptions options;
  options.emulate = true;
  EXPECT_EQ(RecordEmulated(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.command = {"/bin/true"};
  options.pids = {1};
  EXPECT_EQ(RecordEmulated(options).status().code(), absl::StatusCode::kInvalidArgument);
  // Overflow injection is per-thread only.
  options.pids.clear();
  options.virtual_cpus = 2;
  options.emulate_overflow_every = 4096;
  absl::Status per_cpu = RecordEmulated(options).status();
  EXPECT_EQ(per_cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(per_cpu.message().find("per-thread"), absl::string_view::npos) << per_cpu;
}

}  // namespace
}  // namespace ptd::testing
