// The AUX/DATA ring readers (the code that runs on hardware) against the fake kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "recorder/pt/pt_stream_capture.h"
#include "sideband/record_builder.h"
#include "sideband/record_reader.h"
#include "tests/recorder_pt/fake_pt_kernel.h"
#include "tests/testing/test_util.h"

namespace ptd::pt {
namespace {

using testing::FakeKernelOptions;
using testing::FakePtKernel;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng() | 1);  // never 0: zeros mean "unwritten"
  return out;
}

// Writes `bytes` in pieces of varying size, as PT hardware fills ToPA regions.
std::vector<uint8_t> Produce(FakePtKernel& kernel, size_t n, uint32_t seed) {
  std::vector<uint8_t> bytes = RandomBytes(n, seed);
  std::vector<uint8_t> stored;
  std::mt19937 rng(seed + 1);
  size_t at = 0;
  while (at < n) {
    size_t piece = std::min<size_t>(n - at, 1 + rng() % 3000);
    size_t kept = kernel.WriteTrace(absl::MakeConstSpan(bytes.data() + at, piece));
    stored.insert(stored.end(), bytes.begin() + at, bytes.begin() + at + kept);
    at += piece;
  }
  return stored;
}

class CaptureFixture {
 public:
  explicit CaptureFixture(FakeKernelOptions options)
      : kernel_(options),
        capture_(kernel_.MakeSource(),
                 StreamFiles{dir_.path(), "aux/cpu0.pt", "sideband/cpu0.data"},
                 kSidebandSampleType) {
    EXPECT_TRUE(capture_.Open().ok());
  }
  FakePtKernel& kernel() { return kernel_; }
  PtStreamCapture& capture() { return capture_; }
  std::string StreamBytes() {
    EXPECT_TRUE(capture_.Close().ok());
    auto bytes = ReadFileToString(dir_.Sub("aux/cpu0.pt"));
    EXPECT_TRUE(bytes.ok());
    return bytes.ok() ? *bytes : "";
  }
  std::string ChunkBytes(const std::string& stream, size_t i) {
    const PtChunk& c = capture_.stream().chunks.at(i);
    return stream.substr(c.file_offset, c.size);
  }
  std::string SidebandBytes() {
    EXPECT_TRUE(capture_.Close().ok());
    auto bytes = ReadFileToString(dir_.Sub("sideband/cpu0.data"));
    return bytes.ok() ? *bytes : "";
  }

 private:
  ptd::testing::TempDir dir_;
  FakePtKernel kernel_;
  PtStreamCapture capture_;
};

std::string Str(const std::vector<uint8_t>& v, size_t from = 0, size_t n = std::string::npos) {
  n = std::min(n, v.size() - from);
  return std::string(reinterpret_cast<const char*>(v.data()) + from, n);
}

FakeKernelOptions Overwrite(size_t aux_size = 16 * 4096) {
  FakeKernelOptions o;
  o.overwrite = true;
  o.aux_size = aux_size;
  return o;
}

TEST(AuxSnapshotTest, BeforeWrapCopiesExactlyWhatWasWritten) {
  CaptureFixture f(Overwrite());
  std::vector<uint8_t> written = Produce(f.kernel(), 10000, 1);
  ASSERT_TRUE(f.capture().Snapshot("sigint", 5).ok());
  EXPECT_EQ(f.kernel().stop_calls(), 1);  // the producer was stopped for the copy
  const auto& chunks = f.capture().stream().chunks;
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].aux_offset, 0u);
  EXPECT_EQ(chunks[0].size, 10000u);
  EXPECT_EQ(chunks[0].reason, "sigint");
  EXPECT_TRUE(chunks[0].overwrite);
  EXPECT_FALSE(chunks[0].lost_before);
  EXPECT_EQ(f.StreamBytes(), Str(written));
}

TEST(AuxSnapshotTest, AfterWrapCopiesTheNewestRingfulOldestFirst) {
  const size_t ring = 4 * 4096;
  CaptureFixture f(Overwrite(ring));
  std::vector<uint8_t> written = Produce(f.kernel(), 3 * ring + 1234, 2);
  ASSERT_TRUE(f.capture().Snapshot("sigusr2", 5).ok());
  const auto& chunks = f.capture().stream().chunks;
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].size, ring);
  EXPECT_EQ(chunks[0].aux_offset, written.size() - ring);
  EXPECT_EQ(f.StreamBytes(), Str(written, written.size() - ring));
}

TEST(AuxSnapshotTest, SeveralSnapshotsAreSeparateChunksWithoutDuplicates) {
  const size_t ring = 4 * 4096;
  CaptureFixture f(Overwrite(ring));
  std::vector<uint8_t> a = Produce(f.kernel(), 5000, 3);
  ASSERT_TRUE(f.capture().Snapshot("control", 1).ok());
  std::vector<uint8_t> b = Produce(f.kernel(), 7000, 4);
  ASSERT_TRUE(f.capture().Snapshot("control", 2).ok());
  std::vector<uint8_t> c = Produce(f.kernel(), 2 * ring + 99, 5);
  ASSERT_TRUE(f.capture().Snapshot("sigint", 3).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(f.ChunkBytes(stream, 0), Str(a));
  EXPECT_EQ(f.ChunkBytes(stream, 1), Str(b));
  EXPECT_EQ(chunks[1].aux_offset, a.size());
  EXPECT_FALSE(chunks[1].lost_before);  // b follows a directly
  EXPECT_EQ(f.ChunkBytes(stream, 2), Str(c, c.size() - ring));
  EXPECT_TRUE(chunks[2].lost_before);   // the start of c was overwritten before we looked
  EXPECT_EQ(chunks[2].time_ns, 3u);
}

TEST(AuxSnapshotTest, BufferOffsetHeadsGiveTheWholeRingEndingAtTheHead) {
  // intel_pt's snapshot mode publishes the write offset inside the buffer.
  const size_t ring = 4 * 4096;
  FakeKernelOptions o = Overwrite(ring);
  o.head_kind = AuxHeadKind::kBufferOffset;
  CaptureFixture f(o);
  std::vector<uint8_t> early = Produce(f.kernel(), 3000, 6);
  ASSERT_TRUE(f.capture().Snapshot("control", 1).ok());
  std::vector<uint8_t> late = Produce(f.kernel(), 2 * ring + 500, 7);
  ASSERT_TRUE(f.capture().Snapshot("control", 2).ok());
  std::string stream = f.StreamBytes();
  // Before any wrap: the never-written part is zero (PT PAD) and comes first.
  std::string first = f.ChunkBytes(stream, 0);
  ASSERT_EQ(first.size(), ring);
  EXPECT_EQ(first.substr(0, ring - early.size()), std::string(ring - early.size(), '\0'));
  EXPECT_EQ(first.substr(ring - early.size()), Str(early));
  EXPECT_EQ(f.ChunkBytes(stream, 1), Str(late, late.size() - ring));
}

TEST(AuxLinearTest, DrainsEverythingAndAdvancesTail) {
  FakeKernelOptions o;
  o.aux_size = 4 * 4096;
  CaptureFixture f(o);
  std::vector<uint8_t> all;
  for (int round = 0; round < 10; ++round) {
    std::vector<uint8_t> got = Produce(f.kernel(), 9000, 10 + round);
    all.insert(all.end(), got.begin(), got.end());
    ASSERT_TRUE(f.capture().Drain(round).ok());
    EXPECT_EQ(f.kernel().header()->aux_tail, all.size());
  }
  EXPECT_EQ(f.kernel().bytes_dropped(), 0u);
  const auto chunks = f.capture().stream().chunks;
  ASSERT_EQ(chunks.size(), 1u);  // one contiguous, clean piece
  EXPECT_FALSE(chunks[0].truncated);
  EXPECT_EQ(f.StreamBytes(), Str(all));
}

TEST(AuxLinearTest, SlowReaderTruncationIsRecordedNeverSilent) {
  FakeKernelOptions o;
  o.aux_size = 4 * 4096;
  CaptureFixture f(o);
  // Three ringfuls without a read: the kernel keeps the first ringful and drops the rest.
  std::vector<uint8_t> kept = Produce(f.kernel(), 3 * o.aux_size, 20);
  ASSERT_EQ(kept.size(), o.aux_size);
  EXPECT_EQ(f.kernel().bytes_dropped(), 2 * o.aux_size);
  ASSERT_TRUE(f.capture().Drain(1).ok());
  std::vector<uint8_t> after = Produce(f.kernel(), 1000, 21);
  ASSERT_TRUE(f.capture().Drain(2).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_TRUE(chunks[0].truncated);
  EXPECT_EQ(f.ChunkBytes(stream, 0), Str(kept));
  EXPECT_TRUE(chunks[1].lost_before);
  EXPECT_FALSE(chunks[1].truncated);
  EXPECT_EQ(f.ChunkBytes(stream, 1), Str(after));
  EXPECT_EQ(f.capture().lost_chunks(), 2u);
}

TEST(AuxLinearTest, SidebandRecordsReachTheSidebandFile) {
  CaptureFixture f(FakeKernelOptions{});
  PerfRecord comm;
  comm.body = CommRecord{77, 78, "worker"};
  std::vector<uint8_t> bytes = EncodeRecord(comm, RecordFormat{});
  ASSERT_TRUE(f.kernel().WriteRecord(bytes));
  Produce(f.kernel(), 100, 30);  // adds a PERF_RECORD_AUX after the COMM
  ASSERT_TRUE(f.capture().Drain(1).ok());
  std::string sideband = f.SidebandBytes();
  auto records = ReadAllRecords(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(sideband.data()), sideband.size()),
      "sb", RecordFormat{});
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->records.size(), 2u);
  EXPECT_EQ(records->records[0].type, static_cast<uint32_t>(PERF_RECORD_COMM));
  EXPECT_EQ(records->records[1].type, static_cast<uint32_t>(PERF_RECORD_AUX));
}

TEST(AuxRaceTest, ProducerOnAnotherThreadRacingTheLinearReader) {
  FakeKernelOptions o;
  o.aux_size = 2 * 4096;
  o.data_size = 64 * 4096;
  CaptureFixture f(o);
  std::atomic<bool> done{false};
  std::vector<uint8_t> stored;
  uint64_t offered = 0;
  std::thread producer([&] {
    std::mt19937 rng(40);
    for (int i = 0; i < 3000; ++i) {
      std::vector<uint8_t> piece = RandomBytes(1 + rng() % 700, 1000 + i);
      offered += piece.size();
      size_t kept = f.kernel().WriteTrace(piece);
      stored.insert(stored.end(), piece.begin(), piece.begin() + kept);
      if (i % 64 == 0) std::this_thread::yield();
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t now = 0;
  while (!done.load(std::memory_order_acquire)) ASSERT_TRUE(f.capture().Drain(++now).ok());
  producer.join();
  ASSERT_TRUE(f.capture().Drain(++now).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  // Every stored byte arrives, in order, once.
  EXPECT_EQ(stream, Str(stored));
  // Drops happened exactly where chunks say so.
  const uint64_t dropped = f.kernel().bytes_dropped();
  EXPECT_EQ(offered, stored.size() + dropped);
  int truncated = 0;
  for (const PtChunk& c : chunks) truncated += c.truncated;
  EXPECT_EQ(dropped > 0, truncated > 0);
}

TEST(AuxRaceTest, SnapshotsWhileTheProducerRuns) {
  const size_t ring = 4 * 4096;
  CaptureFixture f(Overwrite(ring));
  std::atomic<bool> done{false};
  std::vector<uint8_t> stored;
  std::mutex stored_mu;
  std::thread producer([&] {
    std::mt19937 rng(50);
    for (int i = 0; i < 4000; ++i) {
      std::vector<uint8_t> piece = RandomBytes(1 + rng() % 500, 2000 + i);
      std::lock_guard<std::mutex> lock(stored_mu);
      size_t kept = f.kernel().WriteTrace(piece);
      stored.insert(stored.end(), piece.begin(), piece.begin() + kept);
    }
    done.store(true, std::memory_order_release);
  });
  int snapshots = 0;
  while (!done.load(std::memory_order_acquire) && snapshots < 50) {
    ASSERT_TRUE(f.capture().Snapshot("control", snapshots).ok());
    ++snapshots;
    std::this_thread::yield();
  }
  producer.join();
  ASSERT_TRUE(f.capture().Snapshot("exit", 99).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  // Each chunk is exactly the stored bytes at its stream position: the stop made the copy
  // consistent even though the producer kept going between snapshots.
  for (size_t i = 0; i < chunks.size(); ++i) {
    ASSERT_LE(chunks[i].aux_offset + chunks[i].size, stored.size());
    EXPECT_EQ(f.ChunkBytes(stream, i), Str(stored, chunks[i].aux_offset, chunks[i].size)) << i;
  }
  EXPECT_EQ(chunks.back().reason, "exit");
  EXPECT_EQ(chunks.back().aux_offset + chunks.back().size, stored.size());
}

}  // namespace
}  // namespace ptd::pt
