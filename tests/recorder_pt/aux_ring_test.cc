// The AUX/DATA ring readers (the code that runs on hardware) against the fake kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "recorder/pt/pt_stream_capture.h"
#include "sideband/record_builder.h"
#include "sideband/record_reader.h"
#include "tests/recorder_pt/fake_pt_kernel.h"
#include "tests/testing/psb_stream.h"
#include "tests/testing/test_util.h"

namespace ptd::pt {
namespace {

using testing::FakeKernelOptions;
using testing::FakePtKernel;

// Writes `bytes` in pieces of varying size, as PT hardware fills ToPA regions.
std::vector<uint8_t> Produce(FakePtKernel& kernel, size_t n, uint32_t seed) {
  std::vector<uint8_t> bytes = testing::TraceBytes(n, seed);
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
  // What PtRecording does for one ring, in either mode: PT off, copy, PT on.
  absl::Status Snapshot(const std::string& reason, uint64_t time_ns) {
    if (absl::Status st = capture_.ring().DisablePt(); !st.ok()) return st;
    absl::Status copied = capture_.Snapshot(reason, time_ns);
    if (absl::Status st = capture_.ring().EnablePt(); !st.ok()) return st;
    return copied;
  }
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
  ASSERT_TRUE(f.Snapshot("sigint", 5).ok());
  EXPECT_EQ(f.kernel().disable_calls(), 1);  // the producer was stopped for the copy
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
  ASSERT_TRUE(f.Snapshot("sigusr2", 5).ok());
  const auto& chunks = f.capture().stream().chunks;
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].size, ring);
  EXPECT_EQ(f.StreamBytes(), Str(written, written.size() - ring));
}

TEST(AuxSnapshotTest, SeveralSnapshotsCopyOnlyWhatIsNew) {
  // The head is an in-buffer offset (pt_event_stop): a snapshot that copied the whole
  // ring every time would hand the decoder the same trace again.
  const size_t ring = 4 * 4096;
  CaptureFixture f(Overwrite(ring));
  std::vector<uint8_t> a = Produce(f.kernel(), 5000, 3);
  ASSERT_TRUE(f.Snapshot("control", 1).ok());
  std::vector<uint8_t> b = Produce(f.kernel(), 7000, 4);
  ASSERT_TRUE(f.Snapshot("control", 2).ok());
  // Most of a lap, the ring wrapping: still only the new bytes, the overlap cut.
  std::vector<uint8_t> c = Produce(f.kernel(), ring - 300, 5);
  ASSERT_TRUE(f.Snapshot("control", 3).ok());
  std::vector<uint8_t> d = Produce(f.kernel(), 2 * ring + 99, 6);
  ASSERT_TRUE(f.Snapshot("sigint", 4).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(f.ChunkBytes(stream, 0), Str(a));
  EXPECT_EQ(f.ChunkBytes(stream, 1), Str(b));
  EXPECT_EQ(chunks[1].aux_offset, a.size());
  EXPECT_FALSE(chunks[1].lost_before);  // b follows a directly
  EXPECT_EQ(f.ChunkBytes(stream, 2), Str(c));
  EXPECT_EQ(chunks[2].aux_offset, a.size() + b.size());
  EXPECT_FALSE(chunks[2].lost_before);
  EXPECT_EQ(f.ChunkBytes(stream, 3), Str(d, d.size() - ring));
  EXPECT_TRUE(chunks[3].lost_before);   // the start of d was overwritten before we looked
  EXPECT_EQ(chunks[3].time_ns, 4u);
  EXPECT_EQ(stream.size(), a.size() + b.size() + c.size() + ring);
}

// A lap plus k bytes and k bytes alone leave the same head; only the bytes past it tell
// them apart. With fewer than 64 of those (a near-full lap) the fresh bytes are taken and
// marked as maybe following a gap: nothing is stored twice, nothing claimed contiguous.
TEST(AuxSnapshotTest, NearlyAFullLapIsTakenAsMaybeAfterAGap) {
  const size_t ring = 4 * 4096;
  CaptureFixture f(Overwrite(ring));
  std::vector<uint8_t> a = Produce(f.kernel(), 5000, 7);
  ASSERT_TRUE(f.Snapshot("control", 1).ok());
  std::vector<uint8_t> b = Produce(f.kernel(), ring - 10, 8);
  ASSERT_TRUE(f.Snapshot("control", 2).ok());
  std::vector<uint8_t> c = Produce(f.kernel(), ring - 100, 9);
  ASSERT_TRUE(f.Snapshot("control", 3).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(f.ChunkBytes(stream, 1), Str(b));
  EXPECT_TRUE(chunks[1].lost_before);   // 10 bytes past the head cannot prove no lap
  EXPECT_EQ(f.ChunkBytes(stream, 2), Str(c));
  EXPECT_FALSE(chunks[2].lost_before);  // 100 can
}

// A full lap can leave the bytes past the head exactly as they were (a loop writes the
// same TNT packets again), and the kernel's head and AUX sizes cannot tell (the head is an
// offset in the ring, every record the whole buffer). Unchanged bytes prove no lap only
// when they hold a PSB+ timestamp; without one, in a trace that has timestamps, the
// fresh bytes are taken with a loss mark.
TEST(AuxSnapshotTest, ALapThatRewroteTheSameBytesIsMarkedWhenNoTimestampProvesOtherwise) {
  const size_t ring = 4 * 4096;
  CaptureFixture f(Overwrite(ring));
  std::vector<std::optional<uint64_t>> tscs;
  for (uint64_t i = 0; i < 200; ++i) tscs.push_back(1000 + i);
  const std::vector<uint8_t> timed = ptd::testing::PsbStream(tscs);  // more than a ring
  ASSERT_GT(timed.size(), ring);
  ASSERT_EQ(f.kernel().WriteTrace(timed), timed.size());
  ASSERT_TRUE(f.Snapshot("control", 1).ok());
  // No lap: the 1000 bytes past the head are the timed trace's end, PSB+ groups included.
  const std::vector<uint8_t> loop = testing::TraceBytes(ring - 1000, 11);  // odd bytes: no PSB
  ASSERT_EQ(f.kernel().WriteTrace(loop), loop.size());
  ASSERT_TRUE(f.Snapshot("control", 2).ok());
  // A lap plus 1500 bytes whose bytes past the new head repeat the loop's exactly.
  const size_t k = 1500;
  std::vector<uint8_t> lap = testing::TraceBytes(k, 12);
  lap.insert(lap.end(), loop.begin() + 500, loop.end());
  const std::vector<uint8_t> newest = testing::TraceBytes(k, 13);
  lap.insert(lap.end(), newest.begin(), newest.end());
  ASSERT_EQ(lap.size(), ring + k);
  ASSERT_EQ(f.kernel().WriteTrace(lap), lap.size());
  ASSERT_TRUE(f.Snapshot("control", 3).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(f.ChunkBytes(stream, 1), Str(loop));
  EXPECT_FALSE(chunks[1].lost_before) << "unchanged timestamps past the head prove no lap";
  EXPECT_EQ(f.ChunkBytes(stream, 2), Str(newest)) << "nothing stored twice";
  EXPECT_TRUE(chunks[2].lost_before) << "a lap with the same bytes past the head went unmarked";
}

TEST(AuxSnapshotTest, IdleRingWritesNothing) {
  // A CPU the target never ran on: no chunk, not snapshot_size bytes per snapshot.
  CaptureFixture f(Overwrite(4 * 4096));
  ASSERT_TRUE(f.Snapshot("control", 1).ok());
  std::vector<uint8_t> a = Produce(f.kernel(), 3000, 8);
  ASSERT_TRUE(f.Snapshot("control", 2).ok());
  ASSERT_TRUE(f.Snapshot("control", 3).ok());
  EXPECT_EQ(f.capture().stream().chunks.size(), 1u);
  EXPECT_EQ(f.StreamBytes(), Str(a));
}

TEST(AuxSnapshotTest, AuxRecordsOfEverySchedOutAreNotKeptUntilTheSnapshot) {
  // In overwrite mode the kernel writes a PERF_RECORD_AUX at every sched-out; a long
  // snapshot-on-exit session must not hold on to each of them.
  CaptureFixture f(Overwrite(4 * 4096));
  for (int i = 0; i < 2000; ++i) {
    Produce(f.kernel(), 100, 100 + i);
    f.kernel().SchedOut();
    if (i % 50 == 0) {
      ASSERT_TRUE(f.capture().Drain(i).ok());
    }
  }
  ASSERT_TRUE(f.capture().Drain(1).ok());
  EXPECT_EQ(f.capture().pending_aux_records(), 0u);
  ASSERT_TRUE(f.Snapshot("exit", 2).ok());
  const auto& chunks = f.capture().stream().chunks;
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0].overwrite);
  EXPECT_FALSE(chunks[0].truncated);
}

TEST(AuxSnapshotTest, DisablingPtDuringTheSnapshotLosesNoSideband) {
  // The snapshot disables only the PT event; the AUX record that DISABLE writes and a
  // MMAP2 the kernel reports meanwhile both reach the sideband file, with no LOST.
  CaptureFixture f(Overwrite(4 * 4096));
  PerfRecord mmap;
  mmap.body = CommRecord{77, 78, "while-stopped"};
  const std::vector<uint8_t> mmap_bytes = EncodeRecord(mmap, RecordFormat{});
  f.kernel().on_pt_disabled = [&] { f.kernel().EmitSideband(mmap_bytes); };
  Produce(f.kernel(), 3000, 9);
  ASSERT_TRUE(f.Snapshot("control", 1).ok());
  Produce(f.kernel(), 3000, 10);
  ASSERT_TRUE(f.Snapshot("control", 2).ok());
  EXPECT_EQ(f.capture().sideband_lost_records(), 0u);
  std::string sideband = f.SidebandBytes();
  auto records = ReadAllRecords(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(sideband.data()), sideband.size()),
      "sb", RecordFormat{});
  ASSERT_TRUE(records.ok()) << records.status();
  int comms = 0;
  int auxes = 0;
  for (const PerfRecord& r : records->records) {
    EXPECT_NE(r.type, static_cast<uint32_t>(PERF_RECORD_LOST));
    comms += r.type == PERF_RECORD_COMM;
    auxes += r.type == PERF_RECORD_AUX;
  }
  EXPECT_EQ(comms, 2);
  EXPECT_EQ(auxes, 2);
}

TEST(AuxLinearTest, DrainsEverythingAndAdvancesTail) {
  FakeKernelOptions o;
  o.aux_size = 4 * 4096;
  o.region_size = 4096;  // one-page ToPA regions: rb_alloc_aux fell back to order 0
  CaptureFixture f(o);
  std::vector<uint8_t> all;
  for (int round = 0; round < 10; ++round) {
    std::vector<uint8_t> got = Produce(f.kernel(), 9000, 10 + round);
    all.insert(all.end(), got.begin(), got.end());
    f.kernel().SchedOut();  // publishes what is below the wakeup watermark too
    ASSERT_TRUE(f.capture().Drain(round).ok());
    EXPECT_EQ(f.kernel().header()->aux_tail, all.size());
  }
  EXPECT_EQ(f.kernel().bytes_dropped(), 0u);
  const auto chunks = f.capture().stream().chunks;
  ASSERT_EQ(chunks.size(), 1u);  // one contiguous, clean piece
  EXPECT_FALSE(chunks[0].truncated);
  EXPECT_EQ(f.StreamBytes(), Str(all));
}

TEST(AuxLinearTest, BytesBelowTheWatermarkAppearOnlyWhenTheEventStops) {
  FakeKernelOptions o;
  o.aux_size = 4 * 4096;
  o.aux_watermark = 4096;
  CaptureFixture f(o);
  std::vector<uint8_t> first = testing::TraceBytes(5000, 50);
  std::vector<uint8_t> second = testing::TraceBytes(1000, 51);
  ASSERT_EQ(f.kernel().WriteTrace(first), first.size());  // crosses the watermark: a PMI
  ASSERT_EQ(f.kernel().WriteTrace(second), second.size());  // below the next one
  ASSERT_TRUE(f.capture().Drain(1).ok());
  // The PMI comes at the end of the one-page ToPA region the watermark ends: only the
  // bytes before it are published.
  EXPECT_EQ(f.kernel().header()->aux_tail, 4096u);
  ASSERT_TRUE(f.capture().ring().DisablePt().ok());  // pt_event_stop: perf_aux_output_end
  ASSERT_TRUE(f.capture().Drain(2).ok());
  EXPECT_EQ(f.kernel().header()->aux_tail, first.size() + second.size());
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(f.StreamBytes(), Str(first));
}

// rb_alloc_aux (6.x) allocates the AUX area in chunks of the watermark's order, each one
// ToPA region, and pt_buffer_reset_markers can only STOP at a region's end: free room
// that ends inside a region is not usable, so a fully read ring takes less than a
// ringful before TRUNCATED.
TEST(AuxLinearTest, TheHardwareStopsAtAToPARegionBoundary) {
  FakeKernelOptions o;
  o.aux_size = 4 * 4096;  // watermark: half, so two regions of 8 KiB
  CaptureFixture f(o);
  std::vector<uint8_t> first = Produce(f.kernel(), 9000, 30);
  ASSERT_EQ(first.size(), 9000u);
  f.kernel().SchedOut();
  ASSERT_TRUE(f.capture().Drain(1).ok());
  ASSERT_EQ(f.kernel().header()->aux_tail, 9000u);  // everything read
  // Free room: 16383 bytes, ending at stream byte 25383, inside the region that starts at
  // 24576 (ring offset 8192); the page count rounds down, so STOP goes on the region
  // ending at 16384.
  const std::vector<uint8_t> second = testing::TraceBytes(9000, 31);
  EXPECT_EQ(f.kernel().WriteTrace(second), 16384u - 9000u);
  EXPECT_FALSE(f.kernel().pt_enabled());  // TRUNCATED
  ASSERT_TRUE(f.capture().Drain(2).ok());
  const auto chunks = f.capture().stream().chunks;
  ASSERT_FALSE(chunks.empty());
  EXPECT_TRUE(chunks.back().truncated);
  EXPECT_EQ(f.kernel().header()->aux_tail, 16384u);
}

// The markers move only at a PMI, and then aux_tail is still where the reader left it
// before the PMI published anything. With the kernel's default watermark (half, so two
// regions) the next STOP is the end of the other half: the hardware stops there even
// though the reader has drained meanwhile. A quarter watermark (what the recorder sets,
// as perf does since 874fc35cdd55 "perf intel-pt: Use aux_watermark", v5.13) keeps a
// free region ahead.
TEST(AuxLinearTest, AQuarterWatermarkKeepsAPromptReaderFromTruncating) {
  for (const uint32_t quarters : {2u, 1u}) {
    SCOPED_TRACE(quarters == 2 ? "half" : "quarter");
    FakeKernelOptions o;
    o.aux_size = 16 * 4096;
    o.aux_watermark = static_cast<uint32_t>(o.aux_size / 4 * quarters);
    CaptureFixture f(o);
    for (int i = 0; i < 200; ++i) {
      f.kernel().WriteTrace(testing::TraceBytes(1000, 40 + i));
      ASSERT_TRUE(f.capture().Drain(i).ok());  // every PMI's bytes read at once
      if (!f.kernel().pt_enabled()) {
        ASSERT_TRUE(f.capture().ring().EnablePt().ok());
      }
    }
    if (quarters == 2) {
      EXPECT_GT(f.kernel().bytes_dropped(), 0u);
    } else {
      EXPECT_EQ(f.kernel().bytes_dropped(), 0u);
    }
  }
}

TEST(AuxLinearTest, SlowReaderTruncationIsRecordedNeverSilent) {
  FakeKernelOptions o;
  o.aux_size = 4 * 4096;
  CaptureFixture f(o);
  // Three ringfuls without a read: the kernel keeps the first ringful and drops the rest.
  std::vector<uint8_t> kept = Produce(f.kernel(), 3 * o.aux_size, 20);
  ASSERT_EQ(kept.size(), o.aux_size);
  EXPECT_EQ(f.kernel().bytes_dropped(), 2 * o.aux_size);
  EXPECT_FALSE(f.kernel().pt_enabled());  // TRUNCATED: disabled until re-enabled
  ASSERT_TRUE(f.capture().Drain(1).ok());
  ASSERT_TRUE(f.capture().ring().EnablePt().ok());
  std::vector<uint8_t> after = Produce(f.kernel(), 1000, 21);
  f.kernel().SchedOut();
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
  Produce(f.kernel(), 100, 30);
  f.kernel().SchedOut();  // publishes it: a PERF_RECORD_AUX after the COMM
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
      std::vector<uint8_t> piece = testing::TraceBytes(1 + rng() % 700, 1000 + i);
      offered += piece.size();
      size_t kept = f.kernel().WriteTrace(piece);
      stored.insert(stored.end(), piece.begin(), piece.begin() + kept);
      if (i % 64 == 0) std::this_thread::yield();
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t now = 0;
  while (!done.load(std::memory_order_acquire)) {
    ASSERT_TRUE(f.capture().Drain(++now).ok());
    ASSERT_TRUE(f.capture().ring().EnablePt().ok());  // as PtRecording after a truncation
  }
  producer.join();
  f.kernel().SchedOut();  // the rest, below the wakeup watermark
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
      std::vector<uint8_t> piece = testing::TraceBytes(1 + rng() % 500, 2000 + i);
      std::lock_guard<std::mutex> lock(stored_mu);
      size_t kept = f.kernel().WriteTrace(piece);
      stored.insert(stored.end(), piece.begin(), piece.begin() + kept);
    }
    done.store(true, std::memory_order_release);
  });
  int snapshots = 0;
  while (!done.load(std::memory_order_acquire) && snapshots < 50) {
    ASSERT_TRUE(f.Snapshot("control", snapshots).ok());
    ++snapshots;
    std::this_thread::yield();
  }
  producer.join();
  ASSERT_TRUE(f.Snapshot("exit", 99).ok());
  const auto chunks = f.capture().stream().chunks;
  std::string stream = f.StreamBytes();
  // Each chunk is stored bytes, in order: right after the previous chunk's when nothing
  // was lost in between, somewhere later otherwise; the last ends with the last byte.
  // The first chunk follows no copy: it starts later when the producer lapped the ring
  // before the first snapshot (seen with the sanitizers' slower snapshots).
  const std::string all = Str(stored);
  size_t end = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const std::string bytes = f.ChunkBytes(stream, i);
    if (i > 0 && !chunks[i].lost_before) {
      EXPECT_EQ(all.substr(end, bytes.size()), bytes) << i;
      end += bytes.size();
    } else {
      const size_t at = all.find(bytes, end);
      ASSERT_NE(at, std::string::npos) << i;
      end = at + bytes.size();
    }
  }
  // The last chunk ends with the last byte stored (a short chunk after a gap may also
  // match earlier, so its place is not taken from the search above). It is the "exit"
  // snapshot's unless the last "control" one already took every byte (an idle ring
  // gives no chunk).
  const std::string last = f.ChunkBytes(stream, chunks.size() - 1);
  ASSERT_LE(last.size(), all.size());
  EXPECT_EQ(all.substr(all.size() - last.size()), last);
  EXPECT_LE(end, all.size());
}

}  // namespace
}  // namespace ptd::pt
