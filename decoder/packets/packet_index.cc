#include "decoder/packets/packet_index.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace ptd::decoder {

void PacketIndex::Writer::CloseChunk() {
  if (records_ == nullptr) return;
  chunk_.count = count_;
  chunk_.end = end_;
  if (count_ != 0) chunks_.push_back(std::move(chunk_));
  chunk_ = Chunk();
  records_ = nullptr;
}

namespace {

// Faults in the whole pages of [data, data + bytes) in one call: a chunk's records are
// written one after another, nearly all of them (only the last chunk of a buffer has more
// room than it fills), and one page fault each costs ~2.3 µs on these VMs (the 60 M
// walker's index: 11 k of them). Kernels before 5.14 refuse it; the pages then fault in
// as they are written.
void PopulateForWriting(void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace

// A new chunk starting at `offset`, with room for the records the PT bytes left can make
// (each covers a byte or more).
void PacketIndex::Writer::NextChunk(uint64_t offset) {
  CloseChunk();
  const uint64_t left = end_offset_ > offset ? end_offset_ - offset : 0;
  limit_ = static_cast<uint32_t>(std::min<uint64_t>({std::max<uint64_t>(chunk_records_, 1), left + 1, UINT32_MAX}));
  chunk_.first = offset;
  chunk_.records.reset(new Record[limit_]);
  PopulateForWriting(chunk_.records.get(), limit_ * sizeof(Record));
  chunk_.marks.reserve(limit_ / Chunk::kMarkEvery + 1);
  records_ = chunk_.records.get();
  count_ = 0;
  end_ = offset;
}

void PacketIndex::Writer::Gap(uint64_t offset) {
  if (records_ == nullptr || count_ == limit_ || offset < end_) {
    NextChunk(offset);  // the bytes up to `offset` are PADs between chunks
    return;
  }
  while (end_ < offset) {
    if (count_ == limit_) {
      NextChunk(offset);
      return;
    }
    const uint8_t size = static_cast<uint8_t>(std::min<uint64_t>(offset - end_, 255));
    if (count_ % Chunk::kMarkEvery == 0) chunk_.marks.push_back({static_cast<uint32_t>(end_), count_});
    records_[count_++] = Record{0, kPadKind, size, 0, 0};
    end_ += size;
  }
  if (count_ == limit_) NextChunk(offset);
}

std::vector<PacketIndex::Chunk> PacketIndex::Writer::Finish() {
  CloseChunk();
  return std::move(chunks_);
}

void PacketIndex::Append(std::vector<Chunk>&& chunks) {
  for (Chunk& chunk : chunks) chunks_.push_back(std::move(chunk));
}

size_t PacketIndex::bytes() const {
  size_t bytes = 0;
  for (const Chunk& chunk : chunks_) bytes += chunk.count * sizeof(Record) + chunk.wide.size() * sizeof(uint64_t);
  return bytes;
}

std::vector<IndexedPacket> PacketIndex::Unpack() const {
  std::vector<IndexedPacket> packets;
  ForEachPacket([&packets](const IndexedPacket& p) { packets.push_back(p); });
  return packets;
}

PacketIndex::Reader::At PacketIndex::Reader::FindOther(uint64_t offset, const Record** record, uint64_t* value,
                                                       uint64_t* pad_end) {
  if (offset >= index_->size_) return At::kNone;  // the end, or past it
  // PADs after the chunk's last record, up to the next chunk.
  if (chunk_ != nullptr && next_ == count_ && offset >= chunk_->end && offset < chunk_stop_) {
    *pad_end = chunk_stop_;
    return At::kPad;
  }
  const std::vector<Chunk>& chunks = index_->chunks_;
  auto after = std::upper_bound(chunks.begin(), chunks.end(), offset,
                                [](uint64_t o, const Chunk& c) { return o < c.first; });
  if (after == chunks.begin()) return At::kNone;
  chunk_ = &*(after - 1);
  count_ = chunk_->count;
  chunk_stop_ = after == chunks.end() ? index_->size_ : after->first;
  if (offset >= chunk_->end) {
    next_ = count_;
    next_offset_ = chunk_->end;
    *pad_end = chunk_stop_;
    return At::kPad;
  }
  // From the mark before `offset`, record by record.
  auto mark = std::upper_bound(chunk_->marks.begin(), chunk_->marks.end(), offset,
                               [](uint64_t o, const Chunk::Mark& m) { return o < m.offset; });
  uint32_t i = (mark - 1)->record;
  uint64_t at = (mark - 1)->offset;
  while (offset >= at + chunk_->records[i].size) at += chunk_->records[i++].size;
  const Record* r = &chunk_->records[i];
  next_ = i + 1;
  next_offset_ = at + r->size;
  if (at == offset) {
    *record = r;
    *value = (r->kind & kWide) ? chunk_->wide[r->value] : r->value;
    return At::kPacket;
  }
  if ((r->kind & kKindMask) == kPadKind) {
    *pad_end = next_offset_;
    return At::kPad;
  }
  return At::kNone;  // inside a packet
}

}  // namespace ptd::decoder
