// Where function names come from (image/module_cache, image/elf_reader): a stripped
// program's own .dynsym, its separate debug file found by build-id or by .gnu_debuglink,
// MiniDebugInfo (.gnu_debugdata), and the entry point named _start when nothing else
// names it. The program is compiled and stripped by the test with cc and objcopy.
#include <map>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "image/elf_reader.h"
#include "image/mapped_file.h"
#include "image/module_cache.h"
#include "tests/testing/test_util.h"

namespace ptd::image {
namespace {

using ::ptd::testing::RunCommand;
using ::ptd::testing::TempDir;

// A local C function (in .symtab only) and an assembly label without type or size.
constexpr char kProgramSource[] = R"(
static int __attribute__((noinline)) ptd_local_function(int x) { return x * 3 + 1; }
__asm__(".text\n.globl ptd_asm_label\nptd_asm_label:\n  nop\n  nop\n  ret\n");
int main(int argc, char** argv) { (void)argv; return ptd_local_function(argc); }
)";

class SymbolSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"cc", "objcopy"}) {
      if (RunCommand({"sh", "-c", std::string("command -v ") + tool}).exit_code != 0) {
        GTEST_SKIP() << tool << " is not installed (scripts/setup installs build-essential)";
      }
    }
    ASSERT_TRUE(WriteFileAtomic(dir_.Sub("prog.c"), std::string_view(kProgramSource)).ok());
    Run({"cc", "-O1", "-g0", "-Wl,--build-id", "-o", program(), dir_.Sub("prog.c")});
    ASSERT_TRUE(ForEachElfSymbol(Bytes(program()), program(), [this](const ElfSymbol& s) {
                  original_[std::string(s.name)] = s.value;
                }).ok());
    ASSERT_TRUE(original_.count("ptd_local_function") && original_.count("ptd_asm_label"));
    Run({"objcopy", "--only-keep-debug", program(), dir_.Sub("prog.debug")});
    Run({"objcopy", "--strip-all", program(), stripped()});
    ASSERT_TRUE(MakeDirs(dir_.Sub("empty")).ok());
  }

  void Run(const std::vector<std::string>& argv) {
    ptd::testing::CommandResult result = RunCommand(argv);
    ASSERT_EQ(result.exit_code, 0) << argv[0] << ": " << result.err;
  }
  std::vector<uint8_t> Bytes(const std::string& path) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? *bytes : std::vector<uint8_t>{};
  }
  std::string BuildId(const std::string& path) {
    absl::StatusOr<ElfInfo> info = ReadElfInfo(Bytes(path), path);
    return info.ok() ? info->build_id : "";
  }
  // The name `debug_root`'s module cache gives the code at `address` of `path`.
  std::string NameAt(const std::string& debug_root, const std::string& path, uint64_t address,
                     std::string* symbols_from = nullptr) {
    ModuleCache cache(debug_root);
    absl::StatusOr<std::shared_ptr<const Module>> module = cache.Get(path);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return "";
    if (symbols_from != nullptr) *symbols_from = (*module)->symbols_from;
    const Symbol* symbol = (*module)->symbols.Find(address);
    return symbol == nullptr ? "(none)" : std::string((*module)->symbols.name(*symbol));
  }
  std::string program() const { return dir_.Sub("prog"); }
  std::string stripped() const { return dir_.Sub("prog.stripped"); }

  TempDir dir_;
  std::map<std::string, uint64_t> original_;
};

TEST_F(SymbolSourcesTest, StrippedProgramWithoutDebugFileHasOnlyItsEntryPointNamed) {
  const uint64_t local = original_["ptd_local_function"];
  EXPECT_NE(NameAt(dir_.Sub("empty"), stripped(), local), "ptd_local_function");
  absl::StatusOr<ElfInfo> info = ReadElfInfo(Bytes(stripped()), stripped());
  ASSERT_TRUE(info.ok());
  ASSERT_NE(info->entry, 0u);
  EXPECT_EQ(NameAt(dir_.Sub("empty"), stripped(), info->entry), "_start");
}

TEST_F(SymbolSourcesTest, DebugFileInBuildIdDirectoryNamesLocalFunctionsAndAssemblyLabels) {
  const std::string build_id = BuildId(stripped());
  ASSERT_EQ(build_id, BuildId(program()));
  ASSERT_EQ(build_id.size(), 40u);
  const std::string root = dir_.Sub("debug");
  const std::string debug_file = DebugFileForBuildId(build_id, root);
  ASSERT_EQ(debug_file, root + "/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug");
  ASSERT_TRUE(MakeDirs(root + "/.build-id/" + build_id.substr(0, 2)).ok());
  Run({"cp", dir_.Sub("prog.debug"), debug_file});

  std::string symbols_from;
  EXPECT_EQ(NameAt(root, stripped(), original_["ptd_local_function"], &symbols_from), "ptd_local_function");
  EXPECT_EQ(symbols_from, debug_file);
  // The size-0 label covers its code up to the next symbol.
  EXPECT_EQ(NameAt(root, stripped(), original_["ptd_asm_label"] + 2), "ptd_asm_label");
  EXPECT_EQ(NameAt(root, stripped(), original_["main"]), "main");
}

TEST_F(SymbolSourcesTest, DebuglinkFindsTheDebugFileInDotDebugNextToTheProgram) {
  ASSERT_TRUE(MakeDirs(dir_.Sub("linked/.debug")).ok());
  Run({"cp", dir_.Sub("prog.debug"), dir_.Sub("linked/.debug/prog.debug")});
  const std::string linked = dir_.Sub("linked/prog");
  Run({"objcopy", "--add-gnu-debuglink=" + dir_.Sub("prog.debug"), stripped(), linked});
  absl::StatusOr<ElfInfo> info = ReadElfInfo(Bytes(linked), linked);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->debuglink, "prog.debug");
  std::string symbols_from;
  EXPECT_EQ(NameAt(dir_.Sub("empty"), linked, original_["ptd_local_function"], &symbols_from),
            "ptd_local_function");
  EXPECT_EQ(symbols_from, dir_.Sub("linked/.debug/prog.debug"));
}

TEST_F(SymbolSourcesTest, MiniDebugInfoInGnuDebugdataNamesLocalFunctions) {
  if (RunCommand({"sh", "-c", "command -v xz"}).exit_code != 0) {
    GTEST_SKIP() << "xz is not installed: cannot make a .gnu_debugdata section";
  }
  Run({"cp", dir_.Sub("prog.debug"), dir_.Sub("mini")});
  Run({"xz", "-k", dir_.Sub("mini")});
  const std::string with_mini = dir_.Sub("prog.mini");
  Run({"objcopy", "--add-section", ".gnu_debugdata=" + dir_.Sub("mini.xz"), stripped(), with_mini});
  std::string symbols_from;
  EXPECT_EQ(NameAt(dir_.Sub("empty"), with_mini, original_["ptd_local_function"], &symbols_from),
            "ptd_local_function");
  EXPECT_EQ(symbols_from, with_mini);
}

TEST_F(SymbolSourcesTest, DamagedMiniDebugInfoIsAnErrorNamingTheFile) {
  ASSERT_TRUE(WriteFileAtomic(dir_.Sub("junk.xz"), std::string_view("not xz at all")).ok());
  const std::string damaged = dir_.Sub("prog.damaged");
  Run({"objcopy", "--add-section", ".gnu_debugdata=" + dir_.Sub("junk.xz"), stripped(), damaged});
  SymbolTable table;
  absl::Status status = ReadElfSymbols(Bytes(damaged), damaged, &table);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(damaged + ": .gnu_debugdata"), std::string::npos) << status;
}

}  // namespace
}  // namespace ptd::image
