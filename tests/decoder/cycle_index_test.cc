// CycleIndex on packets written by libipt's encoder with known CYC payloads: which CYCs
// a lookup at a decoder offset counts, bases across chunks, the cursor's clamp, and
// resynchronization after undecodable bytes.
#include <intel-pt.h>

#include <cstring>
#include <vector>

#include "common/pt_psb.h"
#include "decoder/packets/cycle_index.h"
#include "decoder/packets/packet_query.h"
#include "decoder/flow/pt_stream_decoder.h"
#include "gtest/gtest.h"
#include "tests/decoder/packet_writer.h"

namespace ptd::decoder {
namespace {

TEST(CycleIndexTest, CountsTheCycsBeforeThePacketTheyTime) {
  testing::PacketWriter w;
  w.Psb();
  w.PsbEnd();
  w.Cyc(5);
  w.Pad();
  uint64_t tnt = w.Tnt(3, 0b101);
  w.Cyc(7);
  w.Mtc(1);
  w.Cyc(3);
  uint64_t tip = w.Tip(0x401000);
  w.Cyc(11);  // trailing: no packet after it
  CycleIndex index = CycleIndex::Build(w.data(), w.size());

  EXPECT_EQ(index.cyc_packets(), 4u);
  EXPECT_EQ(index.total(), 5u + 7u + 3u + 11u);
  ASSERT_EQ(index.entries().size(), 2u);
  EXPECT_EQ(index.entries()[0].offset, tnt);
  EXPECT_EQ(index.entries()[0].cycles, 5u);
  EXPECT_EQ(index.entries()[1].offset, tip);
  EXPECT_EQ(index.entries()[1].cycles, 15u);

  // The query decoder stands after the packet it consumed: at the TNT nothing is
  // counted yet, past it the CYC that timed it is; the CYCs read ahead over (7, then the
  // MTC, then 3) belong to the TIP.
  EXPECT_EQ(index.At(0), 0u);
  EXPECT_EQ(index.At(tnt), 0u);
  EXPECT_EQ(index.At(tnt + 1), 5u);
  EXPECT_EQ(index.At(tip), 5u);
  EXPECT_EQ(index.At(tip + 1), 15u);
  EXPECT_EQ(index.At(w.size()), 15u);
}

TEST(CycleIndexTest, NoCycNoEntries) {
  testing::PacketWriter w;
  w.Psb();
  w.PsbEnd();
  w.Tnt(2, 0b11);
  w.Tip(0x401000);
  CycleIndex index = CycleIndex::Build(w.data(), w.size());
  EXPECT_EQ(index.total(), 0u);
  EXPECT_TRUE(index.entries().empty());
  EXPECT_FALSE(StreamHasCyc(absl::MakeConstSpan(w.data(), w.size())));
}

// A PSB+, then two taken branches, 9 cycles and a TIP: the smallest stream with a CYC.
void WriteOneCyc(testing::PacketWriter& w) {
  w.Psb();
  w.PsbEnd();
  w.Tnt(2, 0b11);
  w.Cyc(9);
  w.Tip(0x401000);
}

TEST(CycleIndexTest, FindsCycForTheProbe) {
  testing::PacketWriter w;
  WriteOneCyc(w);
  EXPECT_TRUE(StreamHasCyc(absl::MakeConstSpan(w.data(), w.size())));
  // Beyond the probe's limit it is not seen.
  EXPECT_FALSE(StreamHasCyc(absl::MakeConstSpan(w.data(), w.size()), 8));
}

// The probe's limit counts from the first PSB: the bytes before it (a wrapped buffer's
// head, here 1 MiB of PADs) are no packets to look at.
TEST(CycleIndexTest, TheProbeLooksFromTheFirstPsb) {
  testing::PacketWriter w;
  WriteOneCyc(w);
  std::vector<uint8_t> bytes(size_t{1} << 20, 0);
  bytes.insert(bytes.end(), w.data(), w.data() + w.size() + kPtPadding);
  const auto stream = absl::MakeConstSpan(bytes.data(), bytes.size() - kPtPadding);
  EXPECT_TRUE(StreamHasCyc(stream));
  EXPECT_FALSE(StreamHasPacket(stream, ppt_tsc, 64 << 10, 2));  // none there to find
  EXPECT_TRUE(StreamHasPacket(stream, ppt_tip, 64 << 10));
}

TEST(CycleIndexTest, ResyncsAtTheNextPsbAfterUndecodableBytes) {
  testing::PacketWriter w;
  w.Psb();
  w.PsbEnd();
  w.Cyc(4);
  uint64_t first = w.Tnt(1, 1);
  w.Garbage();
  w.Cyc(1000);  // inside the bad stretch: the packet decoder never reads it
  w.Tnt(1, 1);
  uint64_t psb = w.Psb();
  w.PsbEnd();
  w.Cyc(6);
  uint64_t last = w.Tip(0x402000);
  CycleIndex index = CycleIndex::Build(w.data(), w.size());
  EXPECT_EQ(index.total(), 10u);
  ASSERT_EQ(index.entries().size(), 2u);
  EXPECT_EQ(index.entries()[0].offset, first);
  EXPECT_EQ(index.entries()[1].offset, last);
  EXPECT_EQ(index.At(psb), 4u);
  EXPECT_EQ(index.At(last + 1), 10u);
}

// Two chunks of one stream: the second counts on from the first's total; the cursor
// never goes back, even when the decoder does (a resync at an earlier PSB).
TEST(CycleIndexTest, CursorAddsChunkBasesAndNeverDecreases) {
  testing::PacketWriter a;
  a.Psb();
  a.PsbEnd();
  std::vector<uint64_t> anchors;
  uint64_t expected = 0;
  for (uint64_t i = 1; i <= 40; ++i) {
    a.Cyc(i);
    expected += i;
    anchors.push_back(a.Tnt(1, i & 1));
  }
  CycleIndex first = CycleIndex::Build(a.data(), a.size());
  ASSERT_EQ(first.entries().size(), 40u);
  ASSERT_EQ(first.total(), expected);

  testing::PacketWriter b;
  b.Psb();
  b.PsbEnd();
  b.Cyc(100);
  uint64_t tip = b.Tip(0x401000);
  b.Cyc(50);
  uint64_t tnt = b.Tnt(2, 3);
  CycleIndex second = CycleIndex::Build(b.data(), b.size());

  CycleCursor cursor;
  EXPECT_FALSE(cursor.active());
  cursor.Start(&first, 0);
  EXPECT_TRUE(cursor.active());
  // Step by step, as the decoder moves packet by packet.
  uint64_t sum = 0;
  for (size_t i = 0; i < anchors.size(); ++i) {
    sum += i + 1;
    EXPECT_EQ(cursor.At(anchors[i] + 1), sum) << i;
  }
  // Back to the start (a resync): clamped at what was handed out.
  EXPECT_EQ(cursor.At(anchors[3] + 1), expected);
  // A jump ahead (a piece starting mid-buffer) searches.
  CycleCursor piece;
  piece.Start(&first, 0);
  EXPECT_EQ(piece.At(anchors[30] + 1), first.At(anchors[30] + 1));
  EXPECT_EQ(piece.At(anchors[31] + 1), first.At(anchors[31] + 1));

  // The next chunk starts at the first's total.
  cursor.Start(&second, first.total());
  EXPECT_EQ(cursor.last(), expected);
  EXPECT_EQ(cursor.At(tip), expected);
  EXPECT_EQ(cursor.At(tip + 1), expected + 100);
  EXPECT_EQ(cursor.At(tnt + 1), expected + 150);
  cursor.Clear();
  EXPECT_FALSE(cursor.active());
  EXPECT_EQ(cursor.last(), 0u);
}

void ExpectSameIndex(const CycleIndex& a, const CycleIndex& b) {
  EXPECT_EQ(a.total(), b.total());
  EXPECT_EQ(a.cyc_packets(), b.cyc_packets());
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (size_t i = 0; i < a.entries().size(); ++i) {
    ASSERT_EQ(a.entries()[i].offset, b.entries()[i].offset) << i;
    ASSERT_EQ(a.entries()[i].cycles, b.entries()[i].cycles) << i;
  }
}

// A buffer over 1 MiB is scanned in stretches cut at PSBs, in parallel: the index is the
// one scan's, also where CYCs end a stretch (they time the next one's PSB) and where
// undecodable bytes make the stretches not meet (one scan then).
TEST(CycleIndexTest, ParallelScanEqualsOneScan) {
  for (bool garbage : {false, true}) {
    SCOPED_TRACE(garbage ? "with undecodable bytes" : "clean");
    const size_t capacity = 3 * CycleIndex::kMinParallelBytes;
    testing::PacketWriter w(capacity);
    w.Psb();
    w.PsbEnd();
    uint64_t i = 0;
    while (w.size() + 64 < capacity - CycleIndex::kMinParallelBytes / 2) {
      ++i;
      w.Cyc(i % 13 + 1);
      if (i % 300 == 0) {
        w.Psb();  // right after a CYC: the group times the PSB
        w.PsbEnd();
      } else if (i % 3 == 0) {
        w.Tip(0x400000 + i * 16);
      } else if (i % 5 == 0) {
        w.Mtc(static_cast<uint8_t>(i));
      } else {
        w.Tnt(3, i & 7);
      }
      if (garbage && i == 100000) w.Garbage();
    }
    ASSERT_GT(w.size(), CycleIndex::kMinParallelBytes);
    std::vector<uint64_t> psbs = FindPsbOffsets(absl::MakeConstSpan(w.data(), w.size()));
    ASSERT_GT(psbs.size(), 100u);
    CycleIndex one = CycleIndex::Build(w.data(), w.size());
    EXPECT_GT(one.entries().size(), 1000u);
    for (int threads : {2, 3, 7}) {
      SCOPED_TRACE(threads);
      ExpectSameIndex(one, CycleIndex::Build(w.data(), w.size(), psbs, threads));
    }
  }
}

// The fast decoder's index comes from PacketQuery's scan of the buffer (one pass over
// the packets for both): the same groups, totals and offsets as the index's own pass,
// whatever read-ahead packets (PAD, MTC, TSC, TMA, CBR) lie between a CYC and the packet
// it times, on one scan thread or several (groups open at a stretch's end time the next
// stretch's PSB).
TEST(CycleIndexTest, PacketScanGivesTheSameIndex) {
  const size_t capacity = 3 * CycleIndex::kMinParallelBytes;
  testing::PacketWriter w(capacity);
  w.Psb();
  w.PsbEnd();
  uint64_t i = 0;
  while (w.size() + 64 < capacity - CycleIndex::kMinParallelBytes / 2) {
    ++i;
    if (i % 7 != 0) w.Cyc(i % 29 + 1);
    if (i % 11 == 0) w.Cyc(3);  // two CYCs in a row: one group
    switch (i % 9) {
      case 0:
        for (uint64_t n = i % 5; n-- > 0;) w.Pad();  // runs, as hardware pads
        break;
      case 1: w.Mtc(static_cast<uint8_t>(i)); break;
      case 2: w.Tsc(i * 1000); break;
      case 3: w.Tma(static_cast<uint16_t>(i), static_cast<uint16_t>(i % 500)); break;
      case 4: w.Cbr(static_cast<uint8_t>(i % 40 + 1)); break;
      default: break;
    }
    if (i % 400 == 0) {
      w.Psb();
      w.PsbEnd();
    } else if (i % 3 == 0) {
      w.Tip(0x400000 + i * 16);
    } else {
      w.Tnt(3, i & 7);
    }
  }
  w.Cyc(5);  // trailing: no packet times it, but it counts in the total
  const std::vector<uint64_t> psbs = FindPsbOffsets(absl::MakeConstSpan(w.data(), w.size()));
  const CycleIndex own = CycleIndex::Build(w.data(), w.size());
  ASSERT_GT(own.entries().size(), 10000u);
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(w.data());
  config.end = config.begin + w.size();
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const PacketQuery::Scan scan = PacketQuery::ScanBytes(config, threads, 1000);
    ASSERT_TRUE(scan.supported);
    ASSERT_NE(scan.cycles, nullptr);
    ExpectSameIndex(own, *scan.cycles);
  }
}

}  // namespace
}  // namespace ptd::decoder
