// Cycles (CYC packets) through the whole decoder, on a real program recorded by the
// emulation backend with CYC (timing normal): slice args `cycles`, `--time-axis cycles`,
// chunk bases, and --jobs N. The CYC total is counted independently here with libipt's
// packet decoder.
#include <intel-pt.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/pt_psb.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "decoder/trace_decoder.h"
#include "ftf/ftf_check.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

using ptd::testing::Program;
using ptd::testing::RecordWithCli;
using ptd::testing::RunCommand;
using ptd::testing::TempDir;

struct Slice {
  std::string name;
  uint64_t begin = 0;
  uint64_t end = 0;
  SliceCounts counts;
  std::vector<size_t> children;
};

// Every slice of a thread with its times, counts and children.
class SliceTreeSink : public SliceSink {
 public:
  void Begin(uint64_t time, absl::string_view name) override {
    if (time < last_time_) out_of_order_ = true;
    last_time_ = time;
    size_t index = slices_.size();
    slices_.push_back(Slice{std::string(name), time, 0, {}, {}});
    if (open_.empty()) {
      top_.push_back(index);
    } else {
      slices_[open_.back()].children.push_back(index);
    }
    open_.push_back(index);
  }
  void End(uint64_t time, const SliceCounts& counts) override {
    if (time < last_time_) out_of_order_ = true;
    last_time_ = time;
    ASSERT_FALSE(open_.empty());
    Slice& slice = slices_[open_.back()];
    slice.end = time;
    slice.counts = counts;
    open_.pop_back();
  }
  void Instant(uint64_t time, absl::string_view, absl::string_view) override {
    if (time < last_time_) out_of_order_ = true;
    last_time_ = time;
  }
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<size_t>& top() const { return top_; }
  bool out_of_order() const { return out_of_order_; }
  size_t open() const { return open_.size(); }
  uint64_t last_time() const { return last_time_; }

 private:
  std::vector<Slice> slices_;
  std::vector<size_t> open_;
  std::vector<size_t> top_;
  uint64_t last_time_ = 0;
  bool out_of_order_ = false;
};

class TreeSinks : public ThreadSinkFactory {
 public:
  SliceSink* ForThread(int, int tid, const std::string&, const std::string&) override {
    auto& sink = sinks[tid];
    if (!sink) sink = std::make_unique<SliceTreeSink>();
    return sink.get();
  }
  std::map<int, std::unique_ptr<SliceTreeSink>> sinks;
};

// Sum of every CYC payload in every chunk of every stream (libipt's packet decoder,
// resynchronizing at the next PSB after undecodable bytes).
uint64_t CountCycPayloads(const std::string& trace) {
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  EXPECT_TRUE(meta.ok()) << meta.status();
  if (!meta.ok()) return 0;
  uint64_t sum = 0;
  for (const PtStream& stream : meta->streams) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(trace, stream.file));
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) continue;
    for (const PtChunk& chunk : stream.chunks) {
      std::vector<uint8_t> copy(bytes->begin() + chunk.file_offset, bytes->begin() + chunk.file_offset + chunk.size);
      copy.resize(copy.size() + kPtPadding, 0);
      pt_config config;
      pt_config_init(&config);
      config.begin = copy.data();
      config.end = copy.data() + chunk.size;
      pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&config);
      int status = pt_pkt_sync_forward(decoder);
      while (status >= 0) {
        pt_packet packet;
        status = pt_pkt_next(decoder, &packet, sizeof packet);
        if (status == -pte_eos) break;
        if (status < 0) {
          status = pt_pkt_sync_forward(decoder);
          continue;
        }
        if (packet.type == ppt_cyc) sum += packet.payload.cyc.value;
      }
      pt_pkt_free_decoder(decoder);
    }
  }
  return sum;
}

// Copies `trace` and cuts its first stream's chunk in two at a PSB near the middle, the
// second marked as following a gap.
std::string SplitIntoTwoChunks(const std::string& trace, const TempDir& tmp) {
  std::string split = tmp.Sub("split");
  auto r = RunCommand({"cp", "-r", trace, split});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(split);
  EXPECT_TRUE(meta.ok()) << meta.status();
  if (!meta.ok() || meta->streams.empty() || meta->streams[0].chunks.size() != 1) return "";
  PtStream& stream = meta->streams[0];
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(split, stream.file));
  EXPECT_TRUE(bytes.ok());
  if (!bytes.ok()) return "";
  PtChunk whole = stream.chunks[0];
  std::vector<uint64_t> psbs =
      FindPsbOffsets(absl::MakeConstSpan(bytes->data() + whole.file_offset, static_cast<size_t>(whole.size)));
  EXPECT_GE(psbs.size(), 4u);
  if (psbs.size() < 4) return "";
  uint64_t cut = psbs[psbs.size() / 2];
  PtChunk first = whole, second = whole;
  first.size = cut;
  second.file_offset = whole.file_offset + cut;
  second.aux_offset = whole.aux_offset + cut;
  second.size = whole.size - cut;
  second.lost_before = true;
  stream.chunks = {first, second};
  absl::Status s = WriteTraceMeta(split, *meta);
  EXPECT_TRUE(s.ok()) << s;
  return split;
}

class CyclesTest : public ::ptd::testing::SuiteSharedTest<CyclesTest, ::ptd::testing::CliRecording> {
 protected:
  // Small PSB period: many pieces for --jobs N.
  static void SetUpTestSuite() { shared_ = RecordWithCli({Program("ptd_prog_calls")}, {"--psb-period", "1024"}); }

  static DecodeResult Decode(const std::string& trace, TimeAxisChoice axis, TreeSinks* sinks,
                             DecoderKind kind = DecoderKind::kBlock) {
    DecodeOptions options;
    options.axis = axis;
    options.decoder = kind;
    absl::StatusOr<DecodeResult> result = DecodeTrace(trace, options, sinks);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : DecodeResult();
  }

  // The checks every cycles-axis decode must pass.
  static void ExpectCyclesAxis(const std::string& trace, DecoderKind kind = DecoderKind::kBlock) {
    TreeSinks sinks;
    DecodeResult result = Decode(trace, TimeAxisChoice::kCycles, &sinks, kind);
    EXPECT_EQ(result.stats[Stat::kErrors], 0u);
    EXPECT_TRUE(result.time_axis_is_cycles);
    EXPECT_FALSE(result.time_axis_is_instructions);
    EXPECT_TRUE(result.has_cycles);
    const uint64_t total = CountCycPayloads(trace);
    EXPECT_GT(total, 0u);
    EXPECT_EQ(result.stats[Stat::kCycles], total);
    size_t slices = 0;
    EXPECT_EQ(sinks.sinks.size(), 1u);
    for (const auto& [tid, sink] : sinks.sinks) {
      SCOPED_TRACE(absl::StrCat("thread ", tid));
      EXPECT_FALSE(sink->out_of_order());
      EXPECT_EQ(sink->open(), 0u);
      // The thread's trace ends at the stream's last cycle: every CYC counted.
      EXPECT_EQ(sink->last_time(), total);
      uint64_t top_cycles = 0;
      for (size_t t : sink->top()) top_cycles += sink->slices()[t].counts.cycles;
      EXPECT_LE(top_cycles, total);
      EXPECT_GT(top_cycles, total / 2);
      for (const Slice& slice : sink->slices()) {
        ++slices;
        ASSERT_TRUE(slice.counts.has_cycles) << slice.name;
        // Timestamps are cycle counts: a slice's cycles are its length.
        ASSERT_EQ(slice.counts.cycles, slice.end - slice.begin) << slice.name;
        uint64_t children = 0;
        for (size_t c : slice.children) children += sink->slices()[c].counts.cycles;
        ASSERT_GE(slice.counts.cycles, children) << slice.name;
      }
    }
    EXPECT_GT(slices, 1000u);
  }

  static const std::string& trace() { return shared_->trace; }
  static const std::string& error() { return shared_->error; }
};

TEST_F(CyclesTest, TimestampsAreCycleCounts) {
  ASSERT_TRUE(error().empty()) << error();
  ExpectCyclesAxis(trace());
}

TEST_F(CyclesTest, InstructionDecoderGivesTheSameCycles) {
  ASSERT_TRUE(error().empty()) << error();
  TreeSinks block, insn;
  Decode(trace(), TimeAxisChoice::kCycles, &block);
  Decode(trace(), TimeAxisChoice::kCycles, &insn, DecoderKind::kInsn);
  ASSERT_EQ(block.sinks.size(), insn.sinks.size());
  for (const auto& [tid, sink] : block.sinks) {
    const std::vector<Slice>& a = sink->slices();
    const std::vector<Slice>& b = insn.sinks.at(tid)->slices();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].name, b[i].name) << i;
      ASSERT_EQ(a[i].begin, b[i].begin) << i << " " << a[i].name;
      ASSERT_EQ(a[i].end, b[i].end) << i << " " << a[i].name;
    }
  }
}

// The cycles arg does not depend on the axis; on the cycles axis it is the slice length.
TEST_F(CyclesTest, CyclesArgsAreTheSameOnEveryAxis) {
  ASSERT_TRUE(error().empty()) << error();
  TreeSinks cycles, instructions, time;
  Decode(trace(), TimeAxisChoice::kCycles, &cycles);
  DecodeResult by_instructions = Decode(trace(), TimeAxisChoice::kInstructions, &instructions);
  DecodeResult by_time = Decode(trace(), TimeAxisChoice::kTime, &time);
  EXPECT_EQ(by_instructions.stats[Stat::kCycles], by_time.stats[Stat::kCycles]);
  EXPECT_TRUE(by_instructions.has_cycles);
  for (const auto& [tid, sink] : cycles.sinks) {
    const std::vector<Slice>& c = sink->slices();
    for (const TreeSinks* other : {&instructions, &time}) {
      ASSERT_TRUE(other->sinks.count(tid));
      const std::vector<Slice>& o = other->sinks.at(tid)->slices();
      ASSERT_EQ(c.size(), o.size());
      for (size_t i = 0; i < c.size(); ++i) {
        ASSERT_EQ(c[i].name, o[i].name) << i;
        ASSERT_EQ(c[i].counts.instructions, o[i].counts.instructions) << i;
        ASSERT_TRUE(o[i].counts.has_cycles) << i;
        ASSERT_EQ(o[i].counts.cycles, c[i].end - c[i].begin) << i << " " << c[i].name;
      }
    }
  }
}

// The emulator's core clock is its TSC clock (ns, docs/emulation.md): cycles counted up
// to an event are the ns since the first CYC, so every slice boundary on the cycles axis
// lies about where the TSC time axis puts it (rebased to its first event; the time
// axis interpolates between timing packets, hence the tolerance).
TEST_F(CyclesTest, CyclesFollowTheEmulatorClock) {
  ASSERT_TRUE(error().empty()) << error();
  TreeSinks time, cycles;
  DecodeResult result = Decode(trace(), TimeAxisChoice::kTime, &time);
  Decode(trace(), TimeAxisChoice::kCycles, &cycles);
  ASSERT_EQ(time.sinks.size(), 1u);
  ASSERT_EQ(cycles.sinks.size(), 1u);
  const std::vector<Slice>& t = time.sinks.begin()->second->slices();
  const std::vector<Slice>& c = cycles.sinks.begin()->second->slices();
  ASSERT_EQ(t.size(), c.size());
  ASSERT_FALSE(t.empty());
  const uint64_t t0 = t.front().begin;
  const uint64_t span_ns = time.sinks.begin()->second->last_time() - t0;
  double ratio = static_cast<double>(result.stats[Stat::kCycles]) / static_cast<double>(span_ns);
  EXPECT_GT(ratio, 0.95) << result.stats[Stat::kCycles] << " cycles, " << span_ns << " ns";
  EXPECT_LT(ratio, 1.05) << result.stats[Stat::kCycles] << " cycles, " << span_ns << " ns";
  std::vector<double> errors;
  for (size_t i = 0; i < t.size(); ++i) {
    for (auto [ns, cyc] : {std::pair{t[i].begin, c[i].begin}, std::pair{t[i].end, c[i].end}}) {
      double ns_since = static_cast<double>(ns - t0);
      errors.push_back(std::abs(ns_since - static_cast<double>(cyc)) / static_cast<double>(span_ns));
    }
  }
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() / 2], 0.005) << "median distance, as a fraction of the run";
  EXPECT_LT(errors.back(), 0.05) << "largest distance, as a fraction of the run";
  // And the cycles axis moves: most slice boundaries have a time of their own.
  std::vector<uint64_t> stamps;
  for (const Slice& slice : c) stamps.push_back(slice.begin);
  std::sort(stamps.begin(), stamps.end());
  size_t distinct = std::unique(stamps.begin(), stamps.end()) - stamps.begin();
  EXPECT_GT(distinct, c.size() / 4);
}

// A stream in two chunks with a gap between: the second chunk's cycles go on from the
// first's total, the lost-data mark keeps the axis monotonic.
TEST_F(CyclesTest, ChunkBasesAddUp) {
  ASSERT_TRUE(error().empty()) << error();
  TempDir tmp;
  std::string split = SplitIntoTwoChunks(trace(), tmp);
  ASSERT_FALSE(split.empty());
  EXPECT_EQ(CountCycPayloads(split), CountCycPayloads(trace()));
  ExpectCyclesAxis(split);
  TreeSinks sinks;
  DecodeResult result = Decode(split, TimeAxisChoice::kCycles, &sinks);
  EXPECT_EQ(result.stats[Stat::kLost], 1u);
}

// --jobs N writes exactly what --jobs 1 does on the cycles axis.
void ExpectSameWithJobs(const std::string& trace, const TempDir& tmp) {
  std::string one = tmp.Sub("one.ftf"), four = tmp.Sub("four.ftf");
  auto r = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", one, "--time-axis", "cycles", "--jobs", "1", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", four, "--time-axis", "cycles", "--jobs", "4", "--piece-bytes",
                  "1024", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<std::string> x = ReadFileToString(one);
  absl::StatusOr<std::string> y = ReadFileToString(four);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_GT(x->size(), 1000u);
  EXPECT_TRUE(*x == *y) << "--jobs 4 wrote " << y->size() << " bytes, --jobs 1 " << x->size();
  absl::Status check = ftf::CheckFtfFile(four);
  EXPECT_TRUE(check.ok()) << check;
}

TEST_F(CyclesTest, ParallelDecodeIsIdentical) {
  ASSERT_TRUE(error().empty()) << error();
  TempDir tmp;
  std::string split = SplitIntoTwoChunks(trace(), tmp);
  ASSERT_FALSE(split.empty());
  for (const std::string& trace : {trace(), split}) {
    SCOPED_TRACE(trace);
    ExpectSameWithJobs(trace, tmp);
  }
}

// Overflows (the emulator drops packets and resumes, as a CPU does) keep the cycles axis
// monotonic and the counts consistent; --jobs N still agrees.
class CyclesOverflowTest : public CyclesTest {
 protected:
  static void SetUpTestSuite() {
    shared_ = RecordWithCli({Program("ptd_prog_calls")},
                            {"--psb-period", "1024", "--emulate-overflow-every", "6144"});
  }
};

TEST_F(CyclesOverflowTest, StaysMonotonicAndConsistent) {
  ASSERT_TRUE(error().empty()) << error();
  TreeSinks sinks;
  DecodeResult result = Decode(trace(), TimeAxisChoice::kCycles, &sinks);
  ASSERT_GT(result.stats[Stat::kOverflows], 0u) << "the recording has no overflow";
  ExpectCyclesAxis(trace());
  TempDir tmp;
  ExpectSameWithJobs(trace(), tmp);
}

}  // namespace
}  // namespace ptd::decoder
