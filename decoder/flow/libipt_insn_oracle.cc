#include "decoder/flow/libipt_insn_oracle.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "decoder/flow/fast_block_decoder.h"

namespace ptd::decoder {
namespace {

// The instruction's bytes, served to libipt's image through its read callback; every
// other address is unmapped.
struct Code {
  uint64_t ip = 0;
  uint8_t bytes[pt_max_insn_size] = {};
  size_t size = 0;
};

int ReadCode(uint8_t* buffer, size_t size, const pt_asid*, uint64_t ip, void* context) {
  const Code& code = *static_cast<const Code*>(context);
  if (ip < code.ip || ip - code.ip >= code.size) return -pte_nomap;
  size_t n = std::min<size_t>(size, code.size - (ip - code.ip));
  std::memcpy(buffer, code.bytes + (ip - code.ip), n);
  return static_cast<int>(n);
}

// A PT stream that has libipt decode one instruction at `ip` in `mode`: PSB+ with the
// mode, tracing enabled at `ip`, then one taken TNT bit (where a conditional branch
// goes). Written by libipt's encoder. Returns its size, or a negative pt_error_code.
int EncodeStream(pt_exec_mode mode, uint64_t ip, uint8_t* buffer, size_t size) {
  pt_config config;
  pt_config_init(&config);
  config.begin = buffer;
  config.end = buffer + size;
  std::unique_ptr<pt_encoder, void (*)(pt_encoder*)> encoder(pt_alloc_encoder(&config), pt_free_encoder);
  if (!encoder) return -pte_nomem;
  pt_packet packets[5];
  std::memset(packets, 0, sizeof packets);
  packets[0].type = ppt_psb;
  packets[1].type = ppt_mode;
  packets[1].payload.mode.leaf = pt_mol_exec;
  packets[1].payload.mode.bits.exec = pt_set_exec_mode(mode);
  packets[2].type = ppt_psbend;
  packets[3].type = ppt_tip_pge;
  packets[3].payload.ip.ipc = pt_ipc_full;
  packets[3].payload.ip.ip = ip;
  packets[4].type = ppt_tnt_8;
  packets[4].payload.tnt.bit_size = 1;
  packets[4].payload.tnt.payload = 1;
  for (pt_packet& packet : packets) {
    int status = pt_enc_next(encoder.get(), &packet);
    if (status < 0) return status;
  }
  uint64_t offset = 0;
  int status = pt_enc_get_offset(encoder.get(), &offset);
  return status < 0 ? status : static_cast<int>(offset);
}

// The next instruction's IP after `decoder` took a direct branch: pt_insn_next reports it
// whatever becomes of the instruction there (tracing stays enabled, so it is filled in).
bool NextIp(pt_insn_decoder* decoder, uint64_t* ip) {
  pt_insn next{};
  int status = pt_insn_next(decoder, &next, sizeof next);
  if (status == -pte_no_enable || status == -pte_invalid) return false;
  *ip = next.ip;
  return true;
}

}  // namespace

bool DecodeInsnWithLibipt(pt_exec_mode mode, uint64_t ip, const uint8_t* bytes, size_t size, FastInsn* insn) {
  if (mode == ptem_unknown) mode = ptem_64bit;  // as the fast decoder's Zydis
  Code code;
  code.ip = ip;
  code.size = std::min<size_t>(size, sizeof code.bytes);
  std::memcpy(code.bytes, bytes, code.size);

  uint8_t stream[64];
  int stream_size = EncodeStream(mode, ip, stream, sizeof stream);
  if (stream_size < 0) return false;
  pt_config config;
  pt_config_init(&config);
  config.begin = stream;
  config.end = stream + stream_size;
  std::unique_ptr<pt_image, void (*)(pt_image*)> image(pt_image_alloc(nullptr), pt_image_free);
  std::unique_ptr<pt_insn_decoder, void (*)(pt_insn_decoder*)> decoder(pt_insn_alloc_decoder(&config),
                                                                        pt_insn_free_decoder);
  if (!image || !decoder || pt_image_set_callback(image.get(), ReadCode, &code) < 0 ||
      pt_insn_set_image(decoder.get(), image.get()) < 0) {
    return false;
  }
  int status = pt_insn_sync_forward(decoder.get());
  while (status >= 0 && (status & pts_event_pending)) {
    pt_event event;
    status = pt_insn_event(decoder.get(), &event, sizeof event);
  }
  if (status < 0) return false;
  // The instruction comes back even when what follows it fails (an indirect branch finds
  // a TNT where it wants a TIP); its class stays ptic_error when libipt cannot decode it.
  pt_insn decoded{};
  status = pt_insn_next(decoder.get(), &decoded, sizeof decoded);
  if (decoded.iclass == ptic_error || decoded.size == 0 || decoded.ip != ip) return false;
  FastInsn result;
  result.ip = ip;
  result.size = decoded.size;
  result.iclass = decoded.iclass;
  // libipt tells no branch's target; it follows a direct one without trace (the TNT bit
  // takes a conditional one), and the next instruction starts there. An indirect one
  // needs a TIP, which the stream does not hold. Conditional branches count as direct,
  // as in the Zydis path.
  const bool near_branch =
      decoded.iclass == ptic_call || decoded.iclass == ptic_jump || decoded.iclass == ptic_cond_jump;
  if (near_branch && status >= 0) {
    code.size = decoded.size;  // the bytes after the instruction are not its concern
    result.direct = true;
    if (!NextIp(decoder.get(), &result.target)) return false;
  } else if (decoded.iclass == ptic_cond_jump) {
    return false;  // the TNT bit should have taken it: no target to give
  }
  *insn = result;
  return true;
}

}  // namespace ptd::decoder
