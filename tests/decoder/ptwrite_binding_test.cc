// PTW packets bind to PTWRITE instructions (libipt's pt_blk_proceed_to_ptwrite): the
// fast decoder against libipt's block decoder on a generated stream over code with
// PTWRITEs, PTWs with and without the instruction's IP: the same instructions and flow
// events, and no error (the fast decoder refused PTW events before).
#include <intel-pt.h>

#include <cstring>
#include <string>
#include <vector>

#include "decoder/flow/flow_decoder.h"
#include "gtest/gtest.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/packet_writer.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

constexpr uint64_t kBase = 0x400000;

// The program (addresses from kBase):
//   00 nop                   01 ptwrite eax          05 mov eax, ebx
//   07 ptwrite eax           0b call 20              10 ptwrite rbx (8-byte payload)
//   15 nop                   16 syscall (TIP.PGD)
//   20 mov eax, ebx          22 ptwrite eax          26 ret (compressed)
std::vector<uint8_t> Program() {
  std::vector<uint8_t> code(0x30, 0xcc);
  auto put = [&](size_t at, std::vector<uint8_t> bytes) { std::memcpy(&code[at], bytes.data(), bytes.size()); };
  put(0x00, {0x90, 0xf3, 0x0f, 0xae, 0xe0, 0x89, 0xd8});
  put(0x07, {0xf3, 0x0f, 0xae, 0xe0});
  put(0x0b, {0xe8, 0x10, 0x00, 0x00, 0x00});  // 0x10 + 0x10 = 0x20
  put(0x10, {0xf3, 0x48, 0x0f, 0xae, 0xe3, 0x90, 0x0f, 0x05});
  put(0x20, {0x89, 0xd8, 0xf3, 0x0f, 0xae, 0xe0, 0xc3});
  return code;
}

// Each PTWRITE's PTW right after it, as the hardware writes them; the one at 07 with its
// IP (a FUP), the others without (they bind to the next PTWRITE). Run twice, the second
// time from libipt's block cache.
void WriteStream(testing::PacketWriter* w) {
  w->Psb();
  w->Mode(ptem_64bit);
  w->PsbEnd();
  for (int round = 0; round < 2; ++round) {
    w->Ip(ppt_tip_pge, kBase);
    w->Ptw(0x11, 0, false);  // 01
    w->Ptw(0x22, 0, true);   // 07
    w->Ip(ppt_fup, kBase + 0x07);
    w->Ptw(0x33, 0, false);  // 22
    w->Tnt(1, 0b1);          // the return
    w->Ptw(0x44, 1, false);  // 10
    w->Ip(ppt_tip_pgd, 0, pt_ipc_suppressed);
  }
}

TEST(PtwriteBindingTest, FastDecoderBindsPtwAsLibiptBlockDoes) {
  ptd::testing::TempDir tmp;
  const testing::BothDecoders both = testing::DecodeProgramBothWays(tmp.path(), Program(), kBase, WriteStream);
  // What libipt's block decoder makes of it, so the comparison covers every PTW: 00..0b
  // (5), 20..26 (3), 10..16 (3), twice; one call, one return and one syscall each time;
  // no error (the fast decoder failed at the first PTW before).
  testing::ExpectBothGave(both, {.instructions = 22, .calls = 2, .returns = 2, .syscalls = 2, .errors = 0});
}

}  // namespace
}  // namespace ptd::decoder
