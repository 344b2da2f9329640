// The image timeline (docs/decoder.md): the decoder's image follows its timing packets
// (ImageClock), and names come from the image as it was when the code ran. A real
// program whose library code is replaced at the same address is compared with the
// emulator's ground truth, with one decoder and in parallel pieces.
#include <intel-pt.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/trace_meta.h"
#include "decoder/insn_classifier.h"
#include "decoder/pt_stream_decoder.h"
#include "decoder/trace_decoder.h"
#include "gtest/gtest.h"
#include "image/module_cache.h"
#include "image/section_cache.h"
#include "image/timed_image.h"
#include "recorder/emulate/ground_truth.h"
#include "sideband/sideband_set.h"
#include "tests/decoder/ground_truth_slices.h"
#include "tests/decoder/recorded_program.h"
#include "tests/decoder/recording_sink.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using testing::Record;
using testing::Recording;
using testing::SinksByThread;

// ---------------------------------------------------------------------------------
// The hook: AdvanceTo exactly when a timing packet's time reaches the next change.

// Changes at fixed times; remembers every time it was asked for.
class ScriptedClock : public ImageClock {
 public:
  ScriptedClock(std::vector<uint64_t> changes, image::ProcessImage* image)
      : changes_(std::move(changes)), image_(image) {}
  image::ProcessImage* AdvanceTo(uint64_t time_ns) override {
    asked.push_back(time_ns);
    while (next_ < changes_.size() && changes_[next_] <= time_ns) ++next_;
    return image_;
  }
  image::ProcessImage* image() override { return image_; }
  uint64_t next_change() const override { return next_ < changes_.size() ? changes_[next_] : UINT64_MAX; }
  uint64_t version() const override { return next_; }

  std::vector<uint64_t> asked;

 private:
  std::vector<uint64_t> changes_;
  size_t next_ = 0;
  image::ProcessImage* image_;
};

class NullConsumer : public FlowConsumer {
 public:
  void OnFlow(const FlowEvent& event) override {
    if (event.kind == FlowKind::kEnable) ++enables;
  }
  int enables = 0;
};

// PSB+ with TSC `tscs[0]`, then for each further TSC: TSC, TIP.PGE(ip), FUP(ip) +
// TIP.PGD: tracing enabled and disabled at once, no code to read.
std::vector<uint8_t> EncodeEnables(const std::vector<uint64_t>& tscs, uint64_t ip, size_t* size) {
  std::vector<uint8_t> buffer(4096 + kPtPadding, 0);
  pt_config config;
  pt_config_init(&config);
  config.begin = buffer.data();
  config.end = buffer.data() + 4096;
  pt_encoder* encoder = pt_alloc_encoder(&config);
  auto put = [&](pt_packet_type type, uint64_t payload, pt_ip_compression ipc = pt_ipc_suppressed) {
    pt_packet packet = {};
    packet.type = type;
    if (type == ppt_tsc) {
      packet.payload.tsc.tsc = payload;
    } else if (type == ppt_tip_pge || type == ppt_tip_pgd || type == ppt_fup) {
      packet.payload.ip.ipc = ipc;
      packet.payload.ip.ip = payload;
    }
    EXPECT_GE(pt_enc_next(encoder, &packet), 0) << "packet type " << type;
  };
  put(ppt_psb, 0);
  put(ppt_tsc, tscs[0]);
  put(ppt_psbend, 0);
  for (size_t i = 1; i < tscs.size(); ++i) {
    put(ppt_tsc, tscs[i]);
    put(ppt_tip_pge, ip, pt_ipc_sext_48);
    put(ppt_fup, ip, pt_ipc_sext_48);
    put(ppt_tip_pgd, 0, pt_ipc_suppressed);
  }
  uint64_t offset = 0;
  pt_enc_get_offset(encoder, &offset);
  pt_free_encoder(encoder);
  *size = static_cast<size_t>(offset);
  return buffer;
}

struct HookRun {
  std::vector<uint64_t> asked;
  int enables = 0;
  uint64_t errors = 0;
};

HookRun RunHook(const std::vector<uint64_t>& tscs, const std::vector<uint64_t>& changes) {
  image::SectionCache sections;
  image::ModuleCache modules;
  image::ProcessImage image(&sections, &modules, "test");
  ScriptedClock clock(changes, &image);
  NullConsumer consumer;
  PtDecodeConfig config;
  config.axis = TimeAxis::kTime;  // identity TSC → ns
  PtStreamDecoder decoder(config, &image, &consumer);
  decoder.set_image_clock(&clock);
  size_t size = 0;
  std::vector<uint8_t> bytes = EncodeEnables(tscs, 0x401000, &size);
  absl::Status status = decoder.DecodeChunk(bytes.data(), size, 0);
  EXPECT_TRUE(status.ok()) << status;
  return {clock.asked, consumer.enables, decoder.stats().errors};
}

// The first event time places the image: here the first enable's (a PSB+ without FUP,
// tracing off, reports no event, and libipt's time after a block is not asked: it reads
// ahead).
TEST(ImageClockHook, FirstTimePlacesTheImage) {
  HookRun run = RunHook({100, 200, 300}, {});
  EXPECT_EQ(run.enables, 2);
  EXPECT_EQ(run.errors, 0u);
  EXPECT_EQ(run.asked, (std::vector<uint64_t>{200}));
}

TEST(ImageClockHook, AdvancesExactlyWhenTimePassesAChange) {
  // Changes at 50, 250, 270 and 400: 200 places (passing 50), 300 passes 250 and 270,
  // 310 passes nothing, 500 passes 400, 600 nothing.
  HookRun run = RunHook({100, 200, 300, 310, 500, 600}, {50, 250, 270, 400});
  EXPECT_EQ(run.enables, 5);
  EXPECT_EQ(run.errors, 0u);
  EXPECT_EQ(run.asked, (std::vector<uint64_t>{200, 300, 500}));
}

TEST(ImageClockHook, AChangeAtTheExactTimeIsApplied) {
  HookRun run = RunHook({100, 150, 250, 251, 260}, {250, 260});
  EXPECT_EQ(run.asked, (std::vector<uint64_t>{150, 250, 260}));
}

TEST(ImageClockHook, InstructionAxisNeverAsks) {
  image::SectionCache sections;
  image::ModuleCache modules;
  image::ProcessImage image(&sections, &modules, "test");
  ScriptedClock clock({150}, &image);
  NullConsumer consumer;
  PtDecodeConfig config;
  config.axis = TimeAxis::kInstructions;
  PtStreamDecoder decoder(config, &image, &consumer);
  decoder.set_image_clock(&clock);
  size_t size = 0;
  std::vector<uint8_t> bytes = EncodeEnables({100, 200, 300}, 0x401000, &size);
  ASSERT_TRUE(decoder.DecodeChunk(bytes.data(), size, 0).ok());
  EXPECT_EQ(consumer.enables, 2);
  EXPECT_TRUE(clock.asked.empty());
}

// ---------------------------------------------------------------------------------
// A recorded program: libptd_prog_swap_a.so called, unloaded, libptd_prog_swap_b.so
// loaded at the same address and called.

size_t CountLines(const std::vector<std::string>& lines, const std::string& line) {
  return static_cast<size_t>(std::count(lines.begin(), lines.end(), line));
}

// What the model must write for `thread` (ground_truth_slices.h), with names from the
// thread's process image as it was at each ground-truth event's time.
std::vector<std::string> TimedExpectedSlices(const Recording& rec, const TraceMeta& meta, const Sideband& sideband,
                                             const GroundTruthThread& thread) {
  image::SectionCache sections;
  image::ModuleCache modules;
  std::unique_ptr<image::TimedProcessImage> image =
      image::MakeTraceProcessImage(&sections, &modules, rec.trace, meta, &sideband, thread.pid);
  if (!thread.events.empty()) image->AdvanceTo(thread.events.front().time);
  ImageFunctionResolver resolver(image->image());
  InsnClassifier classifier(image->image());
  uint64_t generation = image->generation();
  auto at_time = [&](uint64_t time) {
    image->AdvanceTo(time);
    if (image->generation() != generation) {
      generation = image->generation();
      classifier.SetImage(image->image());
    }
  };
  return testing::ExpectedSlices(thread, &resolver, &classifier, image->image(), 0, at_time);
}

// Slice names ("B name" lines), each once, without the model's "[untraced]" markers
// and PLT stubs (a thread switched out inside a stub shows the stub's own slice).
std::set<std::string> BeginNames(const std::vector<std::string>& lines) {
  std::set<std::string> names;
  for (const std::string& l : lines) {
    if (!absl::StartsWith(l, "B ") || l == "B [untraced]" || l == "B [plt]" || absl::EndsWith(l, "@plt")) continue;
    names.insert(l);
  }
  return names;
}

// --jobs 2 in 4 KiB pieces writes the slices --jobs 1 writes.
void ExpectSameInParallel(const Recording& rec, const SinksByThread& one) {
  SinksByThread parallel;
  DecodeOptions options;
  options.jobs = 2;
  options.piece_bytes = 4096;
  absl::StatusOr<DecodeResult> result = DecodeTrace(rec.trace, options, &parallel);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(one.sinks.size(), parallel.sinks.size());
  for (const auto& [tid, sink] : one.sinks) {
    ASSERT_TRUE(parallel.sinks.count(tid));
    std::string difference = testing::FirstDifference(sink->lines(), parallel.sinks.at(tid)->lines());
    EXPECT_TRUE(difference.empty()) << "thread " << tid << ": " << difference;
  }
}

class TimedImageDlopenSwap : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { rec_ = new Recording(Record("ptd_prog_dlopen_swap", {})); }
  static void TearDownTestSuite() {
    delete rec_;
    rec_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(rec_->error.empty()) << rec_->error;
    ASSERT_EQ(rec_->truth.size(), 1u);
    absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec_->trace);
    ASSERT_TRUE(meta.ok()) << meta.status();
    meta_ = *std::move(meta);
    absl::StatusOr<Sideband> sideband = LoadSideband(rec_->trace, meta_);
    ASSERT_TRUE(sideband.ok()) << sideband.status();
    sideband_ = *std::move(sideband);
  }
  // The executable mapping of the library whose path ends with `suffix`.
  const MapChange* CodeMapping(const std::vector<MapChange>& changes, const std::string& suffix) {
    for (const MapChange& c : changes) {
      if (c.kind == MapChange::Kind::kMap && c.mapping.executable && absl::EndsWith(c.mapping.path, suffix)) return &c;
    }
    return nullptr;
  }
  absl::StatusOr<DecodeResult> Decode(int jobs, SinksByThread* sinks) {
    DecodeOptions options;
    options.jobs = jobs;
    options.piece_bytes = 4096;  // many pieces, so pieces straddle the swap
    return DecodeTrace(rec_->trace, options, sinks);
  }

  static Recording* rec_;
  TraceMeta meta_;
  Sideband sideband_;
};
Recording* TimedImageDlopenSwap::rec_ = nullptr;

// Without this the test proves nothing: B's code must sit where A's was.
TEST_F(TimedImageDlopenSwap, TheSecondLibraryReusesTheFirstOnesAddresses) {
  std::vector<MapChange> changes = sideband_.mmaps.Changes(rec_->truth[0].pid);
  const MapChange* a = CodeMapping(changes, "/libptd_prog_swap_a.so");
  const MapChange* b = CodeMapping(changes, "/libptd_prog_swap_b.so");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_LT(a->time_ns, b->time_ns);
  EXPECT_LT(b->mapping.start, a->mapping.end);
  EXPECT_LT(a->mapping.start, b->mapping.end);
}

TEST_F(TimedImageDlopenSwap, SlicesMatchGroundTruthResolvedAtEachEventsTime) {
  SinksByThread sinks;
  absl::StatusOr<DecodeResult> result = Decode(1, &sinks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stats.errors, 0u);
  const GroundTruthThread& thread = rec_->truth[0];
  ASSERT_TRUE(sinks.sinks.count(thread.tid));
  const testing::RecordingSink& sink = *sinks.sinks[thread.tid];
  EXPECT_FALSE(sink.unbalanced());

  // Each library's functions, named after themselves: A's before the swap, B's after.
  const std::vector<std::string> names = sink.Names();
  EXPECT_EQ(CountLines(names, "B alpha_run"), 1u);
  EXPECT_EQ(CountLines(names, "B alpha_step"), 20u);
  EXPECT_EQ(CountLines(names, "B beta_run"), 1u);
  EXPECT_EQ(CountLines(names, "B beta_step"), 20u);
  auto first = [&](const std::string& line) { return std::find(names.begin(), names.end(), line) - names.begin(); };
  EXPECT_LT(first("B alpha_run"), first("B beta_run"));

  // The ground truth, with names from the image as it was at each event's time.
  std::vector<std::string> expected = TimedExpectedSlices(*rec_, meta_, sideband_, thread);
  EXPECT_EQ(CountLines(expected, "B alpha_run"), 1u);
  EXPECT_EQ(CountLines(expected, "B beta_run"), 1u);
  std::string difference = testing::FirstDifference(expected, sink.lines());
  EXPECT_TRUE(difference.empty()) << difference;
  EXPECT_EQ(result->stats.instructions, thread.ips.size());
}

TEST_F(TimedImageDlopenSwap, ParallelPiecesGiveTheSameSlices) {
  SinksByThread one;
  absl::StatusOr<DecodeResult> result = Decode(1, &one);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const auto& [tid, sink] : one.sinks) EXPECT_EQ(CountLines(sink->Names(), "B beta_step"), 20u);
  ExpectSameInParallel(*rec_, one);
}

// ---------------------------------------------------------------------------------
// A parent and its fork + exec child (ptd_prog_calls): three images (the parent's, the
// child's copy of it, the child's after exec). Per thread: one stream per process, its
// image changing at the exec. On one virtual CPU: one stream running both processes.

struct ForkExecTrace {
  TraceMeta meta;
  Sideband sideband;
  SinksByThread sinks;
  DecodeResult result;
};

void DecodeForkExec(const Recording& rec, ForkExecTrace* out) {
  ASSERT_TRUE(rec.error.empty()) << rec.error;
  ASSERT_EQ(rec.truth.size(), 2u);
  ASSERT_NE(rec.truth[0].pid, rec.truth[1].pid);
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(rec.trace);
  ASSERT_TRUE(meta.ok()) << meta.status();
  out->meta = *std::move(meta);
  absl::StatusOr<Sideband> sideband = LoadSideband(rec.trace, out->meta);
  ASSERT_TRUE(sideband.ok()) << sideband.status();
  out->sideband = *std::move(sideband);
  absl::StatusOr<DecodeResult> result = DecodeTrace(rec.trace, DecodeOptions(), &out->sinks);
  ASSERT_TRUE(result.ok()) << result.status();
  out->result = *std::move(result);
  EXPECT_EQ(out->result.stats.errors, 0u);
  uint64_t instructions = 0;
  for (const GroundTruthThread& thread : rec.truth) {
    SCOPED_TRACE(absl::StrCat("pid ", thread.pid));
    instructions += thread.ips.size();
    ASSERT_TRUE(out->sinks.sinks.count(thread.tid));
    const std::vector<std::string> names = out->sinks.sinks[thread.tid]->Names();
    // The parent's own function, and the exec'd program's, each in its process only.
    bool child = thread.pid != out->meta.pids.front();
    EXPECT_EQ(CountLines(names, "B parent_run"), child ? 0u : 1u);
    EXPECT_EQ(CountLines(names, "B tail_caller") > 0, child);
  }
  EXPECT_EQ(out->result.stats.instructions, instructions);
}

class TimedImageForkExec : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { rec_ = new Recording(Record("ptd_prog_fork_exec", {})); }
  static void TearDownTestSuite() {
    delete rec_;
    rec_ = nullptr;
  }
  static Recording* rec_;
};
Recording* TimedImageForkExec::rec_ = nullptr;

// Every function of the process's ground truth, and nothing else (`BeginNames`).
void ExpectSameNames(const std::vector<std::string>& expected_lines, const std::vector<std::string>& decoded_lines) {
  std::set<std::string> expected = BeginNames(expected_lines);
  std::set<std::string> decoded = BeginNames(decoded_lines);
  std::vector<std::string> missing, extra;
  std::set_difference(expected.begin(), expected.end(), decoded.begin(), decoded.end(), std::back_inserter(missing));
  std::set_difference(decoded.begin(), decoded.end(), expected.begin(), expected.end(), std::back_inserter(extra));
  EXPECT_TRUE(missing.empty()) << "not decoded: " << absl::StrJoin(missing, ", ");
  EXPECT_TRUE(extra.empty()) << "not in the ground truth: " << absl::StrJoin(extra, ", ");
}

// The parent slice by slice; the child by the functions it ran: slice by slice, how a
// forked child's inherited frames begin and how the frames of the program before the
// exec end are conventions (of the model and of the RSP-based ground truth, whose new
// stack may lie above the old frames), not the image's.
TEST_F(TimedImageForkExec, EachProcessMatchesGroundTruthAcrossTheExec) {
  ForkExecTrace trace;
  DecodeForkExec(*rec_, &trace);
  if (HasFatalFailure()) return;
  EXPECT_EQ(trace.meta.streams.size(), 2u);
  for (const GroundTruthThread& thread : rec_->truth) {
    SCOPED_TRACE(absl::StrCat("pid ", thread.pid));
    std::vector<std::string> expected = TimedExpectedSlices(*rec_, trace.meta, trace.sideband, thread);
    const std::vector<std::string>& decoded = trace.sinks.sinks[thread.tid]->lines();
    if (thread.pid == trace.meta.pids.front()) {
      std::string difference = testing::FirstDifference(expected, decoded);
      EXPECT_TRUE(difference.empty()) << difference;
    } else {
      EXPECT_EQ(CountLines(decoded, "B _dl_start"), 1u);  // the exec'd program's loader
      ExpectSameNames(expected, decoded);
    }
  }
  ExpectSameInParallel(*rec_, trace.sinks);
}

class TimedImageForkExecPerCpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rec_ = new Recording(Record("ptd_prog_fork_exec", {"--virtual-cpus", "1"}));
  }
  static void TearDownTestSuite() {
    delete rec_;
    rec_ = nullptr;
  }
  static Recording* rec_;
};
Recording* TimedImageForkExecPerCpu::rec_ = nullptr;

// Slice by slice, per-CPU routing still differs from the ground truth near switches
// (docs/decoder.md, "Not done"; the model writes [untraced] where a thread was switched
// out); the names are the image's part: every function of each process's ground truth,
// and nothing else, named from its own image.
TEST_F(TimedImageForkExecPerCpu, EachProcessIsNamedFromItsOwnImage) {
  ForkExecTrace trace;
  DecodeForkExec(*rec_, &trace);
  if (HasFatalFailure()) return;
  ASSERT_EQ(trace.meta.streams.size(), 1u);
  EXPECT_GE(trace.meta.streams[0].cpu, 0);
  for (const GroundTruthThread& thread : rec_->truth) {
    SCOPED_TRACE(absl::StrCat("pid ", thread.pid));
    ExpectSameNames(TimedExpectedSlices(*rec_, trace.meta, trace.sideband, thread),
                    trace.sinks.sinks[thread.tid]->lines());
  }
  ExpectSameInParallel(*rec_, trace.sinks);
}

}  // namespace
}  // namespace ptd::decoder
