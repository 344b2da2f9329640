// `import raw` of a stream whose code runs at kernel addresses (above INT64_MAX), then
// `decode`: the memory image there is used, as libipt's ptxed uses it. meta.json's
// 64-bit hex fields were once parsed as signed and clamped to 0x7fffffffffffffff, so the
// code was mapped nowhere ("no memory mapped at trace offset ...").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_meta.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using testing::JsonNumber;
using testing::RunCommand;
using testing::TempDir;

std::string Le(uint64_t v, size_t bytes) {
  std::string out(bytes, '\0');
  std::memcpy(out.data(), &v, bytes);
  return out;
}

// PSB, MODE.Exec (64-bit), PSBEND, then three enable/disable pairs: TIP.PGE at `base`
// (3 nops and a jmp run) and TIP.PGD at the jmp's target (IP compression 3: 48 bits,
// sign-extended, so the kernel's upper half is encoded as 0xffff8...).
std::string Stream(uint64_t base) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += "\x02\x82";
  s += std::string("\x99\x01", 2);
  s += std::string("\x02\x23", 2);
  for (int i = 0; i < 3; ++i) {
    s += '\x71' + Le(base, 6);
    s += '\x61' + Le(base + 0x80, 6);
  }
  return s + std::string(16, '\0');
}

struct ImportedDecode {
  int64_t instructions = -1;
  std::string ftf;
};

// `kallsyms`: a /proc/kallsyms-style text given to import with --kallsyms ("" for none).
ImportedDecode ImportAndDecode(const TempDir& tmp, const std::string& name, uint64_t base, const std::string& kallsyms = "") {
  std::string page = "\x90\x90\x90\xeb\x7b";  // nop; nop; nop; jmp base+0x80
  page.resize(4096, '\0');
  EXPECT_TRUE(WriteFileAtomic(tmp.Sub(name + ".pt"), Stream(base)).ok());
  EXPECT_TRUE(WriteFileAtomic(tmp.Sub(name + ".dump"), page).ok());
  EXPECT_TRUE(WriteFileAtomic(tmp.Sub(name + ".addr"), Le(base, 8)).ok());
  EXPECT_TRUE(WriteFileAtomic(tmp.Sub(name + ".maps"),
                              absl::StrCat("pages ", tmp.Sub(name + ".addr"), " ", tmp.Sub(name + ".dump"), "\n"))
                  .ok());
  const std::string trace = tmp.Sub(name + ".trace");
  std::vector<std::string> args = {PTD_CLI_PATH, "import", "raw", "--pt", tmp.Sub(name + ".pt"), "--maps",
                                   tmp.Sub(name + ".maps"), "--cpu", "6/85/4", "-o", trace};
  if (!kallsyms.empty()) {
    EXPECT_TRUE(WriteFileAtomic(tmp.Sub(name + ".kallsyms"), kallsyms).ok());
    args.insert(args.end(), {"--kallsyms", tmp.Sub(name + ".kallsyms")});
  }
  auto imported = RunCommand(args);
  EXPECT_EQ(imported.exit_code, 0) << imported.err;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  EXPECT_TRUE(meta.ok()) << meta.status();
  if (meta.ok() && !meta->images.empty()) {
    EXPECT_EQ(meta->images[0].vaddr, base);
  }
  const std::string stats = tmp.Sub(name + ".json");
  auto decoded = RunCommand({PTD_CLI_PATH, "decode", trace, "-o", tmp.Sub(name + ".ftf"), "--stats-json", stats, "-q"});
  EXPECT_EQ(decoded.exit_code, 0) << decoded.err;
  const std::string json = ReadFileToString(stats).value_or("");
  EXPECT_EQ(JsonNumber(json, "errors"), 0) << json;
  return {JsonNumber(json, "instructions"), ReadFileToString(tmp.Sub(name + ".ftf")).value_or("")};
}

TEST(RawKernelImportTest, KernelAddressCodeDecodesLikeUserAddressCode) {
  TempDir tmp;
  EXPECT_EQ(ImportAndDecode(tmp, "user", 0x400000).instructions, 12);
  EXPECT_EQ(ImportAndDecode(tmp, "kernel", 0xffffffff81000000ull).instructions, 12);
}

// kallsyms names the kernel functions (its text symbols; data symbols and hidden
// addresses are not used), as /proc/kallsyms names them.
TEST(RawKernelImportTest, KallsymsNamesKernelFunctions) {
  TempDir tmp;
  const std::string kallsyms =
      "ffffffff80ff0000 D some_data\n"
      "ffffffff81000000 T entry_SYSCALL_64\n"
      "ffffffff81000040 t helper_after\t[some_module]\n"
      "0000000000000000 T hidden_by_kptr_restrict\n";
  const ImportedDecode named = ImportAndDecode(tmp, "named", 0xffffffff81000000ull, kallsyms);
  EXPECT_EQ(named.instructions, 12);
  EXPECT_NE(named.ftf.find("entry_SYSCALL_64"), std::string::npos);
  EXPECT_EQ(named.ftf.find("some_data"), std::string::npos);
  const ImportedDecode unnamed = ImportAndDecode(tmp, "unnamed", 0xffffffff81000000ull);
  EXPECT_EQ(unnamed.ftf.find("entry_SYSCALL_64"), std::string::npos);
}

}  // namespace
}  // namespace ptd
