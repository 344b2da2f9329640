// Parallel decoding (`decode --jobs N`) must write exactly the file --jobs 1 writes: the
// CLI decodes the same trace both ways, with pieces forced small so every trace is cut
// in many places, and the FTF files are compared byte for byte; so are `coverage`'s
// files. And Ctrl-C during a decode leaves a complete, valid, marked file.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/pt_psb.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "decoder/packets/packet_query.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_check.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/section_cache.h"
#include "tests/decoder/flow_log.h"
#include "image/timed_image.h"
#include "recorder/emulate/code_walker.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::RunCommand;
using ptd::testing::TempDir;

using ptd::testing::kLibc;

// PSBs in the trace's first stream: the pieces can only start at one.
size_t PsbCount(const std::string& trace) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  if (!meta.ok() || meta->streams.empty()) return 0;
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(trace, meta->streams[0].file));
  if (!bytes.ok()) return 0;
  return FindPsbOffsets(absl::MakeConstSpan(*bytes)).size();
}

// Decodes `trace` with --jobs 1 and with --jobs 4 in pieces of `piece_bytes`; the two
// files must be equal and valid.
void ExpectSameWithJobs(const std::string& trace, const TempDir& tmp, uint64_t piece_bytes,
                        const std::vector<std::string>& extra = {}) {
  std::string one = tmp.Sub("jobs1.ftf");
  std::string four = tmp.Sub("jobs4.ftf");
  std::vector<std::string> a = {PTD_CLI_PATH, "decode", trace, "-o", one, "--jobs", "1", "-q"};
  std::vector<std::string> b = {PTD_CLI_PATH, "decode", trace, "-o", four, "--jobs", "4", "--piece-bytes",
                                std::to_string(piece_bytes), "-q"};
  a.insert(a.end(), extra.begin(), extra.end());
  b.insert(b.end(), extra.begin(), extra.end());
  auto r = RunCommand(a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(b);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<std::string> x = ReadFileToString(one);
  absl::StatusOr<std::string> y = ReadFileToString(four);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_GT(x->size(), 100u);
  EXPECT_TRUE(*x == *y) << trace << ": --jobs 4 wrote " << y->size() << " bytes, --jobs 1 " << x->size();
  absl::Status check = ftf::CheckFtfFile(four);
  EXPECT_TRUE(check.ok()) << check;
}

// Imports the libxdc sample `name` (its PT and memory dump) as a trace directory in `tmp`.
std::string ImportLibxdcSample(const std::string& samples, const std::string& name, const TempDir& tmp) {
  std::string dir = absl::StrCat(samples, "/libxdc_experiments/", name);
  EXPECT_TRUE(WriteFileAtomic(tmp.Sub("maps.txt"), absl::StrCat("pages ", dir, "/data.addr ", dir, "/data.dump\n")).ok());
  std::string trace = tmp.Sub("trace");
  auto r = RunCommand({PTD_CLI_PATH, "import", "raw", "--pt", dir + "/trace", "--maps", tmp.Sub("maps.txt"), "-o", trace});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return trace;
}

TEST(ParallelDecodeTest, RealSamplesDecodeIdenticallyInPieces) {
  PTD_REQUIRE_SAMPLES(samples);
  for (const char* name : {"Unzip", "foo", "mruby"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    const std::string trace = ImportLibxdcSample(samples, name, tmp);
    ASSERT_GE(PsbCount(trace), 10u);
    // mruby: ~80 pieces, one holding its overflow.
    ExpectSameWithJobs(trace, tmp, 8192);
  }
}

// `coverage --jobs 4` in small pieces writes the files --jobs 1 writes (mruby: its
// overflow in one piece, a resync); with libipt's block decoder too (whose block cache
// cuts runs differently in each piece's decoder: coverage decodes on one thread).
TEST(ParallelDecodeTest, CoverageIsIdenticalInPieces) {
  PTD_REQUIRE_SAMPLES(samples);
  for (const char* name : {"Unzip", "foo", "mruby"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    const std::string trace = ImportLibxdcSample(samples, name, tmp);
    auto expect_same = [&](const std::string& format, const std::string& decoder) {
      const std::string one = tmp.Sub("jobs1." + format);
      const std::string four = tmp.Sub("jobs4." + format);
      auto r = RunCommand({PTD_CLI_PATH, "coverage", trace, "-o", one, "--format", format, "--decoder", decoder,
                           "--jobs", "1", "-q"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      r = RunCommand({PTD_CLI_PATH, "coverage", trace, "-o", four, "--format", format, "--decoder", decoder,
                      "--jobs", "4", "--piece-bytes", "8192", "-q"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      absl::StatusOr<std::string> x = ReadFileToString(one);
      absl::StatusOr<std::string> y = ReadFileToString(four);
      ASSERT_TRUE(x.ok() && y.ok());
      ASSERT_GT(x->size(), 100u);
      EXPECT_TRUE(*x == *y) << format << ", " << decoder << ": --jobs 4 wrote " << y->size() << " bytes, --jobs 1 "
                            << x->size();
    };
    expect_same("drcov", "fast");
    expect_same("text", "fast");
    if (std::string(name) == "Unzip") expect_same("text", "libipt-block");
  }
}

// --jobs 0 (the CLI's default): one thread per core only for traces big enough to gain.
TEST(DecodeJobsTest, OnePerCoreOnlyForTracesWorthPieces) {
  const uint64_t big = DecodeOptions::kMinParallelBytes;
  EXPECT_EQ(DecodeJobs(0, big, 2), 2);
  EXPECT_EQ(DecodeJobs(0, big * 10, 8), 8);
  EXPECT_EQ(DecodeJobs(0, big - 1, 8), 1);
  EXPECT_EQ(DecodeJobs(0, big, 0), 1);  // the core count unknown
  EXPECT_EQ(DecodeJobs(3, 100, 2), 3);  // asked for: as asked
  EXPECT_EQ(DecodeJobs(1, big * 10, 8), 1);
}

// The default on a small real trace (mruby: 0.7 MB) decodes on one thread; asked for
// two, the same trace goes in pieces; the files are the same, and --stats-json says
// how many threads decoded.
TEST(ParallelDecodeTest, DefaultJobsDecodeASmallTraceOnOneThread) {
  PTD_REQUIRE_SAMPLES(samples);
  TempDir tmp;
  const std::string trace = ImportLibxdcSample(samples, "mruby", tmp);
  auto decode = [&](const std::vector<std::string>& jobs, const std::string& name) -> std::string {
    std::vector<std::string> argv = {PTD_CLI_PATH, "decode", trace, "-o", tmp.Sub(name + ".ftf"), "-q",
                                     "--stats-json", tmp.Sub(name + ".json")};
    argv.insert(argv.end(), jobs.begin(), jobs.end());
    auto d = RunCommand(argv);
    EXPECT_EQ(d.exit_code, 0) << d.err;
    return ReadFileToString(tmp.Sub(name + ".json")).value_or("");
  };
  EXPECT_NE(decode({}, "default").find("\"jobs\": 1,"), std::string::npos);
  EXPECT_NE(decode({"--jobs", "2"}, "two").find("\"jobs\": 2,"), std::string::npos);
  EXPECT_EQ(ReadFileToString(tmp.Sub("default.ftf")).value_or("a"), ReadFileToString(tmp.Sub("two.ftf")).value_or("b"));
}

TEST(ParallelDecodeTest, InstructionDecoderDecodesIdenticallyInPieces) {
  PTD_REQUIRE_SAMPLES(samples);
  TempDir tmp;
  const std::string trace = ImportLibxdcSample(samples, "foo", tmp);
  ExpectSameWithJobs(trace, tmp, 2048, {"--decoder", "insn"});
}

// A synthetic walk over libc's code (emulation's packet generator): TSC time axis,
// PSB+ every 1 KiB, and overflows that drop instructions.
std::string WriteWalk(const TempDir& tmp, uint64_t instructions, uint64_t overflow_every) {
  CodeWalkerOptions options;
  options.elf_path = kLibc;
  options.max_instructions = instructions;
  options.overflow_every_bytes = overflow_every;
  options.generator.psb_period = 1024;
  std::string trace = tmp.Sub("walk");
  absl::StatusOr<CodeWalkerStats> stats = WriteWalkerTrace(options, trace, true, "");
  EXPECT_TRUE(stats.ok()) << stats.status();
  return trace;
}

TEST(ParallelDecodeTest, TimedWalkWithOverflowsDecodesIdenticallyInPieces) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  std::string trace = WriteWalk(tmp, 400000, 20000);
  ASSERT_GE(PsbCount(trace), 20u);
  ExpectSameWithJobs(trace, tmp, 3000);
}

// One decoder over the walk's stream, on `axis`.
std::vector<FlowEvent> DecodeWalkEvents(const std::string& trace, TimeAxis axis) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  EXPECT_TRUE(meta.ok() && meta->streams.size() == 1);
  if (!meta.ok() || meta->streams.empty()) return {};
  image::SectionCache sections;
  image::ModuleCache modules;
  std::unique_ptr<image::TimedProcessImage> image =
      image::MakeTraceProcessImage(&sections, &modules, trace, *meta, nullptr, meta->pids.empty() ? -1 : meta->pids.front());
  image->ApplyAll();
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(trace, meta->streams[0].file));
  EXPECT_TRUE(bytes.ok());
  if (!bytes.ok()) return {};
  const size_t size = bytes->size();
  bytes->resize(size + kPtPadding, 0);
  PtDecodeConfig config;
  config.axis = axis;
  config.conversion = meta->time;
  testing::FlowLog log;
  std::unique_ptr<FlowDecoder> decoder = MakeFlowDecoder(config, image->image(), &log);
  EXPECT_TRUE(decoder->DecodeChunk(bytes->data(), size, 0).ok());
  EXPECT_EQ(std::count_if(log.events.begin(), log.events.end(),
                          [](const FlowEvent& e) { return e.kind == FlowKind::kError; }),
            0);
  return log.events;
}

// A branch's time is sampled late, when something needs it (most jumps are dropped
// first): it must still be the time at the branch. On the instruction axis that is the
// event's instruction count exactly. On the walk's TSC axis (one tick per instruction)
// times never go back, and stay within a PSB interval's worth of instructions of the
// count (libipt reads TSCs ahead). Byte-identical output with --jobs N and the suites'
// ground truth cover the rest.
TEST(ParallelDecodeTest, BranchTimesAreTheTimesAtTheBranches) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  std::string trace = WriteWalk(tmp, 300000, 0);
  std::vector<FlowEvent> events = DecodeWalkEvents(trace, TimeAxis::kInstructions);
  size_t branches = 0;
  for (const FlowEvent& e : events) {
    branches += e.kind == FlowKind::kCall || e.kind == FlowKind::kReturn || e.kind == FlowKind::kJump;
    ASSERT_EQ(e.time, e.instructions) << "event " << (&e - events.data()) << " of kind " << static_cast<int>(e.kind);
  }
  EXPECT_GE(branches, 1000u);

  events = DecodeWalkEvents(trace, TimeAxis::kTime);
  ASSERT_GE(events.size(), branches);
  // Until the second TSC the rate is unknown and the time stands at the first TSC's.
  const uint64_t first = events.front().time;
  uint64_t previous = 0, worst = 0;
  size_t compared = 0;
  for (const FlowEvent& e : events) {
    ASSERT_GE(e.time, previous) << "event " << (&e - events.data()) << " goes back in time";
    previous = e.time;
    if (e.time == first) continue;
    uint64_t ticks = e.instructions + 1;  // the walk's clock starts at 1
    worst = std::max(worst, e.time > ticks ? e.time - ticks : ticks - e.time);
    ++compared;
  }
  EXPECT_GE(compared, branches / 2);
  // libipt reads a TSC ahead by the branches of one TNT packet (up to 47, a few
  // instructions each): 55 instructions at most here.
  EXPECT_LT(worst, 256u) << "times stray from the instruction count";
}

TEST(ParallelDecodeTest, EmulatedThreadsDecodeIdenticallyInPieces) {
  TempDir tmp;
  std::string trace = tmp.Sub("trace");
  std::string program = absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_threads");
  auto r = RunCommand({PTD_CLI_PATH, "record", "--emulate=ptrace", "--psb-period", "512", "-o", trace, "--", program});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_GE(meta->streams.size(), 3u);  // one per thread
  ExpectSameWithJobs(trace, tmp, 1024);
}

// Puts `head` bytes of zeros before `trace`'s one stream, in the same buffer: PADs before
// the first PSB, as a wrapped buffer's head holds bytes no decoder reads.
void PrependZeros(const std::string& trace, uint64_t head) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  ASSERT_TRUE(meta.ok() && meta->streams.size() == 1) << meta.status();
  const std::string stream = ResolveTracePath(trace, meta->streams[0].file);
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(stream);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  bytes->insert(bytes->begin(), head, 0);
  ASSERT_TRUE(WriteFileAtomic(stream, absl::MakeConstSpan(*bytes)).ok());
  std::vector<PtChunk>& chunks = meta->streams[0].chunks;
  if (!chunks.empty()) {
    chunks[0].size += head;
    for (size_t k = 1; k < chunks.size(); ++k) chunks[k].file_offset += head;
  }
  ASSERT_TRUE(WriteTraceMeta(trace, *meta).ok());
}

// Valgrind's trace of a program that sleeps 200 times between stretches of work, with
// MTC and CYC (the default timing) and a PSB+ every 256 bytes: pieces start right after
// system calls, where the CYC calibration (cycles per MTC period) is the one the single
// decoder worked out before the call; a piece that started it afresh timed its first
// CYCs differently (getppid's total time differed by 1 %).
TEST(ParallelDecodeTest, CycTimesAfterSystemCallsDecodeIdenticallyInPieces) {
  std::string why;
  if (!ValgrindAvailable(&why)) GTEST_SKIP() << why;
  TempDir tmp;
  std::string trace = tmp.Sub("trace");
  std::string program = absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_naps");
  auto r = RunCommand({PTD_CLI_PATH, "record", "--emulate=valgrind", "--time=wall", "--psb-period", "256", "-q", "-o",
                       trace, "--", program, "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_GE(PsbCount(trace), 100u);
  ExpectSameWithJobs(trace, tmp, 700);
  absl::StatusOr<std::string> small = ReadFileToString(tmp.Sub("jobs1.ftf"));
  ASSERT_TRUE(small.ok());
  // The same in a buffer over PacketQuery::kMaxIndexedBytes, where the query keeps no
  // packet index: the calibration at each PSB comes from a walk of the bytes. The zeros
  // before the first PSB change nothing: --jobs 1 writes the file it wrote before (the
  // time axis too: the look for timing packets starts at the first PSB).
  PrependZeros(trace, PacketQuery::kMaxIndexedBytes);
  ExpectSameWithJobs(trace, tmp, 700);
  absl::StatusOr<std::string> big = ReadFileToString(tmp.Sub("jobs1.ftf"));
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE(*small == *big) << "behind zeros, --jobs 1 wrote " << big->size() << " bytes, " << small->size() << " before";
}

// Runs `decode` with progress on, sends SIGINT once it reports progress, and returns
// (exit status, stderr).
std::pair<int, std::string> DecodeAndInterrupt(const std::string& trace, const std::string& out) {
  int err_pipe[2];
  if (pipe(err_pipe) != 0) return {-1, "pipe failed"};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    close(err_pipe[1]);
    execl(PTD_CLI_PATH, PTD_CLI_PATH, "decode", trace.c_str(), "-o", out.c_str(), "--jobs", "2", "--progress",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err_pipe[1]);
  std::string err;
  bool sent = false;
  char buf[256];
  ssize_t n;
  while ((n = read(err_pipe[0], buf, sizeof buf)) > 0) {
    err.append(buf, static_cast<size_t>(n));
    if (!sent && err.find("decoding [") != std::string::npos) {
      kill(pid, SIGINT);
      sent = true;
    }
  }
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, err};
}

TEST(ParallelDecodeTest, InterruptedDecodeFinishesAValidMarkedFile) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  // Long enough that decoding is still running when the signal arrives.
  std::string trace = WriteWalk(tmp, 30000000, 0);
  std::string out = tmp.Sub("out.ftf");
  auto [code, err] = DecodeAndInterrupt(trace, out);
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("partial"), std::string::npos) << err;
  absl::Status check = ftf::CheckFtfFile(out);
  EXPECT_TRUE(check.ok()) << check;
  absl::StatusOr<std::string> bytes = ReadFileToString(out);
  ASSERT_TRUE(bytes.ok());
  EXPECT_NE(bytes->find("decode interrupted"), std::string::npos);
}

// --stats-json carries what the makespan model (bench/parallel) is computed from: with
// --jobs 2, each piece decoded (its bytes, the thread CPU time of its decode, the serial
// time of taking it in), their totals, the buffer's loading and the serial phase; with
// --jobs 1 no pieces, and the whole decode is the serial phase.
TEST(ParallelDecodeTest, StatsJsonReportsEachPieceAndTheSerialPhase) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  TempDir tmp;
  std::string trace = WriteWalk(tmp, 200000, 0);
  auto stats = [&](const std::vector<std::string>& jobs, const std::string& name) -> nlohmann::json {
    std::vector<std::string> argv = {PTD_CLI_PATH, "decode", trace, "-o", tmp.Sub(name + ".ftf"), "-q",
                                     "--stats-json", tmp.Sub(name + ".json")};
    argv.insert(argv.end(), jobs.begin(), jobs.end());
    auto d = RunCommand(argv);
    EXPECT_EQ(d.exit_code, 0) << d.err;
    return nlohmann::json::parse(ReadFileToString(tmp.Sub(name + ".json")).value_or("{}"), nullptr, false);
  };
  const nlohmann::json two = stats({"--jobs", "2", "--piece-bytes", "4096"}, "two");
  ASSERT_TRUE(two.is_object()) << "no stats JSON";
  const uint64_t pieces = two.value("pieces", uint64_t{0});
  ASSERT_GE(pieces, 2u) << two.dump();
  ASSERT_EQ(two["piece_cpu_ns_each"].size(), pieces);
  ASSERT_EQ(two["piece_bytes_each"].size(), pieces);
  ASSERT_EQ(two["piece_serial_cpu_ns_each"].size(), pieces);
  uint64_t cpu = 0, bytes = 0, serial = 0;
  for (size_t i = 0; i < pieces; ++i) {
    EXPECT_GT(two["piece_cpu_ns_each"][i].get<uint64_t>(), 0u) << "piece " << i;
    EXPECT_GT(two["piece_bytes_each"][i].get<uint64_t>(), 0u) << "piece " << i;
    cpu += two["piece_cpu_ns_each"][i].get<uint64_t>();
    bytes += two["piece_bytes_each"][i].get<uint64_t>();
    serial += two["piece_serial_cpu_ns_each"][i].get<uint64_t>();
  }
  EXPECT_EQ(cpu, two["piece_cpu_ns"].get<uint64_t>());
  EXPECT_GT(two["piece_start_cpu_ns"].get<uint64_t>(), 0u) << "each thread made a decoder for its first piece";
  EXPECT_LT(two["piece_start_cpu_ns"].get<uint64_t>(), cpu);
  EXPECT_EQ(bytes, two["bytes"].get<uint64_t>()) << "the pieces cover the trace";
  EXPECT_GT(serial, 0u);
  EXPECT_GE(two["serial_cpu_ns"].get<uint64_t>(), serial) << "taking the pieces in is part of the serial phase";
  EXPECT_GT(two["setup_cpu_ns"].get<uint64_t>(), 0u);
  EXPECT_GT(two["load_cpu_ns"].get<uint64_t>(), 0u) << "the pieces' buffer was mapped and scanned";
  EXPECT_GE(two["process_cpu_ns"].get<uint64_t>(), cpu + two["serial_cpu_ns"].get<uint64_t>() +
                                                       two["setup_cpu_ns"].get<uint64_t>() +
                                                       two["load_cpu_ns"].get<uint64_t>());

  const nlohmann::json one = stats({"--jobs", "1"}, "one");
  ASSERT_TRUE(one.is_object()) << "no stats JSON";
  EXPECT_EQ(one["pieces"].get<uint64_t>(), 0u);
  EXPECT_EQ(one["piece_cpu_ns"].get<uint64_t>(), 0u);
  EXPECT_TRUE(one["piece_cpu_ns_each"].empty());
  EXPECT_GT(one["serial_cpu_ns"].get<uint64_t>(), 0u);
  EXPECT_GE(one["process_cpu_ns"].get<uint64_t>(),
            one["serial_cpu_ns"].get<uint64_t>() + one["setup_cpu_ns"].get<uint64_t>());
}

// Every decoder of a stream, whole or in pieces, and the stitcher must drop the same
// jumps: the rule looks only at the branch, its target and the image.
TEST(JumpFilterTest, OnlyJumpsThatStayInsideTheirFunctionAreDropped) {
  if (!PathExists(kLibc)) GTEST_SKIP() << kLibc << " not present";
  image::SectionCache sections;
  image::ModuleCache modules;
  image::ProcessImage image(&sections, &modules, "test");
  image::Mapping libc;
  libc.path = kLibc;
  libc.vaddr = 0x7f0000000000;
  ASSERT_TRUE(image.AddMapping(libc).ok());
  // Some function of libc's text of at least 64 bytes, without inlined calls (where the
  // debug file is installed, many have some), and one with them if there is one.
  image::FunctionRange fn;
  image::FunctionRange with_inlines;
  for (uint64_t a = libc.vaddr + 0x30000; a < libc.vaddr + 0x100000 && fn.end - fn.start < 64; a += 0x40) {
    fn = image.RangeOf(a);
    if (fn.inlines && fn.end - fn.start >= 64) with_inlines = fn;
    if (!fn.symbol || fn.plt || fn.inlines) fn = image::FunctionRange();
  }
  ASSERT_GE(fn.end - fn.start, 64u);

  PendingBranch jump;
  jump.valid = true;
  jump.klass = InsnClass::kCondJump;
  jump.run_start = fn.start;
  jump.ip = fn.start + 20;
  EXPECT_TRUE(StaysInFunction(image, jump, fn.start + 40, true));
  EXPECT_TRUE(StaysInFunction(image, jump, fn.start, true));  // a loop back
  EXPECT_FALSE(StaysInFunction(image, jump, fn.end, true));   // a tail call
  EXPECT_FALSE(StaysInFunction(image, jump, fn.start + 40, false));
  PendingBranch fell_in = jump;  // the run came from the function before (fall-through)
  fell_in.run_start = fn.start - 1;
  EXPECT_FALSE(StaysInFunction(image, fell_in, fn.start + 40, true));
  PendingBranch after_raise = jump;  // the model unwinds at the branch after a raise
  after_raise.after_raise = true;
  EXPECT_FALSE(StaysInFunction(image, after_raise, fn.start + 40, true));
  PendingBranch call = jump;
  call.klass = InsnClass::kCall;
  EXPECT_FALSE(StaysInFunction(image, call, fn.start + 40, true));
  PendingBranch unmapped = jump;  // no code known: nothing to compare with
  unmapped.ip = unmapped.run_start = 0x1000;
  EXPECT_FALSE(StaysInFunction(image, unmapped, 0x1000, true));
  if (with_inlines.end > with_inlines.start) {
    // In a function with inlined calls every jump is an event (the model walks the runs).
    PendingBranch inlined = jump;
    inlined.run_start = with_inlines.start;
    inlined.ip = with_inlines.start + 20;
    EXPECT_FALSE(StaysInFunction(image, inlined, with_inlines.start + 40, true));
  }
}

}  // namespace
}  // namespace ptd::decoder
