#pragma once
// The packets of a PT buffer that PacketQuery's scan decoded with pt_pkt_next, kept for
// the query to read back instead of decoding each packet again.
//
// Eight bytes a packet: the 60 M walker's index took 91 MB at 16 bytes a packet, and on
// these VMs first-touch page faults cost ~2.3 µs a page (~50 ms of a 440 ms decode), and
// two decoding threads wait on memory. A record holds the kind, size, aux and bits, and
// the value when it fits in 32 bits (else an index into the chunk's wide values: TSCs and
// full IPs). Offsets are not stored: the records cover the bytes one after another, the
// PADs between packets as PAD records of up to 255 bytes.

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ptd::decoder {

// What a packet is, as the query layer reads it (kOther: a packet it does not model).
enum class PacketKind : uint8_t { kNone, kPad, kPsb, kPsbend, kTip, kTnt, kPge, kPgd, kFup, kOvf, kMode, kTsc, kCbr, kPip, kVmcs, kStop, kMnt, kExstop, kMwait, kPwre, kPwrx, kPtw, kTma, kMtc, kCyc, kOther };

// One packet libipt decoded, as the query layer and the time index need it. `value`: TNT
// payload, IP, TSC, CR3, VMCS base, CYC, TMA ctc | fc << 16, MNT and PTW payload, MWAIT
// hints | ext << 32, PWRE hw, PWRX interrupt | store << 1 | autonomous << 2. `aux`: TNT
// bit size, IP compression, MODE leaf, CBR ratio, PIP nr, MTC ctc, EXSTOP and PTW ip,
// PWRE state, PWRX last. `bits`: MODE exec csl | csd << 1, tsx intx | abrt << 1; PWRE
// sub-state, PWRX deepest, PTW plc.
struct IndexedPacket {
  uint64_t value = 0;
  uint32_t offset = 0;  // in the buffer
  uint8_t kind = 0;     // PacketKind, below 32
  uint8_t size = 0;
  uint8_t aux = 0;
  uint8_t bits = 0;
  bool operator==(const IndexedPacket&) const = default;
};

// `packet`, at `offset`, packed (inline: the scan packs every packet of a buffer).
[[gnu::always_inline]] inline IndexedPacket PackPacket(const pt_packet& packet, uint64_t offset) {
  IndexedPacket p;
  p.offset = static_cast<uint32_t>(offset);
  p.size = packet.size;
  switch (packet.type) {
    case ppt_pad: p.kind = static_cast<uint8_t>(PacketKind::kPad); break;
    case ppt_psb: p.kind = static_cast<uint8_t>(PacketKind::kPsb); break;
    case ppt_psbend: p.kind = static_cast<uint8_t>(PacketKind::kPsbend); break;
    case ppt_ovf: p.kind = static_cast<uint8_t>(PacketKind::kOvf); break;
    case ppt_tnt_8:
    case ppt_tnt_64:
      p.kind = static_cast<uint8_t>(PacketKind::kTnt);
      p.value = packet.payload.tnt.payload;
      p.aux = packet.payload.tnt.bit_size;
      break;
    case ppt_tip:
    case ppt_tip_pge:
    case ppt_tip_pgd:
    case ppt_fup:
      p.kind = static_cast<uint8_t>(packet.type == ppt_tip       ? PacketKind::kTip
                                    : packet.type == ppt_tip_pge ? PacketKind::kPge
                                    : packet.type == ppt_tip_pgd ? PacketKind::kPgd
                                                                 : PacketKind::kFup);
      p.value = packet.payload.ip.ip;
      p.aux = static_cast<uint8_t>(packet.payload.ip.ipc);
      break;
    case ppt_mode:
      if (packet.payload.mode.leaf != pt_mol_exec && packet.payload.mode.leaf != pt_mol_tsx) {
        p.kind = static_cast<uint8_t>(PacketKind::kOther);
        break;
      }
      p.kind = static_cast<uint8_t>(PacketKind::kMode);
      p.aux = static_cast<uint8_t>(packet.payload.mode.leaf);
      p.bits = packet.payload.mode.leaf == pt_mol_exec
                   ? static_cast<uint8_t>(packet.payload.mode.bits.exec.csl | packet.payload.mode.bits.exec.csd << 1)
                   : static_cast<uint8_t>(packet.payload.mode.bits.tsx.intx | packet.payload.mode.bits.tsx.abrt << 1);
      break;
    case ppt_tsc:
      p.kind = static_cast<uint8_t>(PacketKind::kTsc);
      p.value = packet.payload.tsc.tsc;
      break;
    case ppt_cbr:
      p.kind = static_cast<uint8_t>(PacketKind::kCbr);
      p.aux = packet.payload.cbr.ratio;
      break;
    case ppt_pip:
      p.kind = static_cast<uint8_t>(PacketKind::kPip);
      p.value = packet.payload.pip.cr3;
      p.aux = static_cast<uint8_t>(packet.payload.pip.nr);
      break;
    case ppt_vmcs:
      p.kind = static_cast<uint8_t>(PacketKind::kVmcs);
      p.value = packet.payload.vmcs.base;
      break;
    case ppt_stop: p.kind = static_cast<uint8_t>(PacketKind::kStop); break;
    case ppt_exstop:
      p.kind = static_cast<uint8_t>(PacketKind::kExstop);
      p.aux = packet.payload.exstop.ip;
      break;
    case ppt_mwait:
      p.kind = static_cast<uint8_t>(PacketKind::kMwait);
      p.value = packet.payload.mwait.hints | uint64_t{packet.payload.mwait.ext} << 32;
      break;
    case ppt_pwre:
      p.kind = static_cast<uint8_t>(PacketKind::kPwre);
      p.aux = packet.payload.pwre.state;
      p.bits = packet.payload.pwre.sub_state;
      p.value = packet.payload.pwre.hw;
      break;
    case ppt_pwrx:
      p.kind = static_cast<uint8_t>(PacketKind::kPwrx);
      p.aux = packet.payload.pwrx.last;
      p.bits = packet.payload.pwrx.deepest;
      p.value = packet.payload.pwrx.interrupt | packet.payload.pwrx.store << 1 | packet.payload.pwrx.autonomous << 2;
      break;
    case ppt_ptw:
      p.kind = static_cast<uint8_t>(PacketKind::kPtw);
      p.value = packet.payload.ptw.payload;
      p.aux = packet.payload.ptw.ip;
      p.bits = packet.payload.ptw.plc;
      break;
    case ppt_mnt:
      p.kind = static_cast<uint8_t>(PacketKind::kMnt);
      p.value = packet.payload.mnt.payload;
      break;
    case ppt_tma:
      p.kind = static_cast<uint8_t>(PacketKind::kTma);
      p.value = packet.payload.tma.ctc | uint64_t{packet.payload.tma.fc} << 16;
      break;
    case ppt_mtc:
      p.kind = static_cast<uint8_t>(PacketKind::kMtc);
      p.aux = packet.payload.mtc.ctc;
      break;
    case ppt_cyc:
      p.kind = static_cast<uint8_t>(PacketKind::kCyc);
      p.value = packet.payload.cyc.value;
      break;
    default: p.kind = static_cast<uint8_t>(PacketKind::kOther); break;
  }
  return p;
}

class PacketIndex {
 public:
  struct Record {
    uint32_t value;  // or, with kWide, the index of the chunk's wide value
    uint8_t kind;    // | kWide
    uint8_t size;
    uint8_t aux;
    uint8_t bits;
  };
  static_assert(sizeof(Record) == 8);
  static constexpr uint8_t kWide = 0x80;
  static constexpr uint8_t kKindMask = 0x1f;
  static constexpr uint8_t kPadKind = static_cast<uint8_t>(PacketKind::kPad);

  // Records that follow one another from `first`; the bytes between one chunk's end and
  // the next chunk's first are PADs.
  struct Chunk {
    struct Mark {
      uint32_t offset;
      uint32_t record;
    };
    static constexpr uint32_t kMarkEvery = 64;  // a search by offset walks at most this many
    uint64_t first = 0;
    uint64_t end = 0;     // past the last record
    uint32_t count = 0;   // records
    std::unique_ptr<Record[]> records;  // room for more than `count`: pages never written are never faulted in
    std::vector<uint64_t> wide;
    std::vector<Mark> marks;  // every kMarkEvery-th record
  };

  // Appends one stretch's packets, in order, in chunks of at most `chunk_records` records.
  class Writer {
   public:
    // `end`: the offset the packets to come stay below (sizes the chunks).
    Writer(uint64_t chunk_records, uint64_t end) : chunk_records_(chunk_records), end_offset_(end) {}
    // Packets come in order, none overlapping the one before (pt_pkt_next's), each of a
    // kind up to kKindMask.
    [[gnu::always_inline]] void Add(const IndexedPacket& p) {
      if (p.offset != end_ || count_ == limit_) [[unlikely]] Gap(p.offset);
      Record r{static_cast<uint32_t>(p.value), p.kind, p.size, p.aux, p.bits};
      if (p.value > UINT32_MAX) [[unlikely]] {
        r.value = static_cast<uint32_t>(chunk_.wide.size());
        r.kind |= kWide;
        chunk_.wide.push_back(p.value);
      }
      if (count_ % Chunk::kMarkEvery == 0) [[unlikely]] chunk_.marks.push_back({p.offset, count_});
      records_[count_++] = r;
      end_ = p.offset + p.size;
    }
    std::vector<Chunk> Finish();

   private:
    // Before a packet at `offset`: a new chunk when this one is full, and PAD records up
    // to `offset`.
    void Gap(uint64_t offset);
    void NextChunk(uint64_t offset);
    void CloseChunk();
    uint64_t chunk_records_;
    uint64_t end_offset_;
    uint64_t end_ = UINT64_MAX;  // the last record's end (none yet: no packet is there)
    Record* records_ = nullptr;  // chunk_'s
    uint32_t count_ = 0;         // chunk_'s records
    uint32_t limit_ = 0;         // and how many it takes
    Chunk chunk_;
    std::vector<Chunk> chunks_;
  };

  // Reads the packets by offset; fast when each asked for follows the one before.
  class Reader {
   public:
    explicit Reader(const PacketIndex* index) : index_(index) {}
    enum class At { kPacket, kPad, kNone };
    // The packet at `offset` (kPacket: *record, and *value, its value, set; a PAD record
    // is a packet of kPadKind), PADs from there up to *pad_end (kPad), or kNone: before
    // the first chunk, at the end or past it, or inside a packet. *record stays valid as
    // long as the index.
    [[gnu::always_inline]] At Find(uint64_t offset, const Record** record, uint64_t* value, uint64_t* pad_end) {
      if (offset == next_offset_ && next_ < count_) [[likely]] {
        const Record* r = &chunk_->records[next_++];
        next_offset_ += r->size;
        *record = r;
        *value = (r->kind & kWide) ? chunk_->wide[r->value] : r->value;
        return At::kPacket;
      }
      return FindOther(offset, record, value, pad_end);
    }

   private:
    At FindOther(uint64_t offset, const Record** record, uint64_t* value, uint64_t* pad_end);
    const PacketIndex* index_;
    const Chunk* chunk_ = nullptr;  // being read
    uint32_t next_ = 0;             // its next record
    uint32_t count_ = 0;            // its records
    uint64_t next_offset_ = UINT64_MAX;  // the next record's
    uint64_t chunk_stop_ = 0;       // the next chunk's first offset, or the buffer's end
  };

  // `size`: the buffer's (the last chunk's PADs run up to it).
  explicit PacketIndex(uint64_t size) : size_(size) {}
  void Append(std::vector<Chunk>&& chunks);
  bool empty() const { return chunks_.empty(); }
  size_t chunk_count() const { return chunks_.size(); }
  size_t bytes() const;  // records and wide values
  // Every packet (PAD records left out), in order.
  std::vector<IndexedPacket> Unpack() const;
  // Calls `visit(const IndexedPacket&)` for each of them, in order, without keeping them.
  template <class Visit>
  void ForEachPacket(Visit visit) const {
    for (const Chunk& chunk : chunks_) {
      uint64_t offset = chunk.first;
      for (uint32_t i = 0; i < chunk.count; ++i) {
        const Record& r = chunk.records[i];
        if ((r.kind & kKindMask) != kPadKind) {
          visit(IndexedPacket{(r.kind & kWide) ? chunk.wide[r.value] : r.value, static_cast<uint32_t>(offset),
                              static_cast<uint8_t>(r.kind & kKindMask), r.size, r.aux, r.bits});
        }
        offset += r.size;
      }
    }
  }

 private:
  std::vector<Chunk> chunks_;
  uint64_t size_;
};

}  // namespace ptd::decoder
