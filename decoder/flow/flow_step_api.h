#pragma once
// Private to pt_stream_decoder.cc: the step functions of the three flow decoders
// (libipt's block and instruction decoders, the fast one) under one interface, which the
// loop (PtStreamDecoder::RunWith) is written against. Bound at compile time.

#include <intel-pt.h>

#include <concepts>
#include <cstdint>

#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/pt_stream_decoder.h"

namespace ptd::decoder {

// The flow decoders (libipt's block and instruction decoders, the fast one) differ only
// in their function names and in what one step yields (a block or an instruction); the
// loop around them is written once, in RunWith, against this interface.
template <class Api>
concept FlowDecoderApi = requires(typename Api::Decoder* d, const typename Api::Decoder* cd, PtStreamDecoder* self,
                                  const pt_config* c, pt_image* image, uint64_t* u64, uint32_t* u32, pt_event* ev) {
  { Api::Alloc(self, c) } -> std::same_as<typename Api::Decoder*>;
  Api::Free(d);
  { Api::SetImage(d, image) } -> std::same_as<int>;
  { Api::SyncForward(d) } -> std::same_as<int>;
  { Api::SyncSet(d, uint64_t{0}) } -> std::same_as<int>;
  { Api::SyncContinue(d, uint64_t{0}) } -> std::same_as<int>;
  { Api::GetOffset(cd, u64) } -> std::same_as<int>;
  { Api::GetSyncOffset(cd, u64) } -> std::same_as<int>;
  { Api::Time(d, u64, u32, u32) } -> std::same_as<int>;
  { Api::Event(d, ev) } -> std::same_as<int>;
  { Api::Next(self, d) } -> std::same_as<int>;
};

// libipt's block and instruction decoders: the same calls under other names.
template <class D, D* (*kAlloc)(const pt_config*), void (*kFree)(D*), int (*kSetImage)(D*, pt_image*),
          int (*kSyncForward)(D*), int (*kSyncSet)(D*, uint64_t), int (*kGetOffset)(const D*, uint64_t*),
          int (*kGetSyncOffset)(const D*, uint64_t*), int (*kTime)(D*, uint64_t*, uint32_t*, uint32_t*),
          int (*kEvent)(D*, pt_event*, size_t)>
struct LibiptApi {
  using Decoder = D;
  static Decoder* Alloc(PtStreamDecoder*, const pt_config* c) { return kAlloc(c); }
  static void Free(Decoder* d) { kFree(d); }
  static int SetImage(Decoder* d, pt_image* image) { return kSetImage(d, image); }
  static int SyncForward(Decoder* d) { return kSyncForward(d); }
  static int SyncSet(Decoder* d, uint64_t offset) { return kSyncSet(d, offset); }
  // libipt's decoders cannot take a calibration: they start it afresh.
  static int SyncContinue(Decoder* d, uint64_t offset) { return kSyncSet(d, offset); }
  static int GetOffset(const Decoder* d, uint64_t* offset) { return kGetOffset(d, offset); }
  static int GetSyncOffset(const Decoder* d, uint64_t* offset) { return kGetSyncOffset(d, offset); }
  static int Time(Decoder* d, uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) {
    return kTime(d, tsc, lost_mtc, lost_cyc);
  }
  static int Event(Decoder* d, pt_event* event) { return kEvent(d, event, sizeof *event); }
};

struct BlockApi : LibiptApi<pt_block_decoder, pt_blk_alloc_decoder, pt_blk_free_decoder, pt_blk_set_image,
                            pt_blk_sync_forward, pt_blk_sync_set, pt_blk_get_offset, pt_blk_get_sync_offset,
                            pt_blk_time, pt_blk_event> {
  static int Next(PtStreamDecoder* self, Decoder* d) { return self->NextBlock(d); }
  static constexpr const char* kAllocName = "pt_blk_alloc_decoder";
};

struct InsnApi : LibiptApi<pt_insn_decoder, pt_insn_alloc_decoder, pt_insn_free_decoder, pt_insn_set_image,
                           pt_insn_sync_forward, pt_insn_sync_set, pt_insn_get_offset, pt_insn_get_sync_offset,
                           pt_insn_time, pt_insn_event> {
  static int Next(PtStreamDecoder* self, Decoder* d) { return self->NextInsn(d); }
  static constexpr const char* kAllocName = "pt_insn_alloc_decoder";
};

struct FastApi {
  using Decoder = FastBlockDecoder;
  static Decoder* Alloc(PtStreamDecoder* self, const pt_config* c) {
    auto* d = new FastBlockDecoder(*c, &self->fast_cache_, self->image_,
                                   PacketQuery::Accepts(*c, self->packet_scan_) ? &self->packet_scan_ : nullptr,
                                   self->config_.section_blocks);
    if (!d->ok()) {
      delete d;
      return nullptr;
    }
    self->fast_ = d;
    return d;
  }
  // The decoder reads code through the ProcessImage (UseImage hands it the new one).
  static int SetImage(Decoder*, pt_image*) { return 0; }
  static int SyncForward(Decoder* d) { return d->SyncForward(); }
  static int SyncSet(Decoder* d, uint64_t offset) { return d->SyncSet(offset); }
  static int SyncContinue(Decoder* d, uint64_t offset) { return d->SyncContinue(offset); }
  static int GetOffset(const Decoder* d, uint64_t* offset) { return d->GetOffset(offset); }
  static int GetSyncOffset(const Decoder* d, uint64_t* offset) { return d->GetSyncOffset(offset); }
  static int Time(Decoder* d, uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) {
    return d->Time(tsc, lost_mtc, lost_cyc);
  }
  static int Event(Decoder* d, pt_event* event) { return d->Event(event); }
  static int Next(PtStreamDecoder* self, Decoder* d) { return self->NextFastBlock(d); }
  static void Free(Decoder* d) { delete d; }
  static constexpr const char* kAllocName = "pt_qry_alloc_decoder";
};

static_assert(FlowDecoderApi<BlockApi> && FlowDecoderApi<InsnApi> && FlowDecoderApi<FastApi>);

}  // namespace ptd::decoder
