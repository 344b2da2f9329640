#pragma once
// The fast flow decoder's block source: libipt 2.0.5's query layer for the packets
// (PacketQuery where the buffer allows it, else libipt's query decoder: query_source.h), Zydis 4
// for the instructions, and a block cache keyed by start IP (fast_block_cache.h).
// It reports what libipt 2.0.5's block decoder (end_on_call, end_on_jump, code from the
// section cache) reports for the same trace and image: the same blocks where a packet
// is read, the same events at the same IPs, the same status bits, the same errors at
// the same query offsets. So the driver (PtStreamDecoder::RunWith) is shared and the flow
// events are identical; only the work per block differs (a hash lookup instead of
// libipt's section lookup, block-cache lookup and decoder bookkeeping).
//
// Code in 16/32-bit mode is decoded as such (the caches are cleared when the mode changes).
// Not modelled (libipt's block decoder does more): the tick events,
// ptwrite binding, the BDM64/SKL014 errata and mov-to-CR3/VMX instructions (none occur in
// user-space traces); such traces decode, but may differ (the differential test says).
// Bytes Zydis refuses are decoded by libipt itself (libipt_insn_oracle.h); instructions
// both decode, but outside the ISA both know, may still be classed differently.

#include <intel-pt.h>

#include <cstdint>
#include <vector>

#include "decoder/flow/fast_block_cache.h"
#include "decoder/flow/fast_insn.h"
#include "decoder/flow/function_range_cache.h"
#include "decoder/packets/query_source.h"
#include "decoder/flow/section_block_cache.h"
#include "decoder/packets/time_index.h"
#include "image/process_image.h"

namespace ptd::decoder {

// Blocks RunQuick took: `blocks` blocks, `instructions` instructions in all, each
// ending in a conditional or direct jump that stayed in its function (no flow event:
// [lo, hi) at first), but the last one's; and, given `ranges`, the calls, returns,
// indirect jumps and jumps out of the function crossed on the way (`crossed`: each
// may make a flow event), after which the jumps stay in the function entered.
struct QuickRun {
  // In: the function, and at most how many blocks to take.
  uint64_t lo = 0;
  uint64_t hi = 0;
  uint32_t max_blocks = 0;
  // Function ranges for the code a crossed branch enters; null: none is crossed.
  FunctionRangeCache* ranges = nullptr;
  // On the time axis the caller's clock is told the time after each block that read a
  // packet: a run goes past a packet that changed the time from `tsc` only with
  // `ranges` (it notes the new time in `crossed`).
  bool watch_time = false;
  uint64_t tsc = 0;
  TimeCursor* times = nullptr;  // the time at a query offset (null: the query's time)
  // Out.
  uint32_t blocks = 0;  // 0: none (nothing was consumed)
  uint32_t tracelet_blocks = 0;  // of these, taken through tracelets
  uint64_t instructions = 0;
  uint64_t last_ip = 0;      // where the last block starts
  uint64_t last_end_ip = 0;  // its jump
  uint32_t last_ninsn = 0;
  pt_insn_class last_class = ptic_error;
  uint8_t last_size = 0;     // its last instruction's
  uint64_t offset_before_last = 0;  // the query offset before the last block (the resync remedy)
  // The blocks after which something happens, in order (left uninitialised: only the
  // first `crossed_count` are set): a branch crossed (it may make a flow event), or on
  // the time axis a packet that changed the time (`tsc`: the caller's clock is updated
  // after the block, as after a step). The last block taken is the last of them when
  // `ends_crossed` (its target starts the next step).
  struct Crossed {
    uint64_t block_ip;      // where its block starts
    uint64_t end_ip;        // its branch
    uint64_t target;        // where it went
    uint64_t offset;        // the query offset after its block
    uint64_t instructions;  // of the run, up to its block's end
    uint64_t tsc;           // the time after it when it changed, else 0
    pt_insn_class iclass;
    uint8_t size;           // the branch's (a call's return address follows it)
    bool crossed;           // a call, a return, an indirect jump or a jump out of the function
  };
  static constexpr uint32_t kMaxCrossed = 32;
  uint32_t crossed_count = 0;
  bool ends_crossed = false;
  Crossed crossed[kMaxCrossed];
};

class FastBlockDecoder {
 public:
  // `config` as for pt_blk_alloc_decoder (its block flags are ignored: blocks end on
  // calls and jumps). Check ok() after construction. `packet_scan`: the buffer's scan if
  // it passed PacketQuery::Accepts (else libipt's query decoder reads it). `section_blocks`:
  // the decode's runs shared by section (null: every run is decoded here).
  FastBlockDecoder(const pt_config& config, FastBlockCache* cache, image::ProcessImage* image,
                   const PacketQuery::Scan* packet_scan = nullptr, SectionBlockCache* section_blocks = nullptr);
  ~FastBlockDecoder();
  FastBlockDecoder(const FastBlockDecoder&) = delete;
  FastBlockDecoder& operator=(const FastBlockDecoder&) = delete;

  bool ok() const { return query_.ok(); }
  bool uses_packet_query() const { return query_.uses_packet_query(); }
  void SetImage(image::ProcessImage* image) { image_ = image; }

  // As pt_blk_sync_forward, pt_blk_sync_set, pt_blk_get_offset, pt_blk_get_sync_offset,
  // pt_blk_time, pt_blk_event and pt_blk_next.
  int SyncForward();
  int SyncSet(uint64_t offset);
  // SyncSet at a PSB the decoder from the buffer's first PSB passes in flight: its time
  // calibration carried in (PacketQuery::SyncContinue).
  int SyncContinue(uint64_t offset);
  int GetOffset(uint64_t* offset) const { return query_.GetOffset(offset); }
  int GetSyncOffset(uint64_t* offset) const { return query_.GetSyncOffset(offset); }
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) {
    return query_.Time(tsc, lost_mtc, lost_cyc);
  }
  int Event(pt_event* event);
  // As pt_blk_next, but `size` always holds the last instruction's size (libipt: only when
  // the block is truncated).
  int Next(pt_block* block);
  // Next for the blocks most of a trace is made of, many per call and without building
  // pt_blocks: runs decoded before on the no-event path, ending in a conditional or a
  // direct jump, with no event waiting, while the jumps stay in [run->lo, run->hi); with
  // run->ranges also through calls, returns, indirect jumps and jumps out of the
  // function (run->crossed). Stops before a block that is not such (nothing consumed:
  // call Next), and after a block whose jump leaves the function (without ranges), that
  // read a packet that changed the time (run->watch_time), that has an event after it,
  // or that failed; returns Next's status for the last block taken. `offset` is the
  // query offset now.
  int RunQuick(uint64_t offset, QuickRun* run);
  // False when RunQuick would take nothing for the decoder's state (an event to bind or
  // pending, tracing off, a postponed instruction): the caller need not build a run.
  bool CanRunQuick() const { return !process_event_ && !(status_ & pts_event_pending) && enabled_ && !process_insn_; }
  // Where the next block starts.
  uint64_t ip() const { return ip_; }

 private:
  // libipt's return-address stack for compressed returns (64 entries, the oldest
  // overwritten).
  struct ReturnStack {
    static constexpr int kSize = 64;
    uint64_t stack[kSize + 1] = {};
    uint8_t top = 0;
    uint8_t bottom = 0;
    void Push(uint64_t ip);
    int Pop(uint64_t* ip);
    bool empty() const { return top == bottom; }
  };

  void Reset();
  int Start(int status);
  int Status(int flags) const;
  int FetchEvent();
  int Decode(uint64_t ip, FastInsn* insn);
  FastBlockCache::Entry& Lookup(uint64_t ip);
  FastBlockCache::Entry& LookupLinked(uint64_t ip);
  void Fill(uint64_t ip, FastBlockCache::Entry* entry);
  SectionBlocks* SharedRuns(const image::ProcessImage::SectionBytes& section);
  int ProceedOneInsn(pt_block* block, FastInsn* insn, const FastInsn* known);
  const FastInsn* SkipStraight(pt_block* block, uint64_t stop_ip);
  int ProceedToIp(pt_block* block, FastInsn* insn, uint64_t ip);
  int ProceedToIpWithTrace(pt_block* block, uint64_t ip);
  template <bool (*Stop)(const FastInsn&)>
  int ProceedToInsn(pt_block* block, FastInsn* insn);
  int ProceedWithTrace(const FastInsn& insn);
  int NextIp(const FastInsn& insn, uint64_t* ip);
  int ProceedEvent(pt_block* block);
  int ProceedNoEvent(pt_block* block);
  int ProceedTrailingEvent(pt_block* block);
  int ProceedPostponed();
  int Postpone(const FastInsn& insn);
  int Proceed(pt_block* block);

  QuerySource query_;
  FastBlockCache* cache_;
  image::ProcessImage* image_;
  SectionBlockCache* section_blocks_;
  // The shared runs of the section Fill looked at last, and what they are of: most runs
  // start in the section the last one did.
  struct SharedSection {
    SectionBlocks* runs = nullptr;
    const image::Module* module = nullptr;
    uint64_t file_offset = 0;
    uint64_t size = 0;
    pt_exec_mode mode = ptem_unknown;
  } shared_section_;
  // The state of libipt's block decoder (same names without the prefix).
  pt_exec_mode mode_ = ptem_unknown;
  uint64_t ip_ = 0;
  int status_ = 0;
  bool enabled_ = false;
  bool process_event_ = false;
  bool speculative_ = false;
  bool process_insn_ = false;
  bool bound_paging_ = false;
  bool bound_vmcs_ = false;
  bool bound_ptwrite_ = false;
  FastInsn insn_;  // the postponed instruction
  pt_event event_{};
  ReturnStack retstack_;
  // The section the block being built lies in (libipt does not switch sections inside a
  // block).
  uint64_t block_section_ = 0;
  // The section of the last lookup: most blocks start in the section the last one did.
  uint64_t section_start_ = 1;
  uint64_t section_end_ = 0;
  // The no-event path's last block (index + 1, 0: none) and which of its `next` links
  // the block at `link_ip_` fills: set when it leaves, used by the next lookup if ip_ is
  // still link_ip_ (an event may have moved it).
  uint32_t link_from_ = 0;
  uint8_t link_slot_ = 0;
  uint64_t link_ip_ = 0;
};

}  // namespace ptd::decoder
