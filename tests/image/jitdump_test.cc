// The jitdump reader (every record type, damaged files) and the placement of its code in
// time (image::PlaceJitCode): reuse of an address at the load's own time, first use as
// early as is safe, stamps on another clock.
#include "image/jitdump.h"

#include <elf.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "image/timed_image.h"

namespace ptd::image {
namespace {

template <typename T>
void Put(T value, std::vector<uint8_t>* out) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}

void Load(uint64_t time, uint64_t addr, uint64_t index, const std::string& name, std::vector<uint8_t> code,
          std::vector<uint8_t>* out) {
  JitCodeEvent load;
  load.timestamp = time;
  load.pid = load.tid = 7;
  load.code_addr = addr;
  load.code_index = index;
  load.name = name;
  AppendJitCodeLoad(load, code, out);
}

void Move(uint64_t time, uint64_t from, uint64_t to, uint64_t size, uint64_t index, std::vector<uint8_t>* out) {
  Put<uint32_t>(1, out);
  Put<uint32_t>(16 + 48, out);
  Put<uint64_t>(time, out);
  Put<uint32_t>(7, out);
  Put<uint32_t>(7, out);
  Put<uint64_t>(to, out);
  Put<uint64_t>(from, out);
  Put<uint64_t>(to, out);
  Put<uint64_t>(size, out);
  Put<uint64_t>(index, out);
}

void DebugInfo(uint64_t addr, uint32_t line, const std::string& file, std::vector<uint8_t>* out) {
  Put<uint32_t>(2, out);
  Put<uint32_t>(static_cast<uint32_t>(16 + 16 + 16 + file.size() + 1), out);
  Put<uint64_t>(5, out);
  Put<uint64_t>(addr, out);
  Put<uint64_t>(1, out);
  Put<uint64_t>(addr, out);
  Put<uint32_t>(line, out);
  Put<uint32_t>(0, out);
  out->insert(out->end(), file.begin(), file.end());
  out->push_back(0);
}

void Record(uint32_t type, std::vector<uint8_t>* out) {
  Put<uint32_t>(type, out);
  Put<uint32_t>(16, out);
  Put<uint64_t>(9, out);
}

std::vector<uint8_t> SampleDump() {
  std::vector<uint8_t> out;
  AppendJitDumpHeader(7, 1, &out);
  DebugInfo(0x1000, 12, "app.js", &out);
  Load(10, 0x1000, 1, "f", {0x90, 0xc3}, &out);
  Record(4, &out);   // unwinding info: read past
  Record(99, &out);  // unknown: skipped with a warning
  Move(20, 0x1000, 0x2000, 2, 1, &out);
  Record(3, &out);  // close
  return out;
}

TEST(JitDumpTest, ReadsLoadsMovesDebugInfoAndClose) {
  std::vector<uint8_t> bytes = SampleDump();
  absl::StatusOr<JitDump> dump = ParseJitDump(bytes, "jit-7.dump");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->pid, 7u);
  EXPECT_EQ(dump->elf_mach, static_cast<uint32_t>(EM_X86_64));
  ASSERT_EQ(dump->code.size(), 2u);
  EXPECT_EQ(dump->code[0].name, "f");
  EXPECT_EQ(dump->code[0].code_addr, 0x1000u);
  EXPECT_EQ(bytes[dump->code[0].code_offset], 0x90);
  EXPECT_EQ(dump->code[1].kind, JitCodeEvent::Kind::kMove);
  EXPECT_EQ(dump->code[1].code_addr, 0x2000u);
  EXPECT_EQ(dump->code[1].old_code_addr, 0x1000u);
  EXPECT_EQ(dump->code[1].name, "f");  // from the load of the same code index
  EXPECT_EQ(dump->code[1].code_offset, dump->code[0].code_offset);
  ASSERT_EQ(dump->debug_info.size(), 1u);
  ASSERT_EQ(dump->debug_info[0].entries.size(), 1u);
  EXPECT_EQ(dump->debug_info[0].entries[0].file, "app.js");
  EXPECT_EQ(dump->debug_info[0].entries[0].line, 12u);
  EXPECT_EQ(dump->unwinding_records, 1u);
  EXPECT_TRUE(dump->closed);
  ASSERT_EQ(dump->warnings.size(), 1u);
  EXPECT_NE(dump->warnings[0].find("unknown type 99"), std::string::npos);
}

TEST(JitDumpTest, EveryCutKeepsTheRecordsBeforeItAndWarns) {
  const std::vector<uint8_t> whole = SampleDump();
  for (size_t size = 40; size < whole.size(); ++size) {
    std::vector<uint8_t> cut(whole.begin(), whole.begin() + size);
    absl::StatusOr<JitDump> dump = ParseJitDump(cut, "jit-7.dump");
    ASSERT_TRUE(dump.ok()) << size << ": " << dump.status();
    EXPECT_LE(dump->code.size(), 2u);
    EXPECT_FALSE(dump->closed);
  }
}

TEST(JitDumpTest, WhatIsNotAJitdumpOfThisArchitectureIsAnError) {
  std::vector<uint8_t> bytes = SampleDump();
  std::vector<uint8_t> arm = bytes;
  arm[12] = 183;  // EM_AARCH64
  absl::StatusOr<JitDump> dump = ParseJitDump(arm, "jit-7.dump");
  ASSERT_FALSE(dump.ok());
  EXPECT_NE(dump.status().message().find("another architecture"), std::string::npos) << dump.status();
  std::vector<uint8_t> big_endian = bytes;
  std::swap(big_endian[0], big_endian[3]);
  std::swap(big_endian[1], big_endian[2]);
  EXPECT_NE(ParseJitDump(big_endian, "x").status().message().find("byte order"), std::string::npos);
  EXPECT_NE(ParseJitDump(std::vector<uint8_t>{'E', 'L', 'F', 0}, "x").status().message().find("not a jitdump"),
            std::string::npos);
  EXPECT_NE(ParseJitDump(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 20), "x").status().message().find(
                "cut short"),
            std::string::npos);
}

TEST(JitDumpTest, JitdumpNames) {
  int pid = 0;
  EXPECT_TRUE(IsJitDumpName("/home/u/.debug/jit/x/jit-1234.dump", &pid));
  EXPECT_EQ(pid, 1234);
  EXPECT_FALSE(IsJitDumpName("/tmp/jit-.dump"));
  EXPECT_FALSE(IsJitDumpName("/tmp/jit-12a.dump"));
  EXPECT_FALSE(IsJitDumpName("/tmp/perf-12.map"));
}

std::optional<uint64_t> SameClock(uint64_t t) { return t; }

TEST(PlaceJitCodeTest, ReusedAddressesAtTheirTimeFirstUseFromTheExec) {
  std::vector<uint8_t> bytes;
  AppendJitDumpHeader(7, 1, &bytes);
  Load(500, 0x1000, 1, "a", {0x90, 0xc3}, &bytes);
  Load(600, 0x2000, 2, "b", {0xc3}, &bytes);
  Load(700, 0x1000, 3, "c", {0xcc, 0xc3}, &bytes);  // other bytes where "a" was
  Load(800, 0x1001, 4, "d", {0xc3}, &bytes);        // the same byte as "c" there
  absl::StatusOr<JitDump> dump = ParseJitDump(bytes, "jit-7.dump");
  ASSERT_TRUE(dump.ok());
  std::vector<std::string> warnings;
  std::vector<TimedCode> code = PlaceJitCode(*dump, bytes, "jit-7.dump", "[jit]", SameClock, 0, {100, 300}, &warnings);
  ASSERT_EQ(code.size(), 4u);
  EXPECT_EQ(code[0].time_ns, 300u);  // first use: from the last exec before it
  EXPECT_EQ(code[1].time_ns, 300u);
  EXPECT_EQ(code[2].time_ns, 700u);  // reuse with other bytes: its own time
  EXPECT_EQ(code[3].time_ns, 300u);  // same bytes: nothing changes there
  EXPECT_EQ(code[2].mapping.function, "c");
  EXPECT_EQ(code[2].mapping.vaddr, 0x1000u);
  EXPECT_EQ(code[2].mapping.size, 2u);
  EXPECT_TRUE(warnings.empty());

  // Stamps on another clock: all from the floor, and reuse is said to be unplaceable.
  code = PlaceJitCode(*dump, bytes, "jit-7.dump", "[jit]", [](uint64_t) { return std::optional<uint64_t>(); }, 42,
                      {100, 300}, &warnings);
  for (const TimedCode& c : code) EXPECT_EQ(c.time_ns, 42u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("another clock"), std::string::npos);
}

}  // namespace
}  // namespace ptd::image
