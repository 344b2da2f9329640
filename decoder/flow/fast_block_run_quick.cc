// FastBlockDecoder::RunQuick: many cached runs per call, without building pt_blocks
// (fast_block_decoder.h).
#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/fast_block_decoder_inline.h"

namespace ptd::decoder {

int FastBlockDecoder::RunQuick(uint64_t offset, QuickRun* run) {
  run->blocks = 0;
  run->tracelet_blocks = 0;
  run->instructions = 0;
  if (!CanRunQuick()) return 0;
  if (mode_ != cache_->mode() && mode_ != ptem_unknown) return 0;
  // The function the jumps stay in: a crossed branch moves it.
  uint64_t lo = run->lo, hi = run->hi, span = hi > lo ? hi - lo : 0;
  const uint32_t max_blocks = run->max_blocks;
  const bool crossing = run->ranges != nullptr;
  uint64_t run_tsc = run->tsc;
  run->crossed_count = 0;
  run->ends_crossed = false;
  // The decoder's state is kept in locals while blocks are taken (no member loads and
  // stores per block) and written back when the run stops: where the next block
  // starts, and the link the last block leaves (LookupLinked fills it).
  uint64_t ip = ip_;
  uint32_t link_from = 0;
  uint8_t link_slot = 0;
  auto write_back = [&] {
    ip_ = ip;
    link_from_ = link_from;
    link_slot_ = link_slot;
    link_ip_ = ip;
  };
  uint32_t blocks = 0;
  uint32_t tracelet_blocks = 0;
  uint64_t instructions = 0;
  uint32_t last_index = 0;  // the last block taken, by index: a lookup may move the entries
  uint64_t last_ip = 0;
  uint64_t offset_before_last = offset;
  int result = 0;
  bool failed = false;
  // The tracelet being made: from the block whose entry and bits make `making_key`, at
  // the counts `blocks` and `instructions` had there, until `making_bits` quiet TNT bits
  // are taken.
  const bool tracelets = query_.uses_packet_query() && max_blocks > 1 && !cache_->counts_runs();
  const bool counting = cache_->counts_runs();
  std::vector<FastBlockCache::Tracelet>& made = cache_->tracelets_;
  if (tracelets && made.empty()) made.resize(size_t{1} << cache_->tracelet_slot_bits_);
  bool making = false;
  uint64_t making_key = 0;
  int making_bits = 0;
  int taken_bits = 0;
  uint32_t making_blocks = 0;
  uint64_t making_instructions = 0;
  auto finish = [&](uint32_t next, bool stop) {
    making = false;
    if (++cache_->tracelets_made_ > made.size() &&
        cache_->tracelet_slot_bits_ < FastBlockCache::kMaxTraceletSlotBits) {
      ++cache_->tracelet_slot_bits_;
      cache_->tracelets_made_ = 0;
      made.assign(size_t{1} << cache_->tracelet_slot_bits_, FastBlockCache::Tracelet());
    }
    made[cache_->TraceletSlot(making_key)] = {making_key, lo, hi, ip, last_ip, instructions - making_instructions, blocks - making_blocks, last_index, next,
                                                      static_cast<uint8_t>(taken_bits), link_slot, stop};
  };
  FastBlockCache::Entry* blocks_data = cache_->blocks_.data();
  FastBlockCache::Entry* entry = &LookupLinked(ip);
  blocks_data = cache_->blocks_.data();
  // A first run takes Next's path (it may check a suppressed IP), and so do blocks that
  // end in an instruction ProceedNoEvent treats otherwise (far transfers, ptwrite, ...).
  while (entry->quick || (crossing && entry->crossing)) {
    const FastInsn& last = entry->last;
    if (!entry->quick) {
      // A call, a return or an indirect jump to cross: no tracelet holds one (where it
      // goes is not in its bits).
      if (making) finish(static_cast<uint32_t>(entry - blocks_data) + 1, false);
      if (run->crossed_count == QuickRun::kMaxCrossed) break;
    }
    if (tracelets && last.iclass == ptic_cond_jump) {
      const uint32_t index = static_cast<uint32_t>(entry - blocks_data);
      if (making && taken_bits == making_bits) finish(index + 1, false);
      uint32_t bits = 0;
      const int count = making ? 0 : query_.PeekQuietTntBits(&bits, FastBlockCache::kTraceletBits);
      if (count > 0) {
        const uint64_t key = uint64_t{index} << 32 | uint64_t(count) << 24 | bits;
        const FastBlockCache::Tracelet& t = made[cache_->TraceletSlot(key)];
        if (t.key != key || t.lo != lo || t.hi != hi) {
          making = true;
          making_key = key;
          making_bits = count;
          taken_bits = 0;
          making_blocks = blocks;
          making_instructions = instructions;
        } else if (max_blocks - blocks > t.blocks) {
          query_.SkipQuietTntBits(t.bits);
          status_ = 0;  // what CondBranch returns for such bits
          blocks += t.blocks;
          tracelet_blocks += t.blocks;
          instructions += t.instructions;
          last_index = t.last_index;
          last_ip = t.last_ip;
          offset_before_last = offset;
          ip = t.ip;
          link_from = t.last_index + 1;
          link_slot = t.last_slot;
          if (t.stop) break;
          entry = &blocks_data[t.next - 1];
          continue;
        }
      }
    }
    ++blocks;
    if (counting) ++entry->hits;
    instructions += entry->ninsn;
    last_index = static_cast<uint32_t>(entry - blocks_data);
    last_ip = ip;
    offset_before_last = offset;
    uint8_t slot = 0;
    bool read_packet = false;
    uint64_t new_tsc = 0;  // the time after this block, when its packets changed it
    if (last.iclass == ptic_cond_jump) {
      int taken = 0;
      if (making) ++taken_bits;  // a bit of the packet the tracelet reads (maybe its last)
      if (query_.TakeInnerTntBit(&taken)) {
        status_ = 0;  // what CondBranch returns for such a bit
      } else {
        // The packet's last bit, or a new packet: the query may read packets.
        int status = query_.CondBranch(&taken);
        if (status < 0) {
          // As ProceedNoEvent for a run decoded before: no IP is not an error there, and
          // the block ends where it is (ip and the link stay those before it).
          write_back();
          result = status == -pte_noip ? Status(0) : status;
          failed = true;
          break;
        }
        status_ = status;
        read_packet = true;
      }
      slot = taken ? 1 : 0;
      ip = taken ? last.target : last.ip + last.size;
    } else if (last.direct) {
      // A direct jump, or a direct call: as Next, it pushes its return address.
      if (last.iclass == ptic_call) retstack_.Push(last.ip + last.size);
      ip = last.target;
    } else if (uint32_t bit = 0; last.iclass == ptic_return && query_.PeekQuietTntBits(&bit, 1) == 1 && bit == 1 &&
                                 !retstack_.empty()) {
      // A compressed return whose bit the query gives without reading a packet (as Next's
      // CondBranch would): the address the stack holds.
      query_.SkipQuietTntBits(1);
      status_ = 0;  // what CondBranch returns for such a bit
      retstack_.Pop(&ip);
    } else {
      // Any other return, an indirect call or jump: as Next, with the query
      // (ProceedWithTrace sets ip_ and status_).
      if (last.iclass == ptic_call) retstack_.Push(last.ip + last.size);
      const int status = ProceedWithTrace(last);
      if (status < 0) {
        // As ProceedNoEvent: the block ends here, ip_ where ProceedWithTrace left it,
        // and no IP is no error for a run decoded before.
        link_from_ = 0;
        result = status == -pte_noip ? Status(0) : status;
        failed = true;
        break;
      }
      ip = ip_;
      read_packet = true;
    }
    link_from = last_index + 1;
    link_slot = slot;
    if (read_packet) {
      if (status_ & pts_event_pending) {
        write_back();
        result = ProceedTrailingEvent(nullptr);
        failed = true;
        break;
      }
      uint64_t now = 0;
      if (query_.GetOffset(&now) < 0) break;
      if (now != offset) {
        // A packet was read: on the time axis the time may have changed with it, and the
        // caller's clock must see that after this block. (The other axes need no look:
        // instructions are counted, and cycles are looked up at the crossed branches'
        // offsets and at the run's end.)
        uint64_t tsc = 0;
        const bool timed =
            run->watch_time && (run->times != nullptr ? (tsc = run->times->At(now), true)
                                                      : query_.Time(&tsc, nullptr, nullptr) >= 0);
        if (timed && tsc != 0 && (run->times != nullptr ? tsc > run_tsc : tsc != run_tsc)) {
          if (!crossing || run->crossed_count == QuickRun::kMaxCrossed) break;
          new_tsc = run_tsc = tsc;
        }
        offset = now;
      }
    }
    // Calls and returns make events; a jump does when it leaves the function: the run
    // ends with it, or crosses it too.
    bool crossed = last.iclass != ptic_cond_jump && last.iclass != ptic_jump;
    if (!crossed && (ip - lo >= span || last.ip - lo >= span)) {
      if (making) finish(0, true);
      if (!crossing || run->crossed_count == QuickRun::kMaxCrossed) break;
      crossed = true;
    }
    if (crossed || new_tsc != 0) {
      run->crossed[run->crossed_count++] = {last_ip, last.ip, ip, offset, instructions, new_tsc, last.iclass, last.size,
                                            crossed};
    }
    if (crossed) {
      // The jumps from here on stay in the function entered. In a PLT stub, code of no
      // known function or one with inlined calls (StaysInFunction) none is dropped: each
      // is crossed, and the replay's FlushPending makes its event as Next's would.
      const image::FunctionRange& range = run->ranges->At(*image_, ip);
      const bool drops = range.mapped && !range.plt && !range.inlines;
      lo = drops ? range.start : 0;
      hi = drops ? range.end : 0;
      span = hi > lo ? hi - lo : 0;
    }
    if (blocks == max_blocks) break;  // a tracelet being made is dropped: it depends on the caller
    // The next block through the link this one keeps (as LookupLinked, without its checks:
    // the links of live entries point at live entries).
    const uint32_t next = entry->next[slot];
    if (next != 0 && blocks_data[next - 1].ip == ip) [[likely]] {
      entry = &blocks_data[next - 1];
    } else {
      write_back();
      entry = &LookupLinked(ip);
      blocks_data = cache_->blocks_.data();
      link_from = 0;  // LookupLinked used it
    }
  }
  // Stopped before a block that is not quick: the tracelet ends there.
  if (making && !entry->quick) finish(static_cast<uint32_t>(entry - blocks_data) + 1, false);
  if (!failed) {
    write_back();
    if (blocks > 0) result = Status(0);
  }
  run->blocks = blocks;
  run->tracelet_blocks = tracelet_blocks;
  run->instructions = instructions;
  if (blocks > 0) {
    const FastInsn& last = blocks_data[last_index].last;
    run->last_ip = last_ip;
    run->last_end_ip = last.ip;
    run->last_ninsn = blocks_data[last_index].ninsn;
    run->last_class = last.iclass;
    run->last_size = last.size;
    run->offset_before_last = offset_before_last;
    run->ends_crossed = run->crossed_count > 0 && run->crossed[run->crossed_count - 1].instructions == instructions;
  }
  return result;
}

}  // namespace ptd::decoder
