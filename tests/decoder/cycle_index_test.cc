// CycleIndex on packets written by libipt's encoder with known CYC payloads: which CYCs
// a lookup at a decoder offset counts, bases across chunks, the cursor's clamp, and
// resynchronization after undecodable bytes.
#include <intel-pt.h>

#include <cstring>
#include <vector>

#include "common/pt_psb.h"
#include "decoder/cycle_index.h"
#include "decoder/packet_query.h"
#include "decoder/pt_stream_decoder.h"
#include "gtest/gtest.h"

namespace ptd::decoder {
namespace {

// Writes packets with pt_enc into a buffer (with the padding the decoders expect) and
// remembers where each one starts.
class PacketWriter {
 public:
  explicit PacketWriter(size_t capacity = 4096) : bytes_(capacity + kPtPadding, 0) {
    pt_config config;
    pt_config_init(&config);
    config.begin = bytes_.data();
    config.end = bytes_.data() + capacity;
    encoder_ = pt_alloc_encoder(&config);
  }
  ~PacketWriter() { pt_free_encoder(encoder_); }

  // Offset of the packet written.
  uint64_t Put(const pt_packet& packet) {
    uint64_t offset = 0;
    EXPECT_GE(pt_enc_get_offset(encoder_, &offset), 0);
    pt_packet copy = packet;
    EXPECT_GT(pt_enc_next(encoder_, &copy), 0) << "packet type " << packet.type;
    return offset;
  }
  uint64_t Psb() { return Put(Packet(ppt_psb)); }
  uint64_t PsbEnd() { return Put(Packet(ppt_psbend)); }
  uint64_t Pad() { return Put(Packet(ppt_pad)); }
  uint64_t Cyc(uint64_t value) {
    pt_packet p = Packet(ppt_cyc);
    p.payload.cyc.value = value;
    return Put(p);
  }
  uint64_t Mtc(uint8_t ctc) {
    pt_packet p = Packet(ppt_mtc);
    p.payload.mtc.ctc = ctc;
    return Put(p);
  }
  uint64_t Tnt(uint8_t bits, uint64_t payload) {
    pt_packet p = Packet(ppt_tnt_8);
    p.payload.tnt.bit_size = bits;
    p.payload.tnt.payload = payload;
    return Put(p);
  }
  uint64_t Tsc(uint64_t tsc) {
    pt_packet p = Packet(ppt_tsc);
    p.payload.tsc.tsc = tsc;
    return Put(p);
  }
  uint64_t Cbr(uint8_t ratio) {
    pt_packet p = Packet(ppt_cbr);
    p.payload.cbr.ratio = ratio;
    return Put(p);
  }
  uint64_t Tma(uint16_t ctc, uint16_t fc) {
    pt_packet p = Packet(ppt_tma);
    p.payload.tma.ctc = ctc;
    p.payload.tma.fc = fc;
    return Put(p);
  }
  uint64_t Tip(uint64_t ip) {
    pt_packet p = Packet(ppt_tip);
    p.payload.ip.ipc = pt_ipc_sext_48;
    p.payload.ip.ip = ip;
    return Put(p);
  }
  // Bytes no packet starts with (an extended opcode libipt does not know).
  uint64_t Garbage() {
    uint64_t offset = size();
    const uint8_t junk[] = {0x02, 0xee, 0x02, 0xee};
    std::memcpy(bytes_.data() + offset, junk, sizeof junk);
    EXPECT_GE(pt_enc_sync_set(encoder_, offset + sizeof junk), 0);
    return offset;
  }

  size_t size() const {
    uint64_t offset = 0;
    pt_enc_get_offset(encoder_, &offset);
    return static_cast<size_t>(offset);
  }
  const uint8_t* data() const { return bytes_.data(); }
  CycleIndex Index() const { return CycleIndex::Build(data(), size()); }

 private:
  static pt_packet Packet(enum pt_packet_type type) {
    pt_packet p;
    std::memset(&p, 0, sizeof p);
    p.type = type;
    return p;
  }
  std::vector<uint8_t> bytes_;
  pt_encoder* encoder_ = nullptr;
};

TEST(CycleIndexTest, CountsTheCycsBeforeThePacketTheyTime) {
  PacketWriter w;
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
  CycleIndex index = w.Index();

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
  PacketWriter w;
  w.Psb();
  w.PsbEnd();
  w.Tnt(2, 0b11);
  w.Tip(0x401000);
  CycleIndex index = w.Index();
  EXPECT_EQ(index.total(), 0u);
  EXPECT_TRUE(index.entries().empty());
  EXPECT_FALSE(StreamHasCyc(absl::MakeConstSpan(w.data(), w.size())));
}

TEST(CycleIndexTest, FindsCycForTheProbe) {
  PacketWriter w;
  w.Psb();
  w.PsbEnd();
  w.Tnt(2, 0b11);
  w.Cyc(9);
  w.Tip(0x401000);
  EXPECT_TRUE(StreamHasCyc(absl::MakeConstSpan(w.data(), w.size())));
  // Beyond the probe's limit it is not seen.
  EXPECT_FALSE(StreamHasCyc(absl::MakeConstSpan(w.data(), w.size()), 8));
}

TEST(CycleIndexTest, ResyncsAtTheNextPsbAfterUndecodableBytes) {
  PacketWriter w;
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
  CycleIndex index = w.Index();
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
  PacketWriter a;
  a.Psb();
  a.PsbEnd();
  std::vector<uint64_t> anchors;
  uint64_t expected = 0;
  for (uint64_t i = 1; i <= 40; ++i) {
    a.Cyc(i);
    expected += i;
    anchors.push_back(a.Tnt(1, i & 1));
  }
  CycleIndex first = a.Index();
  ASSERT_EQ(first.entries().size(), 40u);
  ASSERT_EQ(first.total(), expected);

  PacketWriter b;
  b.Psb();
  b.PsbEnd();
  b.Cyc(100);
  uint64_t tip = b.Tip(0x401000);
  b.Cyc(50);
  uint64_t tnt = b.Tnt(2, 3);
  CycleIndex second = b.Index();

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
    PacketWriter w(capacity);
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
    CycleIndex one = w.Index();
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
  PacketWriter w(capacity);
  w.Psb();
  w.PsbEnd();
  uint64_t i = 0;
  while (w.size() + 64 < capacity - CycleIndex::kMinParallelBytes / 2) {
    ++i;
    if (i % 7 != 0) w.Cyc(i % 29 + 1);
    if (i % 11 == 0) w.Cyc(3);  // two CYCs in a row: one group
    switch (i % 9) {
      case 0: w.Pad(); break;
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
  const CycleIndex own = w.Index();
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
