#pragma once
// Hand-made PT streams for decoder tests, written by libipt's encoder (pt_enc_next).

#include <intel-pt.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "decoder/flow/flow_decoder.h"
#include "gtest/gtest.h"

namespace ptd::decoder::testing {

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
  // TIP, TIP.PGE, TIP.PGD or FUP.
  uint64_t Ip(enum pt_packet_type type, uint64_t ip, pt_ip_compression ipc = pt_ipc_sext_48) {
    pt_packet p = Packet(type);
    p.payload.ip.ipc = ipc;
    p.payload.ip.ip = ip;
    return Put(p);
  }
  uint64_t Tip(uint64_t ip) { return Ip(ppt_tip, ip); }
  // PTW with a 4- or 8-byte payload (plc 0 or 1); with `ip`, a FUP with the PTWRITE's IP follows.
  uint64_t Ptw(uint64_t payload, uint8_t plc, bool ip) {
    pt_packet p = Packet(ppt_ptw);
    p.payload.ptw.payload = payload;
    p.payload.ptw.plc = plc;
    p.payload.ptw.ip = ip ? 1 : 0;
    return Put(p);
  }
  uint64_t Mode(pt_exec_mode mode) {
    pt_packet p = Packet(ppt_mode);
    p.payload.mode.leaf = pt_mol_exec;
    p.payload.mode.bits.exec = pt_set_exec_mode(mode);
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
  // The bytes written, with the decoders' zero padding after them.
  const uint8_t* data() const { return bytes_.data(); }

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

}  // namespace ptd::decoder::testing
