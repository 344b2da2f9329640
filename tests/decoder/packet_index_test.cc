#include "decoder/packets/packet_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ptd::decoder {
namespace {

// Random packets with PADs between them (none, a few bytes, more than a PAD record holds),
// values of every width, written in stretches as the parallel scan writes them.
struct Stream {
  std::vector<IndexedPacket> packets;
  uint64_t size = 0;
};

Stream MakeStream(std::mt19937_64& random, size_t count) {
  Stream s;
  uint64_t at = 100 + random() % 50;  // bytes before the first packet are not indexed
  for (size_t i = 0; i < count; ++i) {
    const int gap_kind = static_cast<int>(random() % 10);
    at += gap_kind < 6 ? 0 : gap_kind < 8 ? random() % 4 + 1 : gap_kind < 9 ? random() % 600 + 250 : random() % 5000;
    IndexedPacket p;
    p.offset = static_cast<uint32_t>(at);
    p.kind = static_cast<uint8_t>(2 + random() % 24);  // not a PAD (the scan leaves them out)
    p.size = static_cast<uint8_t>(1 + random() % 16);
    const int width = static_cast<int>(random() % 5);
    p.value = width == 0 ? 0 : width == 1 ? random() % 256 : width == 2 ? random() & 0xffffffff : width == 3 ? random() : UINT64_MAX;
    p.aux = random() % 3 == 0 ? 0 : static_cast<uint8_t>(random());
    p.bits = random() % 3 == 0 ? 0 : static_cast<uint8_t>(random());
    s.packets.push_back(p);
    at += p.size;
  }
  s.size = at + random() % 300;  // PADs after the last packet, up to the end
  return s;
}

// The index of `s`, in `stretches` stretches of chunks of `chunk_records` records.
PacketIndex Build(const Stream& s, int stretches, uint64_t chunk_records) {
  PacketIndex index(s.size);
  const size_t per = (s.packets.size() + stretches - 1) / stretches;
  for (size_t from = 0; from < s.packets.size(); from += per) {
    const size_t to = std::min(s.packets.size(), from + per);
    const uint64_t end = to < s.packets.size() ? s.packets[to].offset : s.size;
    PacketIndex::Writer writer(chunk_records, end);
    for (size_t i = from; i < to; ++i) writer.Add(s.packets[i]);
    index.Append(writer.Finish());
  }
  return index;
}

// What Find must say at `offset`: the packet starting there, PADs, or nothing.
struct Expected {
  PacketIndex::Reader::At at = PacketIndex::Reader::At::kNone;
  const IndexedPacket* packet = nullptr;
  uint64_t pads_end = 0;  // kPad: where the PADs stop (a pad_end may come sooner)
};

Expected Expect(const Stream& s, uint64_t offset) {
  Expected e;
  if (offset < s.packets.front().offset || offset >= s.size) return e;
  auto next = std::upper_bound(s.packets.begin(), s.packets.end(), offset,
                               [](uint64_t o, const IndexedPacket& p) { return o < p.offset; });
  const IndexedPacket& before = *(next - 1);  // the last packet at or before `offset`
  if (before.offset == offset) {
    e.at = PacketIndex::Reader::At::kPacket;
    e.packet = &before;
  } else if (offset >= before.offset + before.size) {
    e.at = PacketIndex::Reader::At::kPad;
    e.pads_end = next == s.packets.end() ? s.size : next->offset;
  }
  return e;
}

// Checks Find at `offset`; on PADs, returns where they end (else offset + 1).
void Check(PacketIndex::Reader& reader, const Stream& s, uint64_t offset, uint64_t* pad_end_out) {
  SCOPED_TRACE(offset);
  const Expected e = Expect(s, offset);
  const PacketIndex::Record* record = nullptr;
  uint64_t value = 0, pad_end = 0;
  PacketIndex::Reader::At at = reader.Find(offset, &record, &value, &pad_end);
  if (at == PacketIndex::Reader::At::kPacket && (record->kind & PacketIndex::kKindMask) == PacketIndex::kPadKind) {
    at = PacketIndex::Reader::At::kPad;  // a PAD record: PADs up to its end
    pad_end = offset + record->size;
  }
  ASSERT_EQ(static_cast<int>(at), static_cast<int>(e.at));
  if (at == PacketIndex::Reader::At::kPacket) {
    EXPECT_EQ(record->kind & PacketIndex::kKindMask, e.packet->kind);
    EXPECT_EQ(record->size, e.packet->size);
    EXPECT_EQ(record->aux, e.packet->aux);
    EXPECT_EQ(record->bits, e.packet->bits);
    EXPECT_EQ(value, e.packet->value);
  } else if (at == PacketIndex::Reader::At::kPad) {
    EXPECT_GT(pad_end, offset);
    EXPECT_LE(pad_end, e.pads_end);
  }
  if (pad_end_out != nullptr) *pad_end_out = at == PacketIndex::Reader::At::kPad ? pad_end : offset + 1;
}

TEST(PacketIndexTest, PacketsReadBackInOrderAndUnpack) {
  std::mt19937_64 random(7);
  for (int round = 0; round < 6; ++round) {
    const Stream s = MakeStream(random, 3000);
    for (int stretches : {1, 3}) {
      for (uint64_t chunk_records : {uint64_t{5}, uint64_t{64}, uint64_t{1} << 16}) {
        SCOPED_TRACE(::testing::Message() << "round " << round << ", " << stretches << " stretches, chunks of "
                                          << chunk_records);
        const PacketIndex index = Build(s, stretches, chunk_records);
        EXPECT_EQ(index.Unpack(), s.packets);
        // As the query reads: each packet, then the PADs after it, to the end.
        PacketIndex::Reader reader(&index);
        size_t packets = 0;
        for (uint64_t offset = s.packets.front().offset; offset < s.size;) {
          const Expected e = Expect(s, offset);
          ASSERT_NE(static_cast<int>(e.at), static_cast<int>(PacketIndex::Reader::At::kNone)) << offset;
          uint64_t pad_end = 0;
          Check(reader, s, offset, &pad_end);
          if (::testing::Test::HasFailure()) return;
          if (e.at == PacketIndex::Reader::At::kPacket) {
            ++packets;
            offset += e.packet->size;
          } else {
            offset = pad_end;
          }
        }
        EXPECT_EQ(packets, s.packets.size());
        // Wide values are kept apart; the records stay at 8 bytes a record.
        EXPECT_LT(index.bytes(), s.packets.size() * 16 + (s.size / 255 + 2 * s.packets.size()) * 8);
      }
    }
  }
}

// Any offset, in any order (a sync, a piece's start, a look back): the packet there, PADs,
// or nothing (before the first packet, inside one, at the end); reading on from there
// goes on right.
TEST(PacketIndexTest, FindAtAnyOffset) {
  std::mt19937_64 random(11);
  const Stream s = MakeStream(random, 2000);
  for (uint64_t chunk_records : {uint64_t{3}, uint64_t{100}, uint64_t{1} << 16}) {
    SCOPED_TRACE(chunk_records);
    const PacketIndex index = Build(s, 2, chunk_records);
    PacketIndex::Reader reader(&index);
    for (int i = 0; i < 20000; ++i) {
      uint64_t offset = random() % (s.size + 20);
      if (i % 3 == 0) offset = s.packets[random() % s.packets.size()].offset;  // a packet's start
      uint64_t next = 0;
      Check(reader, s, offset, &next);
      // And the few after it, as a sequential read goes on.
      for (int k = 0; k < 3 && next < s.size; ++k) {
        const Expected e = Expect(s, next);
        if (e.at == PacketIndex::Reader::At::kNone) break;
        const uint64_t at = next;
        Check(reader, s, at, &next);
        if (e.at == PacketIndex::Reader::At::kPacket) next = at + e.packet->size;
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace ptd::decoder
