// The fast decoder's runs of code shared by section (decoder/flow/section_block_cache.h): two
// processes that map the same file's bytes, at different addresses, decode them once;
// different bytes under the same name and address (memory dumps, JIT code) share nothing.
// Each stream's flow events must be what libipt's block decoder gives for it.
#include "decoder/flow/section_block_cache.h"

#include <intel-pt.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "decoder/flow/flow_decoder.h"
#include "decoder/stats.h"
#include "gtest/gtest.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/section_cache.h"
#include "tests/decoder/decoder_diff.h"
#include "tests/decoder/packet_writer.h"
#include "tests/testing/test_util.h"

namespace ptd::decoder {
namespace {

// The program (offsets in the file, which is padded with int3 so that no run ends within
// an instruction's length of the section's end, where runs are not shared):
//   00 nop; nop; call 40       07 jz 10 (taken)     09 nop (skipped)
//   10 nop; syscall (TIP.PGD)  40 nop; nop; ret (compressed: back to 07)
// Five runs are looked up: 00..02, 40..42, 07, 10..11 and 11 (the disable's walk to the
// syscall that took the TIP.PGD starts there).
constexpr int kRuns = 5;
constexpr uint64_t kInstructions = 3 + 3 + 1 + 2;

std::vector<uint8_t> Program() {
  std::vector<uint8_t> code(0x100, 0xcc);
  auto put = [&](size_t at, std::vector<uint8_t> bytes) { std::memcpy(&code[at], bytes.data(), bytes.size()); };
  put(0x00, {0x90, 0x90, 0xe8, 0x39, 0x00, 0x00, 0x00});  // 0x07 + 0x39 = 0x40
  put(0x07, {0x74, 0x07, 0x90});                          // 0x09 + 7 = 0x10
  put(0x10, {0x90, 0x0f, 0x05});
  put(0x40, {0x90, 0x90, 0xc3});
  return code;
}

// The same, but with one two-byte nop (66 90) where Program has two nops: the run at 00
// has one instruction less.
std::vector<uint8_t> ProgramWithOtherBytesAtTheStart() {
  std::vector<uint8_t> code = Program();
  code[0] = 0x66;
  return code;
}

// Tracing enabled at `base`, the return and jz taken, disabled at the syscall.
void WriteStream(uint64_t base, testing::PacketWriter* w) {
  w->Psb();
  w->Mode(ptem_64bit);
  w->PsbEnd();
  w->Ip(ppt_tip_pge, base);
  w->Tnt(2, 0b11);  // the return (compressed), then jz taken
  w->Ip(ppt_tip_pgd, 0, pt_ipc_suppressed);
}

using Decoded = testing::DecodedStream;

// One process: `code_path` mapped at `base` (as a memory dump: bytes captured from the
// process, `memory_dump`), its stream decoded by `kind` with the decode's `shared` runs.
struct Process {
  std::string code_path;
  uint64_t base = 0;
  bool memory_dump = false;
};

Decoded Decode(DecoderKind kind, const Process& process, image::ModuleCache* modules, SectionBlockCache* shared) {
  image::Mapping mapping;
  mapping.path = process.code_path;
  mapping.name = process.memory_dump ? "[jit]" : process.code_path;
  mapping.vaddr = process.base;
  mapping.memory_dump = process.memory_dump;
  testing::PacketWriter w(1024);
  WriteStream(process.base, &w);
  return testing::DecodeOverMapping(kind, mapping, w.data(), w.size(), modules, shared);
}

// The fast decoder's events for `process` with the `shared` runs equal libipt's block
// decoder's.
Decoded DecodeFastAsLibiptBlock(const Process& process, image::ModuleCache* modules, SectionBlockCache* shared) {
  Decoded fast = Decode(DecoderKind::kFast, process, modules, shared);
  Decoded block = Decode(DecoderKind::kBlock, process, modules, nullptr);
  EXPECT_EQ(testing::FirstFlowDifference(block.events, fast.events), "") << "at 0x" << std::hex << process.base;
  EXPECT_EQ(fast.instructions, block.instructions);
  return fast;
}

std::string WriteCode(const ptd::testing::TempDir& tmp, const std::string& name, const std::vector<uint8_t>& code) {
  const std::string path = tmp.Sub(name);
  EXPECT_TRUE(WriteFileAtomic(path, std::string(code.begin(), code.end())).ok());
  return path;
}

TEST(SectionBlockCacheTest, SecondProcessTakesTheLibrarysRunsAtAnotherAddress) {
  ptd::testing::TempDir tmp;
  const std::string library = WriteCode(tmp, "libshared.so", Program());
  image::ModuleCache modules;
  SectionBlockCache shared;

  Decoded first = DecodeFastAsLibiptBlock({library, 0x400000}, &modules, &shared);
  EXPECT_EQ(first.instructions, kInstructions);
  EXPECT_EQ(first.stats[Stat::kFastRunsDecoded], static_cast<uint64_t>(kRuns));
  EXPECT_EQ(first.stats[Stat::kFastRunsShared], 0u);

  // Another address (ASLR): every run comes from the first process's decode, moved.
  Decoded second = DecodeFastAsLibiptBlock({library, 0x7f1234560000}, &modules, &shared);
  EXPECT_EQ(second.instructions, kInstructions);
  EXPECT_EQ(second.stats[Stat::kFastRunsShared], static_cast<uint64_t>(kRuns));
  EXPECT_EQ(second.stats[Stat::kFastRunsDecoded], 0u);
}

TEST(SectionBlockCacheTest, MemoryDumpsWithOtherBytesAtTheSameAddressShareNothing) {
  ptd::testing::TempDir tmp;
  const std::string dump1 = WriteCode(tmp, "jit-1.bin", Program());
  const std::string dump2 = WriteCode(tmp, "jit-2.bin", ProgramWithOtherBytesAtTheStart());
  image::ModuleCache modules;
  SectionBlockCache shared;

  Decoded first = DecodeFastAsLibiptBlock({dump1, 0x400000, true}, &modules, &shared);
  EXPECT_EQ(first.instructions, kInstructions);
  // Same name, address and size, other bytes: decoded again, and one nop less.
  Decoded second = DecodeFastAsLibiptBlock({dump2, 0x400000, true}, &modules, &shared);
  EXPECT_EQ(second.instructions, kInstructions - 1);
  EXPECT_EQ(second.stats[Stat::kFastRunsShared], 0u);
  EXPECT_EQ(second.stats[Stat::kFastRunsDecoded], static_cast<uint64_t>(kRuns));
}

// A run read within an instruction's length of its section's end may have read on into
// the next mapping, which another process may not have: it is decoded by each.
TEST(SectionBlockCacheTest, RunsNearTheSectionEndAreNotShared) {
  ptd::testing::TempDir tmp;
  std::vector<uint8_t> code = Program();
  code.resize(0x50);  // the run at 40 lies within 15 bytes of the end
  const std::string library = WriteCode(tmp, "libshort.so", code);
  image::ModuleCache modules;
  SectionBlockCache shared;

  DecodeFastAsLibiptBlock({library, 0x400000}, &modules, &shared);
  Decoded second = DecodeFastAsLibiptBlock({library, 0x500000}, &modules, &shared);
  EXPECT_EQ(second.instructions, kInstructions);
  EXPECT_EQ(second.stats[Stat::kFastRunsShared], static_cast<uint64_t>(kRuns - 1));
  EXPECT_EQ(second.stats[Stat::kFastRunsDecoded], 1u);
}

}  // namespace
}  // namespace ptd::decoder
