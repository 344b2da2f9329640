// The fast decoder's runs of code shared by section (decoder/section_block_cache.h): two
// processes that map the same file's bytes, at different addresses, decode them once;
// different bytes under the same name and address (memory dumps, JIT code) share nothing.
// Each stream's flow events must be what libipt's block decoder gives for it.
#include "decoder/section_block_cache.h"

#include <intel-pt.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "decoder/flow_decoder.h"
#include "decoder/stats.h"
#include "gtest/gtest.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/section_cache.h"
#include "tests/decoder/decoder_diff.h"
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
std::vector<uint8_t> Stream(uint64_t base, size_t* size) {
  std::vector<uint8_t> buffer(1024 + kPtPadding, 0);
  pt_config config;
  pt_config_init(&config);
  config.begin = buffer.data();
  config.end = buffer.data() + 1024;
  std::unique_ptr<pt_encoder, void (*)(pt_encoder*)> encoder(pt_alloc_encoder(&config), pt_free_encoder);
  auto emit = [&](pt_packet packet) { EXPECT_GE(pt_enc_next(encoder.get(), &packet), 0); };
  auto ip_packet = [](pt_packet_type type, uint64_t ip, pt_ip_compression ipc) {
    pt_packet p{};
    p.type = type;
    p.payload.ip.ipc = ipc;
    p.payload.ip.ip = ip;
    return p;
  };
  pt_packet p{};
  p.type = ppt_psb;
  emit(p);
  pt_packet mode{};
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
  emit(mode);
  p.type = ppt_psbend;
  emit(p);
  emit(ip_packet(ppt_tip_pge, base, pt_ipc_sext_48));
  pt_packet tnt{};
  tnt.type = ppt_tnt_8;
  tnt.payload.tnt.bit_size = 2;
  tnt.payload.tnt.payload = 0b11;  // the return (compressed), then jz taken
  emit(tnt);
  emit(ip_packet(ppt_tip_pgd, 0, pt_ipc_suppressed));
  uint64_t offset = 0;
  EXPECT_GE(pt_enc_get_offset(encoder.get(), &offset), 0);
  *size = static_cast<size_t>(offset);
  return buffer;
}

class FlowLog : public FlowConsumer {
 public:
  void OnFlow(const FlowEvent& event) override { events.push_back(event); }
  std::vector<FlowEvent> events;
};

struct Decoded {
  std::vector<FlowEvent> events;
  uint64_t instructions = 0;
  Stats stats;
};

// One process: `code_path` mapped at `base` (as a memory dump: bytes captured from the
// process, `memory_dump`), its stream decoded by `kind` with the decode's `shared` runs.
struct Process {
  std::string code_path;
  uint64_t base = 0;
  bool memory_dump = false;
};

Decoded Decode(DecoderKind kind, const Process& process, image::ModuleCache* modules, SectionBlockCache* shared) {
  image::SectionCache sections;
  image::ProcessImage image(&sections, modules, "test");
  image::Mapping mapping;
  mapping.path = process.code_path;
  mapping.name = process.memory_dump ? "[jit]" : process.code_path;
  mapping.vaddr = process.base;
  mapping.memory_dump = process.memory_dump;
  EXPECT_TRUE(image.AddMapping(mapping).ok());
  size_t size = 0;
  const std::vector<uint8_t> stream = Stream(process.base, &size);
  FlowLog log;
  PtDecodeConfig config;
  config.kind = kind;
  config.section_blocks = shared;
  std::unique_ptr<FlowDecoder> decoder = MakeFlowDecoder(config, &image, &log);
  absl::Status status = decoder->DecodeChunk(stream.data(), size, 0);
  EXPECT_TRUE(status.ok()) << status;
  return {std::move(log.events), decoder->instructions(), decoder->stats()};
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
