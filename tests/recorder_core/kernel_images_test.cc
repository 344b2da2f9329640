// record --kernel's capture (recorder/images/kernel_images.h) from fake /proc and /sys trees made
// by the test (no machine here has /proc/kcore): kallsyms, modules with build-ids, the
// kernel's build-id, the text from a kcore-like ELF, a vmlinux found by build-id, and one
// message naming what is missing and why when addresses are hidden.
#include "recorder/images/kernel_images.h"

#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

constexpr uint64_t kText = 0xffffffff81000000ull;
constexpr uint64_t kModule = 0xffffffffc0a00000ull;

template <typename T>
std::string Bytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

// A GNU build-id note holding the hex `id`.
std::string BuildIdNote(const std::string& id) {
  const std::string desc = absl::HexStringToBytes(id);
  Elf64_Nhdr note{4, static_cast<Elf64_Word>(desc.size()), NT_GNU_BUILD_ID};
  // StrCat, not operator+: GCC 12 at -O3 warns falsely (-Warray-bounds) on the chain.
  return absl::StrCat(Bytes(note), absl::string_view("GNU\0", 4), desc);
}

// A kcore-like ELF: one PT_LOAD for the kernel text, one for the module area.
std::string Kcore(const std::string& text, const std::string& module) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_CORE;
  eh.e_phoff = sizeof(eh);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 2;
  const uint64_t data = sizeof(eh) + 2 * sizeof(Elf64_Phdr);
  Elf64_Phdr text_ph{PT_LOAD, PF_R | PF_X, data, kText, 0, text.size(), text.size(), 4096};
  Elf64_Phdr module_ph{PT_LOAD, PF_R | PF_X, data + text.size(), kModule, 0, module.size(), module.size(), 4096};
  return Bytes(eh) + Bytes(text_ph) + Bytes(module_ph) + text + module;
}

class KernelImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(tmp_.Sub("proc")).ok());
    ASSERT_TRUE(MakeDirs(tmp_.Sub("sys/kernel")).ok());
    ASSERT_TRUE(MakeDirs(tmp_.Sub("sys/module/ext4/notes")).ok());
    sources_.proc_root = tmp_.Sub("proc");
    sources_.sys_root = tmp_.Sub("sys");
    sources_.vmlinux_dirs = {tmp_.Sub("debug")};
    sources_.release = "6.1.0-test";
  }

  void Write(const std::string& relative, const std::string& bytes) {
    ASSERT_TRUE(WriteFileAtomic(tmp_.Sub(relative), bytes).ok());
  }

  // Captures into a fresh trace directory; returns the message.
  std::string Capture(TraceMeta* meta) {
    absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp_.Sub(absl::StrCat("trace", ++n_)), false);
    EXPECT_TRUE(dir.ok()) << dir.status();
    std::string message = CaptureKernelImages(*dir, sources_, meta);
    EXPECT_TRUE(dir->Commit(*meta).ok());
    return message;
  }

  std::string TraceFile(const std::string& relative) {
    return ReadFileToString(tmp_.Sub(absl::StrCat("trace", n_, "/", relative))).value_or("<missing>");
  }

  TempDir tmp_;
  KernelImageSources sources_;
  int n_ = 0;
};

TEST_F(KernelImagesTest, CapturesNamesModulesBuildIdsAndTheTextFromKcore) {
  const std::string kernel_id = "00112233445566778899aabbccddeeff00112233";
  const std::string module_id = "aabbccddeeff00112233445566778899aabbccdd";
  const std::string text(0x2000, '\x90');
  const std::string module(0x1000, '\xc3');
  Write("proc/kallsyms", "ffffffff81000000 T _text\nffffffff81000010 T do_syscall_64\nffffffff81002000 T _etext\n"
                         "ffffffffc0a00000 t ext4_fill_super\t[ext4]\n");
  Write("proc/modules", "ext4 4096 1 - Live 0xffffffffc0a00000\n");
  Write("sys/kernel/notes", BuildIdNote(kernel_id));
  Write("sys/module/ext4/notes/.note.gnu.build-id", BuildIdNote(module_id));
  Write("proc/kcore", Kcore(text, module));

  TraceMeta meta;
  const std::string message = Capture(&meta);
  // No vmlinux is needed when kcore gave the text.
  EXPECT_EQ(message, "");
  EXPECT_EQ(meta.kernel.build_id, kernel_id);
  EXPECT_THAT(TraceFile(meta.kernel.kallsyms), HasSubstr("do_syscall_64"));
  ASSERT_EQ(meta.kernel.modules.size(), 1u);
  EXPECT_EQ(meta.kernel.modules[0].name, "ext4");
  EXPECT_EQ(meta.kernel.modules[0].address, kModule);
  EXPECT_EQ(meta.kernel.modules[0].build_id, module_id);
  ASSERT_EQ(meta.images.size(), 2u);
  EXPECT_EQ(meta.images[0].vaddr, kText);
  EXPECT_EQ(meta.images[0].pid, -1);
  EXPECT_EQ(TraceFile(meta.images[0].path), text);
  EXPECT_EQ(meta.images[1].vaddr, kModule);
  EXPECT_EQ(TraceFile(meta.images[1].path), module);
  // meta.json keeps it all.
  absl::StatusOr<TraceMeta> back = ReadTraceMeta(tmp_.Sub(absl::StrCat("trace", n_)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->kernel == meta.kernel);
}

TEST_F(KernelImagesTest, VmlinuxIsFoundByBuildIdWhenKcoreIsMissing) {
  // Any ELF with a build-id stands for the vmlinux: this test's own binary.
  absl::StatusOr<std::string> id = ReadElfBuildId("/proc/self/exe");
  if (!id.ok() || id->empty()) GTEST_SKIP() << "the test binary has no build-id";
  absl::StatusOr<std::string> elf = ReadFileToString("/proc/self/exe");
  ASSERT_TRUE(elf.ok());
  ASSERT_TRUE(MakeDirs(tmp_.Sub(absl::StrCat("debug/.build-id/", id->substr(0, 2)))).ok());
  Write(absl::StrCat("debug/.build-id/", id->substr(0, 2), "/", id->substr(2), ".debug"), *elf);
  Write("proc/kallsyms", "ffffffff81000000 T _text\nffffffff81002000 T _etext\n");
  Write("proc/modules", "");
  Write("sys/kernel/notes", BuildIdNote(*id));

  TraceMeta meta;
  const std::string message = Capture(&meta);
  // kcore is missing (said), the vmlinux stands in for it.
  EXPECT_THAT(message, HasSubstr("kcore"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("will not decode")));
  ASSERT_EQ(meta.images.size(), 1u);
  EXPECT_EQ(meta.images[0].kind, ImageKind::kFile);
  EXPECT_EQ(meta.images[0].vaddr, kText);
  EXPECT_EQ(meta.images[0].build_id, *id);
  EXPECT_THAT(meta.images[0].path, HasSubstr(".build-id/"));
}

// kptr_restrict: every address reads as 0, no kcore, no vmlinux: one message says what is
// missing and why, nothing is captured that would mislead, and nothing fails.
TEST_F(KernelImagesTest, HiddenAddressesGiveOneMessageNamingWhatIsMissingAndWhy) {
  Write("proc/kallsyms", "0000000000000000 T _text\n0000000000000000 T do_syscall_64\n");
  Write("proc/modules", "ext4 4096 1 - Live 0x0000000000000000\n");
  Write("sys/kernel/notes", BuildIdNote("00112233445566778899aabbccddeeff00112233"));

  TraceMeta meta;
  const std::string message = Capture(&meta);
  EXPECT_THAT(message, HasSubstr("kptr_restrict"));
  EXPECT_THAT(message, HasSubstr("kernel function names"));
  EXPECT_THAT(message, HasSubstr("a vmlinux with build-id 00112233"));
  EXPECT_THAT(message, HasSubstr("User-space code decodes as usual"));
  EXPECT_EQ(meta.kernel.kallsyms, "");
  EXPECT_TRUE(meta.images.empty());
  ASSERT_FALSE(meta.notes.empty());
  EXPECT_EQ(meta.notes.back(), message);
}

}  // namespace
}  // namespace ptd
