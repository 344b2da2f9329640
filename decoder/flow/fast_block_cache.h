#pragma once
// The fast flow decoder's block cache (fast_block_decoder.h): the runs of code it has
// decoded, by start IP, with the links and tracelets that take a hot loop's blocks
// without a hash, and the run counts coverage reads (CountRuns).

#include <intel-pt.h>

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/mapped_array.h"
#include "common/recent_by_address.h"
#include "decoder/flow/fast_insn.h"

namespace ptd::decoder {

class BlockObserver;

// Straight-line runs of code by start IP: `ninsn` instructions, the last (`last`) a
// branch, the last one of its section, or followed by an instruction that cannot be
// read or decoded (`error`). Owned by the stream decoder, cleared whenever its image
// changes (a new image, mappings replaced, JIT code): entries are keyed by address only.
// What an entry holds of the code comes from the decode's SectionBlockCache when another
// stream (or this one, before a change) decoded the same bytes; the rest is this stream's.
class FastBlockCache {
 public:
  struct Entry {
    uint64_t ip = 0;  // the start IP (a successor link is checked against it)
    uint32_t ninsn = 0;
    int error = 0;  // -pte_nomap / -pte_bad_insn after `ninsn` good instructions
    // The no-event path ran it before (libipt's block cache is filled there only, and
    // its first run checks a TIP's suppressed IP where a cached run does not).
    bool ran = false;
    // It ran, and RunQuick may take it: no error, ends in a conditional or direct jump.
    bool quick = false;
    // It ran, no error, and ends in a call (not a direct one to the next instruction), a
    // return or an indirect jump: RunQuick may cross it (QuickRun::ranges).
    bool crossing = false;
    FastInsn last;  // valid when ninsn > 0
    // The entries that came next, as index + 1 (0: none yet): [0] after the fall-through,
    // a direct branch or the last indirect transfer, [1] after a taken conditional branch.
    // A hot loop's next block is then one load and one compare away, without a hash.
    uint32_t next[2] = {0, 0};
    uint64_t hits = 0;  // times RunQuick took it, since the last FlushRuns (CountRuns)
  };
  // Straight-line runs longer than this are cached in parts that continue one another
  // (libipt's trampolines), so an entry's count always fits a block's 16 bits.
  static constexpr uint32_t kMaxRunInstructions = 0x400;
  // What RunQuick did with the quiet bits of one TNT packet (PacketQuery::PeekQuietTntBits:
  // taking them reads no packet and sets no status bit), from one block on: a hot loop
  // costs one lookup per TNT packet instead of a step per block. Keyed by the block's
  // entry and the bits.
  struct Tracelet {
    uint64_t key = 0;  // entry index << 32 | bit count << 24 | bits (count ≥ 1: 0 is an empty slot)
    uint64_t lo = 0;   // RunQuick's bounds it was made under
    uint64_t hi = 0;
    uint64_t ip = 0;       // where the next block starts
    uint64_t last_ip = 0;  // where the last block taken starts
    uint64_t instructions = 0;
    uint32_t blocks = 0;
    uint32_t last_index = 0;  // the last block's entry
    uint32_t next = 0;        // the next block's entry, index + 1 (0 when `stop`)
    uint8_t bits = 0;         // how many TNT bits it took
    uint8_t last_slot = 0;    // the link the last block leaves
    bool stop = false;        // the last jump left [lo, hi): the run ends after it
  };
  static constexpr int kTraceletBits = 24;  // at most this many bits per tracelet
  // A direct-mapped table (64 bytes a slot): a new tracelet replaces the one in its slot.
  // A lookup is a multiply, a shift and a compare; the 60 M walker makes ~8,000.
  // It starts at 2^kMinTraceletSlotBits slots and doubles (dropping what it held) when
  // as many tracelets were made as it has slots, up to 2^kMaxTraceletSlotBits: a decode
  // keeps a block cache per stream, and most streams need few.
  static constexpr int kMinTraceletSlotBits = 8;
  static constexpr int kMaxTraceletSlotBits = 13;
  size_t TraceletSlot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> (64 - tracelet_slot_bits_); }

  void Clear() {
    FlushRuns();
    blocks_.clear();
    index_.clear();
    for (Tracelet& t : tracelets_) t.key = 0;
    recent_.Clear();
  }
  // The execution mode the entries were decoded in; another one clears them.
  pt_exec_mode mode() const { return mode_; }
  void SetMode(pt_exec_mode mode) {
    Clear();
    mode_ = mode;
  }
  size_t size() const { return blocks_.size(); }
  // Entries made so far (never reset): from the shared SectionBlockCache, and decoded here.
  uint64_t runs_shared() const { return runs_shared_; }
  uint64_t runs_decoded() const { return runs_decoded_; }
  // Coverage at RunQuick's speed: each entry counts the times RunQuick takes it (without
  // tracelets, which skip the blocks they hold), and FlushRuns hands the counts to
  // `sink` (OnBlocks) and zeroes them. The owner flushes before its image changes and
  // at the end; Clear flushes too. Null: nothing counted.
  void CountRuns(BlockObserver* sink) { run_sink_ = sink; }
  bool counts_runs() const { return run_sink_ != nullptr; }
  void FlushRuns();

 private:
  friend class FastBlockDecoder;
  // Entries never move once made (by index). Growing moves its pages, copies nothing: a
  // vector's doublings faulted in twice the pages (~18 k entries on the walker).
  MappedArray<Entry> blocks_;
  absl::flat_hash_map<uint64_t, uint32_t> index_;  // start IP → blocks_ index
  RecentByAddress<uint32_t, 4096> recent_;  // the last blocks looked up: start IP → blocks_ index
  std::vector<Tracelet> tracelets_;  // 2^tracelet_slot_bits_ slots once RunQuick uses them
  int tracelet_slot_bits_ = kMinTraceletSlotBits;
  size_t tracelets_made_ = 0;  // since the table was last sized
  pt_exec_mode mode_ = ptem_64bit;
  uint64_t runs_shared_ = 0;
  uint64_t runs_decoded_ = 0;
  BlockObserver* run_sink_ = nullptr;
};

}  // namespace ptd::decoder
