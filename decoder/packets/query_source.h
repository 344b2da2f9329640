#pragma once
// Where the fast flow decoder gets its packets from: our PacketQuery when the buffer
// allows it (PacketQuery::Accepts), else libipt's query decoder. One predictable branch
// per call, no virtual call.

#include <intel-pt.h>

#include <cstdint>
#include <memory>

#include "decoder/packets/packet_query.h"

namespace ptd::decoder {

class QuerySource {
 public:
  // `packet_scan`: the buffer's scan if it passed PacketQuery::Accepts for `config`, else
  // null (libipt's query decoder).
  QuerySource(const pt_config& config, const PacketQuery::Scan* packet_scan) {
    if (packet_scan != nullptr) {
      packet_ = std::make_unique<PacketQuery>(config, packet_scan);
      if (!packet_->ok()) packet_.reset();
    } else {
      libipt_ = pt_qry_alloc_decoder(&config);
    }
  }
  ~QuerySource() {
    if (libipt_ != nullptr) pt_qry_free_decoder(libipt_);
  }
  QuerySource(const QuerySource&) = delete;
  QuerySource& operator=(const QuerySource&) = delete;

  bool ok() const { return packet_ != nullptr || libipt_ != nullptr; }
  bool uses_packet_query() const { return packet_ != nullptr; }

  int SyncForward(uint64_t* ip) { return packet_ ? packet_->SyncForward(ip) : pt_qry_sync_forward(libipt_, ip); }
  int SyncSet(uint64_t* ip, uint64_t offset) {
    return packet_ ? packet_->SyncSet(ip, offset) : pt_qry_sync_set(libipt_, ip, offset);
  }
  // PacketQuery::SyncContinue (libipt's query decoder starts its calibration afresh).
  int SyncContinue(uint64_t* ip, uint64_t offset) {
    return packet_ ? packet_->SyncContinue(ip, offset) : pt_qry_sync_set(libipt_, ip, offset);
  }
  int GetOffset(uint64_t* offset) const {
    return packet_ ? packet_->GetOffset(offset) : pt_qry_get_offset(libipt_, offset);
  }
  int GetSyncOffset(uint64_t* offset) const {
    return packet_ ? packet_->GetSyncOffset(offset) : pt_qry_get_sync_offset(libipt_, offset);
  }
  int CondBranch(int* taken) { return packet_ ? packet_->CondBranch(taken) : pt_qry_cond_branch(libipt_, taken); }
  // PacketQuery::TakeInnerTntBit (libipt's query decoder has no such call: false).
  bool TakeInnerTntBit(int* taken) { return packet_ && packet_->TakeInnerTntBit(taken); }
  int PeekQuietTntBits(uint32_t* bits, int max) const { return packet_ ? packet_->PeekQuietTntBits(bits, max) : 0; }
  void SkipQuietTntBits(int count) { packet_->SkipQuietTntBits(count); }
  int IndirectBranch(uint64_t* ip) {
    return packet_ ? packet_->IndirectBranch(ip) : pt_qry_indirect_branch(libipt_, ip);
  }
  int Event(pt_event* event, size_t size) {
    return packet_ ? packet_->Event(event, size) : pt_qry_event(libipt_, event, size);
  }
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) {
    return packet_ ? packet_->Time(tsc, lost_mtc, lost_cyc) : pt_qry_time(libipt_, tsc, lost_mtc, lost_cyc);
  }

 private:
  std::unique_ptr<PacketQuery> packet_;
  pt_query_decoder* libipt_ = nullptr;
};

}  // namespace ptd::decoder
