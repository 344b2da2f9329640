// DataRing over a hand-laid-out buffer (a perf_event_mmap_page followed by the DATA
// area), so the protocol is checked without the kernel: records that wrap the buffer end,
// LOST counting, corrupt sizes, and a producer racing the reader.
#include "recorder/sideband/data_ring.h"

#include <linux/perf_event.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ptd {
namespace {

// A fake ring: the kernel's side of the protocol, written out by hand.
class FakeRing {
 public:
  explicit FakeRing(size_t data_size) : data_(data_size, 0) {
    std::memset(&header_, 0, sizeof(header_));
  }
  perf_event_mmap_page* header() { return &header_; }
  uint8_t* data() { return data_.data(); }
  size_t size() const { return data_.size(); }

  // Starts both head and tail at `pos` (to place the next record near the end).
  void SetPosition(uint64_t pos) {
    header_.data_head = pos;
    header_.data_tail = pos;
  }
  // Writes `bytes` at data_head (wrapping) and publishes them.
  void Produce(const std::vector<uint8_t>& bytes) {
    uint64_t head = header_.data_head;
    for (size_t i = 0; i < bytes.size(); ++i) data_[(head + i) % data_.size()] = bytes[i];
    __atomic_store_n(&header_.data_head, head + bytes.size(), __ATOMIC_RELEASE);
  }

 private:
  perf_event_mmap_page header_;
  std::vector<uint8_t> data_;
};

// A record of `size` bytes whose body bytes are `fill`.
std::vector<uint8_t> MakeRecord(uint32_t type, uint16_t size, uint8_t fill) {
  std::vector<uint8_t> r(size, fill);
  perf_event_header h{type, 0, size};
  std::memcpy(r.data(), &h, sizeof(h));
  return r;
}

std::vector<uint8_t> MakeLost(uint64_t id, uint64_t lost) {
  std::vector<uint8_t> r = MakeRecord(PERF_RECORD_LOST, 8 + 16, 0);
  std::memcpy(r.data() + 8, &id, 8);
  std::memcpy(r.data() + 16, &lost, 8);
  return r;
}

std::string Bytes(const std::vector<std::vector<uint8_t>>& records) {
  std::string s;
  for (const auto& r : records) s.append(reinterpret_cast<const char*>(r.data()), r.size());
  return s;
}

TEST(DataRingTest, EmptyRingDrainsNothing) {
  FakeRing fake(256);
  DataRing ring(fake.header(), fake.data(), fake.size());
  std::string out;
  DataRingStats stats;
  EXPECT_FALSE(ring.HasData());
  ASSERT_TRUE(ring.Drain(&out, &stats).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(stats.records, 0u);
}

TEST(DataRingTest, CopiesRecordsAndReleasesSpace) {
  FakeRing fake(256);
  DataRing ring(fake.header(), fake.data(), fake.size());
  std::vector<std::vector<uint8_t>> records = {MakeRecord(PERF_RECORD_COMM, 32, 0xaa),
                                               MakeRecord(PERF_RECORD_MMAP2, 96, 0xbb)};
  for (const auto& r : records) fake.Produce(r);
  EXPECT_TRUE(ring.HasData());
  std::string out;
  DataRingStats stats;
  ASSERT_TRUE(ring.Drain(&out, &stats).ok());
  EXPECT_EQ(out, Bytes(records));
  EXPECT_EQ(stats.records, 2u);
  EXPECT_EQ(stats.bytes, 128u);
  EXPECT_EQ(fake.header()->data_tail, 128u);
  EXPECT_FALSE(ring.HasData());
}

// Produces `records` from `position` on in a ring of `size` bytes and drains it: every
// byte comes out once, in order, and all the space is released to the producer.
DataRingStats ExpectDrainsExactly(size_t size, uint64_t position,
                                  const std::vector<std::vector<uint8_t>>& records) {
  FakeRing fake(size);
  fake.SetPosition(position);
  DataRing ring(fake.header(), fake.data(), fake.size());
  for (const auto& r : records) fake.Produce(r);
  std::string out;
  DataRingStats stats;
  EXPECT_TRUE(ring.Drain(&out, &stats).ok());
  EXPECT_EQ(out, Bytes(records));
  EXPECT_EQ(fake.header()->data_tail, fake.header()->data_head);
  EXPECT_EQ(fake.header()->data_tail, position + Bytes(records).size());  // mod 2^64
  return stats;
}

TEST(DataRingTest, JoinsARecordThatWrapsTheBufferEnd) {
  // 40 bytes before the end: the 64-byte record's header fits, its body wraps.
  DataRingStats stats = ExpectDrainsExactly(256, 3 * 256 + 216,
                                            {MakeRecord(PERF_RECORD_MMAP2, 64, 0x11),
                                             MakeRecord(PERF_RECORD_COMM, 24, 0x22)});
  EXPECT_EQ(stats.wrapped_records, 1u);
}

TEST(DataRingTest, JoinsARecordWhoseHeaderWraps) {
  // The 8-byte header itself is split 4 + 4.
  DataRingStats stats = ExpectDrainsExactly(128, 128 - 4, {MakeRecord(PERF_RECORD_EXIT, 48, 0x33)});
  EXPECT_EQ(stats.wrapped_records, 1u);
}

// Ring positions are free-running u64 counters; reading must not depend on them
// staying below 2^64 (found by the data_ring fuzzer).
TEST(DataRingTest, PositionsMayWrapAround2Pow64) {
  ExpectDrainsExactly(128, ~uint64_t{0} - 15, {MakeRecord(PERF_RECORD_COMM, 32, 0x55),
                                               MakeRecord(PERF_RECORD_FORK, 40, 0x66)});
}

TEST(DataRingTest, SumsLostRecords) {
  FakeRing fake(256);
  DataRing ring(fake.header(), fake.data(), fake.size());
  fake.Produce(MakeLost(7, 5));
  fake.Produce(MakeRecord(PERF_RECORD_COMM, 32, 0));
  fake.Produce(MakeLost(7, 12));
  std::string out;
  DataRingStats stats;
  ASSERT_TRUE(ring.Drain(&out, &stats).ok());
  EXPECT_EQ(stats.lost_records, 17u);
  EXPECT_EQ(stats.lost_events, 2u);
  EXPECT_EQ(stats.records, 3u);
}

TEST(DataRingTest, ZeroSizeRecordIsAnErrorWithOffsetAndKeepsEarlierRecords) {
  FakeRing fake(256);
  fake.SetPosition(64);
  DataRing ring(fake.header(), fake.data(), fake.size());
  std::vector<uint8_t> good = MakeRecord(PERF_RECORD_COMM, 32, 0x44);
  fake.Produce(good);
  fake.Produce(MakeRecord(PERF_RECORD_MMAP, 16, 0));
  // Corrupt the second record's size to 0.
  uint16_t zero = 0;
  std::memcpy(fake.data() + 96 + 6, &zero, 2);
  std::string out;
  DataRingStats stats;
  absl::Status st = ring.Drain(&out, &stats);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("offset 0x60"), absl::string_view::npos) << st.message();
  EXPECT_EQ(out, Bytes({good}));
  // The rest is released so the kernel can go on.
  EXPECT_EQ(fake.header()->data_tail, fake.header()->data_head);
}

TEST(DataRingTest, RecordLongerThanPublishedDataIsAnError) {
  FakeRing fake(256);
  DataRing ring(fake.header(), fake.data(), fake.size());
  std::vector<uint8_t> r = MakeRecord(PERF_RECORD_COMM, 32, 0);
  uint16_t big = 200;
  std::memcpy(r.data() + 6, &big, 2);
  fake.Produce(r);
  std::string out;
  DataRingStats stats;
  absl::Status st = ring.Drain(&out, &stats);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("size 200"), absl::string_view::npos) << st.message();
  EXPECT_TRUE(out.empty());
}

TEST(DataRingTest, HeadFurtherAheadThanTheRingIsAnError) {
  FakeRing fake(128);
  DataRing ring(fake.header(), fake.data(), fake.size());
  fake.header()->data_head = 1024;
  std::string out;
  DataRingStats stats;
  EXPECT_EQ(ring.Drain(&out, &stats).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(fake.header()->data_tail, 1024u);
}

// A producer thread writes numbered records as fast as the ring allows (it only writes
// into space the reader released, as the kernel does); the reader must see every record
// exactly once, in order, intact, across many wrap-arounds.
TEST(DataRingTest, ProducerRacingTheReaderLosesNothing) {
  constexpr size_t kRingSize = 4096;
  constexpr uint64_t kRecords = 5000;  // ~50 trips around the ring
  FakeRing fake(kRingSize);
  DataRing ring(fake.header(), fake.data(), fake.size());
  std::atomic<bool> done{false};
  std::thread producer([&] {
    perf_event_mmap_page* h = fake.header();
    for (uint64_t seq = 0; seq < kRecords; ++seq) {
      // Sizes 16..64 so records land at every alignment relative to the end.
      uint16_t size = static_cast<uint16_t>(16 + 8 * (seq % 7));
      std::vector<uint8_t> r = MakeRecord(PERF_RECORD_MMAP2, size, static_cast<uint8_t>(seq));
      std::memcpy(r.data() + 8, &seq, sizeof(seq));
      uint64_t head = h->data_head;
      while (head + size - __atomic_load_n(&h->data_tail, __ATOMIC_ACQUIRE) > kRingSize) {
        std::this_thread::yield();
      }
      fake.Produce(r);
    }
    done.store(true);
  });
  std::string out;
  DataRingStats stats;
  absl::Status status;
  while (!done.load() || ring.HasData()) {
    status.Update(ring.Drain(&out, &stats));
    std::this_thread::yield();
  }
  producer.join();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(stats.records, kRecords);
  EXPECT_GT(stats.wrapped_records, 0u);
  size_t at = 0;
  for (uint64_t seq = 0; seq < kRecords; ++seq) {
    perf_event_header h;
    ASSERT_LE(at + sizeof(h), out.size());
    std::memcpy(&h, out.data() + at, sizeof(h));
    ASSERT_EQ(h.size, 16 + 8 * (seq % 7)) << "record " << seq;
    uint64_t got;
    std::memcpy(&got, out.data() + at + 8, sizeof(got));
    ASSERT_EQ(got, seq);
    for (size_t i = 16; i < h.size; ++i) {
      ASSERT_EQ(static_cast<uint8_t>(out[at + i]), static_cast<uint8_t>(seq)) << "record " << seq;
    }
    at += h.size;
  }
  EXPECT_EQ(at, out.size());
}

}  // namespace
}  // namespace ptd
