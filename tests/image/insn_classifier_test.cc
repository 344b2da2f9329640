// The x86 decoder (Zydis) as Intel PT sees instructions: BranchKind for the emulators,
// libipt's classes for the fast decoder, and instructions capstone 4 could not decode.
#include "image/insn_classifier.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace ptd::image {
namespace {

struct ClassifierCase {
  std::vector<uint8_t> bytes;
  uint8_t size;
  BranchKind kind;
  FarKind far = FarKind::kNone;
};

TEST(InsnClassifierTest, KindsMatchWhatIntelPtTracesForEachInstruction) {
  // Encodings from the Intel SDM; the kinds are what decides the PT packet.
  const ClassifierCase cases[] = {
      {{0x74, 0x05}, 2, BranchKind::kCondJump},                       // je rel8
      {{0xe3, 0x05}, 2, BranchKind::kCondJump},                       // jrcxz
      {{0xe2, 0xfe}, 2, BranchKind::kCondJump},                       // loop
      {{0xeb, 0x05}, 2, BranchKind::kDirectJump},                     // jmp rel8
      {{0xff, 0xe0}, 2, BranchKind::kIndirectJump},                   // jmp rax
      {{0x3e, 0xff, 0xe0}, 3, BranchKind::kIndirectJump},             // notrack jmp rax
      {{0xe8, 0, 0, 0, 0}, 5, BranchKind::kDirectCall},               // call rel32
      {{0xff, 0xd0}, 2, BranchKind::kIndirectCall},                   // call rax
      {{0xc3}, 1, BranchKind::kReturn},                               // ret
      {{0xf3, 0xc3}, 2, BranchKind::kReturn},                         // repz ret
      {{0xc2, 0x08, 0x00}, 3, BranchKind::kReturn},                   // ret 8
      {{0x0f, 0x05}, 2, BranchKind::kFarTransfer, FarKind::kCall},    // syscall
      {{0xcd, 0x80}, 2, BranchKind::kFarTransfer, FarKind::kCall},    // int 0x80
      {{0xcc}, 1, BranchKind::kFarTransfer, FarKind::kCall},          // int3
      {{0x48, 0xcf}, 2, BranchKind::kFarTransfer, FarKind::kReturn},  // iretq
      {{0x48, 0x0f, 0x07}, 3, BranchKind::kFarTransfer, FarKind::kReturn},  // sysretq
      {{0xcb}, 1, BranchKind::kFarTransfer, FarKind::kReturn},        // retf
      {{0xff, 0x28}, 2, BranchKind::kFarTransfer, FarKind::kJump},    // jmp far [rax]
      {{0xff, 0x18}, 2, BranchKind::kFarTransfer, FarKind::kCall},    // call far [rax]
      {{0xc7, 0xf8, 0, 0, 0, 0}, 6, BranchKind::kNone},               // xbegin: not a branch for PT
      {{0x0f, 0x01, 0xd5}, 3, BranchKind::kNone},                     // xend
      {{0xf3, 0x0f, 0x1e, 0xfa}, 4, BranchKind::kNone},               // endbr64
      {{0x48, 0x89, 0xe5}, 3, BranchKind::kNone},                     // mov rbp, rsp
      // Capstone 4 decoded none of these (glibc's AVX-512 string functions and pkey
      // code, libgcc's CET unwinder): they were traced as undecodable.
      {{0xf3, 0x48, 0x0f, 0x1e, 0xc8}, 5, BranchKind::kNone},          // rdsspq rax
      {{0xf3, 0x48, 0x0f, 0xae, 0xe8}, 5, BranchKind::kNone},          // incsspq rax
      {{0x0f, 0x01, 0xef}, 3, BranchKind::kNone},                      // wrpkru
      {{0xc4, 0xe1, 0xfb, 0x92, 0xcb}, 5, BranchKind::kNone},          // kmovq k1, rbx
      {{0x62, 0xf2, 0x7d, 0x48, 0x78, 0x18}, 6, BranchKind::kNone},    // vpbroadcastb zmm3, [rax]
      {{0xf3, 0x0f, 0xae, 0xe0}, 4, BranchKind::kNone},                // ptwrite eax
  };
  for (const ClassifierCase& c : cases) {
    const InsnInfo info = InsnClassifier::Decode(0x1000, c.bytes);
    SCOPED_TRACE(::testing::Message() << "bytes starting " << std::hex << int(c.bytes[0]) << " "
                                      << int(c.bytes[1 % c.bytes.size()]));
    EXPECT_EQ(info.size, c.size);
    EXPECT_EQ(info.kind, c.kind);
    EXPECT_EQ(info.far, c.far);
    const bool syscall = c.bytes == std::vector<uint8_t>{0x0f, 0x05};
    EXPECT_EQ(info.is_syscall, syscall);
  }
  // Direct targets are absolute; a conditional jump's too.
  EXPECT_EQ(InsnClassifier::Decode(0x1000, std::vector<uint8_t>{0xeb, 0x05}).direct_target, 0x1007u);
  EXPECT_EQ(InsnClassifier::Decode(0x1000, std::vector<uint8_t>{0x74, 0xfe}).direct_target, 0x1000u);
  EXPECT_EQ(InsnClassifier::Decode(0x1000, std::vector<uint8_t>{0xe8, 0x10, 0, 0, 0}).direct_target, 0x1015u);
  // Garbage is unknown with size 0 and counted once per address.
  InsnClassifier classifier;
  EXPECT_EQ(classifier.Classify(0x2000, std::vector<uint8_t>{0x06, 0x06}).kind, BranchKind::kUnknown);
  EXPECT_EQ(classifier.Classify(0x2000, std::vector<uint8_t>{0x06, 0x06}).size, 0u);
  EXPECT_EQ(classifier.undecodable(), 1u);
}

TEST(InsnClassifierTest, DecodeX86GivesLibiptClassesInEachMode) {
  const uint8_t ptwrite[] = {0xf3, 0x0f, 0xae, 0xe0};
  EXPECT_EQ(DecodeX86(ptem_64bit, 0x1000, ptwrite, sizeof ptwrite).iclass, ptic_ptwrite);
  const uint8_t sysenter[] = {0x0f, 0x34};
  const X86Insn s = DecodeX86(ptem_64bit, 0x1000, sysenter, sizeof sysenter);
  EXPECT_EQ(s.iclass, ptic_far_call);
  EXPECT_TRUE(s.is_syscall);
  const uint8_t call[] = {0xe8, 0x10, 0, 0, 0};
  const X86Insn c = DecodeX86(ptem_64bit, 0x1000, call, sizeof call);
  EXPECT_EQ(c.iclass, ptic_call);
  EXPECT_TRUE(c.direct);
  EXPECT_EQ(c.target, 0x1015u);
  const uint8_t call_rax[] = {0xff, 0xd0};
  const X86Insn ci = DecodeX86(ptem_64bit, 0x1000, call_rax, sizeof call_rax);
  EXPECT_EQ(ci.iclass, ptic_call);
  EXPECT_FALSE(ci.direct);
  EXPECT_EQ(ci.target, 0u);
  // 0x40 is a REX prefix in 64-bit code and `inc eax` in 32-bit code; a 16-bit call
  // takes a 16-bit displacement.
  const uint8_t inc_then_ret[] = {0x40, 0xc3};
  EXPECT_EQ(DecodeX86(ptem_64bit, 0x1000, inc_then_ret, sizeof inc_then_ret).iclass, ptic_return);
  EXPECT_EQ(DecodeX86(ptem_64bit, 0x1000, inc_then_ret, sizeof inc_then_ret).size, 2u);
  EXPECT_EQ(DecodeX86(ptem_32bit, 0x1000, inc_then_ret, sizeof inc_then_ret).iclass, ptic_other);
  EXPECT_EQ(DecodeX86(ptem_32bit, 0x1000, inc_then_ret, sizeof inc_then_ret).size, 1u);
  const uint8_t call16[] = {0xe8, 0x10, 0x00};
  const X86Insn c16 = DecodeX86(ptem_16bit, 0x1000, call16, sizeof call16);
  EXPECT_EQ(c16.size, 3u);
  EXPECT_EQ(c16.target, 0x1013u);
  // Bytes that do not decode.
  const uint8_t garbage[] = {0x06};
  EXPECT_EQ(DecodeX86(ptem_64bit, 0x1000, garbage, sizeof garbage).iclass, ptic_error);
  EXPECT_EQ(DecodeX86(ptem_64bit, 0x1000, garbage, 0).size, 0u);
}

}  // namespace
}  // namespace ptd::image
