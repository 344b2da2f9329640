// Instructions Zydis 4 refuses but libipt 2.0.5's length decoder accepts (the fast
// decoder then asks libipt: decoder/flow/libipt_insn_oracle.h). First what libipt makes of each
// (size, class, direct branch targets), then the fast decoder against libipt's block
// decoder on a generated PT stream over code made of them, ending in bytes both refuse:
// the same instructions, calls, returns and errors at the same offsets.
// The byte sequences are those of an emulated `python3 -c pass` recording where a
// decode that had lost its way walked into the middle of instructions (docs/decoder.md),
// plus LOCK-prefixed branches for the branch classes.
#include "decoder/flow/libipt_insn_oracle.h"

#include <Zydis/Decoder.h>
#include <intel-pt.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "decoder/flow/fast_block_decoder.h"
#include "decoder/flow/flow_decoder.h"
#include "gtest/gtest.h"
#include "image/process_image.h"
#include "image/section_cache.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/packet_writer.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

bool ZydisDecodes(const std::vector<uint8_t>& bytes) {
  ZydisDecoder zydis;
  ZydisDecoderInit(&zydis, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecodedInstruction insn;
  return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zydis, nullptr, bytes.data(), bytes.size(), &insn));
}

struct Expected {
  const char* what;
  std::vector<uint8_t> bytes;
  uint8_t size;
  pt_insn_class iclass;
  bool direct = false;
  uint64_t target = 0;  // relative to the instruction
};

constexpr uint64_t kIp = 0x7f0000001000;

const std::vector<Expected>& ZydisRefused() {
  static const std::vector<Expected> cases = {
      {"pop ds (no such instruction in 64-bit mode)", {0x1f, 0x89, 0x54, 0x24, 0x30}, 1, ptic_other},
      {"push es (no such instruction in 64-bit mode)", {0x06, 0x00, 0xba, 0x05}, 1, ptic_other},
      {"c6 /1 (only c6 /0 is mov)", {0xc6, 0x0f, 0x83, 0x2b, 0x01}, 3, ptic_other},
      {"ff /7 (undefined)", {0xff, 0xff, 0x83, 0xfa, 0x2f}, 2, ptic_other},
      {"lock nop", {0xf0, 0x90}, 2, ptic_other},
      {"VEX with opcode map 0", {0xc4, 0xe0, 0x78, 0x90, 0x90}, 4, ptic_other},
      {"lock call rel32", {0xf0, 0xe8, 0x10, 0x00, 0x00, 0x00}, 6, ptic_call, true, 6 + 0x10},
      {"lock jz rel8", {0xf0, 0x74, 0x02}, 3, ptic_cond_jump, true, 3 + 2},
      {"lock jmp rel8", {0xf0, 0xeb, 0xfe}, 3, ptic_jump, true, 3 - 2},
      {"lock jmp rax", {0xf0, 0xff, 0xe0}, 3, ptic_jump},
      {"lock ret", {0xf0, 0xc3}, 2, ptic_return},
      {"lock syscall", {0xf0, 0x0f, 0x05}, 3, ptic_far_call},
  };
  return cases;
}

TEST(LibiptInsnOracleTest, DecodesWhatZydisRefusesAsLibiptDoes) {
  for (const Expected& c : ZydisRefused()) {
    SCOPED_TRACE(c.what);
    // Otherwise the case tests nothing: the fast decoder would not ask libipt.
    EXPECT_FALSE(ZydisDecodes(c.bytes));
    FastInsn insn;
    ASSERT_TRUE(DecodeInsnWithLibipt(ptem_64bit, kIp, c.bytes.data(), c.bytes.size(), &insn));
    EXPECT_EQ(insn.ip, kIp);
    EXPECT_EQ(insn.size, c.size);
    EXPECT_EQ(insn.iclass, c.iclass);
    EXPECT_EQ(insn.direct, c.direct);
    EXPECT_EQ(insn.target, c.direct ? kIp + c.target : 0);
  }
}

// Bytes libipt's length decoder refuses too: the fast decoder reports the error libipt does.
TEST(LibiptInsnOracleTest, RefusesWhatLibiptRefuses) {
  const std::vector<std::vector<uint8_t>> refused = {
      {0xc4, 0xff, 0xff, 0xff, 0xff, 0xff},  // VEX with opcode map 31
      std::vector<uint8_t>(15, 0x66),        // prefixes only, no opcode within 15 bytes
      {0x0f},                                // the code ends inside the opcode
  };
  for (const std::vector<uint8_t>& bytes : refused) {
    EXPECT_FALSE(ZydisDecodes(bytes));
    FastInsn insn;
    EXPECT_FALSE(DecodeInsnWithLibipt(ptem_64bit, kIp, bytes.data(), bytes.size(), &insn));
  }
}

// The mode reaches libipt: a near call's displacement is 2 bytes in 16-bit code, 4 in 32-bit.
TEST(LibiptInsnOracleTest, FollowsTheExecutionMode) {
  const uint8_t lock_call[] = {0xf0, 0xe8, 0x10, 0x00, 0x00, 0x00};
  FastInsn insn;
  ASSERT_TRUE(DecodeInsnWithLibipt(ptem_32bit, 0x1000, lock_call, sizeof lock_call, &insn));
  EXPECT_EQ(insn.iclass, ptic_call);
  EXPECT_EQ(insn.size, 6);
  EXPECT_EQ(insn.target, 0x1000u + 6 + 0x10);
  ASSERT_TRUE(DecodeInsnWithLibipt(ptem_16bit, 0x1000, lock_call, sizeof lock_call, &insn));
  EXPECT_EQ(insn.iclass, ptic_call);
  EXPECT_EQ(insn.size, 4);
  EXPECT_EQ(insn.target, 0x1000u + 4 + 0x10);
}

// ---------------------------------------------------------------------------------
// The fast decoder and libipt's block decoder over code made of such bytes.

constexpr uint64_t kBase = 0x400000;

// The program (addresses from kBase):
//   00 lock nop; pop ds; push es; c6 /1; ff /7
//   09 lock call 40          0f lock jz 14 (taken)     12 pop ds; push es (skipped)
//   14 lock jmp rax (TIP 20) 17 int3 padding
//   20 nop                   21 VEX with map 31: both refuse (decode error)
//   40 pop ds; lock ret (compressed: back to 0f)
//   50 push es; c6 /1; lock syscall (TIP.PGD)
std::vector<uint8_t> Program() {
  std::vector<uint8_t> code(0x60, 0xcc);
  auto put = [&](size_t at, std::vector<uint8_t> bytes) { std::memcpy(&code[at], bytes.data(), bytes.size()); };
  put(0x00, {0xf0, 0x90, 0x1f, 0x06, 0xc6, 0x0f, 0x83, 0xff, 0xff});
  put(0x09, {0xf0, 0xe8, 0x31, 0x00, 0x00, 0x00});  // 0x0f + 0x31 = 0x40
  put(0x0f, {0xf0, 0x74, 0x02});                    // 0x12 + 2 = 0x14
  put(0x12, {0x1f, 0x06});
  put(0x14, {0xf0, 0xff, 0xe0});
  put(0x20, {0x90, 0xc4, 0xff, 0xff, 0xff, 0xff, 0xff});
  put(0x40, {0x1f, 0xf0, 0xc3});
  put(0x50, {0x06, 0xc6, 0x0f, 0x83, 0xf0, 0x0f, 0x05});
  return code;
}

// Two PSB segments: the first runs from 00 to the error at 21; the second (where the
// decoders resync) from 50 to the syscall, where tracing stops, and twice more from 50
// (libipt's block decoder may take those from its block cache).
void WriteStream(testing::PacketWriter* w) {
  // PSB+ while tracing is enabled holds a FUP with the IP (0: tracing is disabled).
  auto psb_plus = [&](uint64_t fup_ip) {
    w->Psb();
    w->Mode(ptem_64bit);
    if (fup_ip != 0) w->Ip(ppt_fup, fup_ip);
    w->PsbEnd();
  };
  psb_plus(0);
  w->Ip(ppt_tip_pge, kBase);
  w->Tnt(2, 0b11);  // the return (compressed), then jz taken
  w->Ip(ppt_tip, kBase + 0x20);
  w->Tnt(1, 0b11);  // never asked for: the decode fails at 21 before
  psb_plus(kBase + 0x50);
  w->Ip(ppt_tip_pgd, 0, pt_ipc_suppressed);
  // Again, from libipt's block cache now.
  w->Ip(ppt_tip_pge, kBase + 0x50);
  w->Ip(ppt_tip_pgd, 0, pt_ipc_suppressed);
  w->Ip(ppt_tip_pge, kBase + 0x50);
  w->Ip(ppt_tip_pgd, 0, pt_ipc_suppressed);
}

TEST(FastDecoderOnInsnsZydisRefusesTest, DecodesThemAsLibiptBlockDoes) {
  ptd::testing::TempDir tmp;
  const testing::BothDecoders both = testing::DecodeProgramBothWays(tmp.path(), Program(), kBase, WriteStream);
  // What libipt's block decoder does here, so the comparison covers every case: 00..07
  // (5), the call, 40 and the return, jz (taken), jmp rax (to 20), the nop at 20: 11 and
  // the error at 21; then 50..54 (3) to the syscall, three times. (The jumps make no
  // flow event: they stay inside the code's one function.)
  testing::ExpectBothGave(both, {.instructions = 20, .calls = 1, .returns = 1, .syscalls = 3, .errors = 1});
  for (const FlowEvent& e : both.block.events) {
    if (e.kind == FlowKind::kError) {
      EXPECT_STREQ(e.message, pt_errstr(pt_errcode(-pte_bad_insn)));
    }
  }
}

}  // namespace
}  // namespace ptd::decoder
