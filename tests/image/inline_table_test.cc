#include "image/inline_table.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "image/elf_reader.h"
#include "image/insn_classifier.h"
#include "image/mapped_file.h"
#include "tests/testing/addr2line.h"
#include "tests/testing/test_util.h"

namespace ptd::image {
namespace {

using ::ptd::testing::Addr2lineChains;
using ::ptd::testing::Addr2lineFrame;

const std::string kInlineProgram = absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_inline");

// Every instruction address of the functions named `names` (ELF symbols, parts split
// off them included: guarded.cold).
std::vector<uint64_t> InstructionAddresses(const MappedFile& file, const std::set<std::string>& names) {
  absl::StatusOr<ElfInfo> info = ReadElfInfo(file.bytes(), kInlineProgram);
  EXPECT_TRUE(info.ok()) << info.status();
  std::map<uint64_t, uint64_t> ranges;  // start → end
  EXPECT_TRUE(ForEachElfSymbol(file.bytes(), kInlineProgram, [&](const ElfSymbol& s) {
                std::string name(s.name.substr(0, s.name.find('.')));
                if (names.count(name) && s.size > 0) ranges[s.value] = s.value + s.size;
              }).ok());
  std::vector<uint64_t> addresses;
  for (auto [start, end] : ranges) {
    for (const ElfSegment& seg : info->segments) {
      if (start < seg.vaddr || end > seg.vaddr + seg.file_size) continue;
      for (uint64_t a = start; a < end;) {
        const uint8_t* bytes = file.bytes().data() + seg.file_offset + (a - seg.vaddr);
        InsnInfo insn = InsnClassifier::Decode(a, absl::MakeConstSpan(bytes, std::min<uint64_t>(15, end - a)));
        if (insn.size == 0) break;
        addresses.push_back(a);
        a += insn.size;
      }
    }
  }
  return addresses;
}

std::vector<Addr2lineFrame> ChainOf(const InlineTable& table, uint64_t address) {
  std::vector<Addr2lineFrame> chain;
  for (const SourceFrame* f : table.ChainAt(address)) {
    chain.push_back(Addr2lineFrame{std::string(f->name), std::string(f->call_file), static_cast<int>(f->call_line)});
  }
  return chain;
}

TEST(InlineTableTest, ChainsOfEveryInstructionEqualEuAddr2lines) {
  absl::StatusOr<std::shared_ptr<const MappedFile>> file = MappedFile::Open(kInlineProgram);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<uint64_t> addresses = InstructionAddresses(**file, {"_Z4worki", "_Z4flati", "_Z7guardedi", "main"});
  ASSERT_GT(addresses.size(), 40u);
  std::string error;
  std::map<uint64_t, std::vector<Addr2lineFrame>> expected = Addr2lineChains(kInlineProgram, addresses, &error);
  ASSERT_EQ(expected.size(), addresses.size()) << error;

  absl::StatusOr<std::unique_ptr<InlineTable>> table = InlineTable::Open(kInlineProgram);
  ASSERT_TRUE(table.ok()) << table.status();
  size_t deepest = 0;
  std::set<std::string> inlined_names;
  for (uint64_t a : addresses) {
    std::vector<Addr2lineFrame> chain = ChainOf(**table, a);
    EXPECT_EQ(chain, expected[a]) << absl::StrCat("at 0x", absl::Hex(a));
    deepest = std::max(deepest, chain.size());
    for (size_t i = 1; i < chain.size(); ++i) inlined_names.insert(chain[i].name);
  }
  // Not a vacuous match: the program's inlined calls are there, two deep at most (add_one
  // is static: GCC gives it no linkage name, so it is "add_one"; clang's "_ZL7add_onei"
  // reads "add_one(int)").
  EXPECT_EQ(deepest, 3u);
  EXPECT_TRUE(inlined_names.count("square(int)"));
  EXPECT_TRUE(inlined_names.count("sum_of_squares(int, int)"));
  EXPECT_TRUE(inlined_names.count("add_one") || inlined_names.count("add_one(int)"));
  EXPECT_TRUE(inlined_names.count("check_positive(int)"));
}

TEST(InlineTableTest, IntervalEndIsWhereTheChainChanges) {
  absl::StatusOr<std::unique_ptr<InlineTable>> table = InlineTable::Open(kInlineProgram);
  ASSERT_TRUE(table.ok()) << table.status();
  absl::StatusOr<std::shared_ptr<const MappedFile>> file = MappedFile::Open(kInlineProgram);
  ASSERT_TRUE(file.ok());
  std::vector<uint64_t> addresses = InstructionAddresses(**file, {"_Z4worki"});
  ASSERT_FALSE(addresses.empty());
  for (uint64_t a : addresses) {
    uint64_t end = 0;
    const SourceFrame* innermost = (*table)->InnermostAt(a, &end);
    ASSERT_NE(innermost, nullptr);
    EXPECT_GT(end, a);
    EXPECT_EQ((*table)->InnermostAt(end - 1), innermost);
    EXPECT_NE((*table)->InnermostAt(end), innermost);
  }
}

// GCC writes .debug_aranges (Open maps addresses to units through it); clang does not
// unless asked (Open then finds the units by their headers and reads their DIEs' ranges).
// The same program without the section gives the same chain at every instruction.
TEST(InlineTableTest, UnitsWithoutArangesGiveTheSameChains) {
  absl::StatusOr<std::shared_ptr<const MappedFile>> file = MappedFile::Open(kInlineProgram);
  ASSERT_TRUE(file.ok()) << file.status();
  ptd::testing::CommandResult sections = ptd::testing::RunCommand({"readelf", "-S", "-W", kInlineProgram});
  ASSERT_EQ(sections.exit_code, 0) << sections.err;
  if (sections.out.find(".debug_aranges") == std::string::npos) {
    GTEST_SKIP() << kInlineProgram << " has no .debug_aranges (its compiler wrote none): both tables would be read alike";
  }
  ptd::testing::TempDir tmp;
  const std::string stripped = tmp.Sub("no_aranges");
  ptd::testing::CommandResult copy =
      ptd::testing::RunCommand({"objcopy", "--remove-section=.debug_aranges", kInlineProgram, stripped});
  ASSERT_EQ(copy.exit_code, 0) << copy.err;

  absl::StatusOr<std::unique_ptr<InlineTable>> with = InlineTable::Open(kInlineProgram);
  absl::StatusOr<std::unique_ptr<InlineTable>> without = InlineTable::Open(stripped);
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  std::vector<uint64_t> addresses = InstructionAddresses(**file, {"_Z4worki", "_Z4flati", "_Z7guardedi", "main"});
  ASSERT_GT(addresses.size(), 40u);
  size_t inlined = 0;
  for (uint64_t a : addresses) {
    std::vector<Addr2lineFrame> chain = ChainOf(**with, a);
    EXPECT_EQ(ChainOf(**without, a), chain) << absl::StrCat("at 0x", absl::Hex(a));
    inlined += chain.size() > 1 ? 1 : 0;
  }
  EXPECT_GT(inlined, 0u);
}

TEST(InlineTableTest, FileWithoutDwarfIsAnError) {
  absl::StatusOr<std::unique_ptr<InlineTable>> table =
      InlineTable::Open(absl::StrCat(PTD_BINARY_DIR, "/tests/programs/ptd_prog_calls_stripped"));
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("ptd_prog_calls_stripped"), std::string::npos) << table.status();
}

}  // namespace
}  // namespace ptd::image
