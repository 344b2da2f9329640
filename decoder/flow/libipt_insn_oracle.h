#pragma once
// What libipt 2.0.5's own instruction decoder makes of the bytes at one IP, asked through
// its public API only. The fast decoder decodes with Zydis 4, which refuses some byte
// sequences libipt's instruction-length decoder accepts (a LOCK prefix where none is
// allowed, VEX/EVEX fields no instruction has, ...): libipt's block decoder walks on over
// them as ptic_other, so the fast decoder must too. Slow (a decoder per call): for the
// instructions Zydis refuses only, which the caller caches by IP.

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>

namespace ptd::decoder {

struct FastInsn;

// Decodes the instruction at `ip` from `bytes` (`size` of them, at most pt_max_insn_size
// are looked at) in `mode` (ptem_unknown: 64-bit) as libipt does: true with `*insn` set
// (size, class, and for near branches whether they are direct and their target) when
// libipt decodes it; false when libipt refuses it as well (pte_bad_insn).
bool DecodeInsnWithLibipt(pt_exec_mode mode, uint64_t ip, const uint8_t* bytes, size_t size, FastInsn* insn);

}  // namespace ptd::decoder
