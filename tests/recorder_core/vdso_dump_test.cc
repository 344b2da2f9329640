#include "recorder/images/vdso_dump.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

// This process's own vDSO, read directly from memory (the reference for the dump).
std::vector<uint8_t> OwnVdso(uint64_t* start) {
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(getpid());
  if (!maps.ok()) return {};
  for (const ProcMapping& m : *maps) {
    if (m.path == "[vdso]") {
      *start = m.start;
      const auto* p = reinterpret_cast<const uint8_t*>(m.start);
      return std::vector<uint8_t>(p, p + (m.end - m.start));
    }
  }
  return {};
}

// An r-x mapping of [start, end) named `path` ("" : anonymous), as /proc/PID/maps gives it.
ProcMapping ExecutableMapping(uint64_t start, uint64_t end, const std::string& path) {
  ProcMapping m;
  m.start = start;
  m.end = end;
  m.prot = 5;
  m.path = path;
  return m;
}

TEST(VdsoDumpTest, OwnVdsoIsAValidElf) {
  uint64_t start = 0;
  std::vector<uint8_t> vdso = OwnVdso(&start);
  ASSERT_FALSE(vdso.empty());
  EXPECT_EQ(start, getauxval(AT_SYSINFO_EHDR));
  EXPECT_TRUE(CheckElfImage(vdso, "[vdso]").ok());
}

TEST(VdsoDumpTest, RejectsWhatIsNotElf) {
  std::vector<uint8_t> junk(4096, 0x5a);
  absl::Status st = CheckElfImage(junk, "junk");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("junk: offset 0: no ELF magic"), absl::string_view::npos) << st;
  uint64_t start = 0;
  std::vector<uint8_t> vdso = OwnVdso(&start);
  ASSERT_GT(vdso.size(), 256u);
  // The ELF header survives but the section headers it points to are cut off.
  std::vector<uint8_t> truncated(vdso.begin(), vdso.begin() + 256);
  EXPECT_FALSE(CheckElfImage(truncated, "truncated").ok());
  EXPECT_FALSE(CheckElfImage({}, "empty").ok());
}

TEST(VdsoDumpTest, ReadProcessMemoryReadsOwnBytes) {
  static const char kText[] = "bytes the test reads back through /proc/self/mem";
  absl::StatusOr<std::vector<uint8_t>> bytes =
      ReadProcessMemory(getpid(), reinterpret_cast<uint64_t>(kText), sizeof(kText));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(std::memcmp(bytes->data(), kText, sizeof(kText)), 0);
  EXPECT_FALSE(ReadProcessMemory(getpid(), 0, 16).ok());  // page 0 is never mapped
}

TEST(VdsoDumpTest, DumpsOwnVdsoByteIdenticalIntoImages) {
  testing::TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok());
  absl::StatusOr<SpecialMemoryDump> dump = DumpSpecialMemory(getpid(), *maps, *dir);
  ASSERT_TRUE(dump.ok()) << dump.status();
  uint64_t start = 0;
  std::vector<uint8_t> vdso = OwnVdso(&start);
  const ImageEntry* entry = nullptr;
  for (const ImageEntry& e : dump->images) {
    if (e.kind == ImageKind::kVdso) entry = &e;
  }
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->name, "[vdso]");
  EXPECT_EQ(entry->vaddr, start);
  EXPECT_EQ(entry->size, vdso.size());
  EXPECT_EQ(entry->pid, getpid());
  EXPECT_EQ(entry->path, "images/vdso." + std::to_string(getpid()) + ".so");
  absl::StatusOr<std::vector<uint8_t>> file = ReadFileBytes(dir->FilePath(entry->path));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file, vdso);
}

// /proc/PID/mem refused, as Yama ptrace_scope 1 refuses it to a non-root tracer.
absl::StatusOr<std::vector<uint8_t>> Refused(int pid, uint64_t, uint64_t) {
  return absl::PermissionDeniedError(absl::StrCat("/proc/", pid, "/mem: cannot open: Operation not permitted"));
}

TEST(VdsoDumpTest, UnreadableVdsoOfASameAbiProcessIsThisProcesssOwn) {
  testing::TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok());
  absl::StatusOr<SpecialMemoryDump> dump = DumpSpecialMemory(getpid(), *maps, *dir, Refused);
  ASSERT_TRUE(dump.ok()) << dump.status();
  const ImageEntry* entry = nullptr;
  for (const ImageEntry& e : dump->images) {
    if (e.kind == ImageKind::kVdso) entry = &e;
  }
  ASSERT_NE(entry, nullptr);
  uint64_t start = 0;
  std::vector<uint8_t> vdso = OwnVdso(&start);
  absl::StatusOr<std::vector<uint8_t>> file = ReadFileBytes(dir->FilePath(entry->path));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file, vdso);
  bool said = false;
  for (const std::string& note : dump->notes) {
    said = said || (note.find("unreadable") != std::string::npos &&
                    note.find("this process's [vdso] saved instead") != std::string::npos &&
                    note.find("build-id ") != std::string::npos);
  }
  EXPECT_TRUE(said) << "no note says the [vdso] was taken from this process";
}

TEST(VdsoDumpTest, UnreadableVdsoOfAnotherSizeIsAnErrorThatSaysWhy) {
  testing::TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok());
  // One page: not this process's image (a 32-bit target's).
  const std::vector<ProcMapping> maps = {ExecutableMapping(0x7fff0000, 0x7fff1000, "[vdso]")};
  uint64_t start = 0;
  ASSERT_NE(OwnVdso(&start).size(), 0x1000u);
  absl::StatusOr<SpecialMemoryDump> dump = DumpSpecialMemory(getpid(), maps, *dir, Refused);
  ASSERT_FALSE(dump.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(dump.status()));
  EXPECT_NE(dump.status().message().find("cannot stand in"), absl::string_view::npos) << dump.status();
  EXPECT_NE(dump.status().message().find("another ABI"), absl::string_view::npos) << dump.status();
}

TEST(VdsoDumpTest, NotesAnonymousExecutableMemoryAndMissingVdso) {
  testing::TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok());
  const std::vector<ProcMapping> maps = {ExecutableMapping(0x10000, 0x12000, "")};  // anonymous
  absl::StatusOr<SpecialMemoryDump> dump = DumpSpecialMemory(getpid(), maps, *dir);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_TRUE(dump->images.empty());
  ASSERT_EQ(dump->notes.size(), 2u);
  EXPECT_NE(dump->notes[0].find("no [vdso]"), std::string::npos);
  EXPECT_NE(dump->notes[1].find("1 anonymous executable mapping(s), 8192 bytes"), std::string::npos)
      << dump->notes[1];
}

// Paths are built with StrCat, not operator+: GCC 12 at -O3 warns falsely (-Warray-bounds)
// on a chain of string concatenations.
TEST(VdsoDumpTest, CopiesPerfMapWhenPresent) {
  testing::TempDir tmp;
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(tmp.Sub("t.dir"), false);
  ASSERT_TRUE(dir.ok());
  // A pid no process has here, so no real perf map is touched.
  const int fake_pid = 0x3ffffff0;
  std::string map_path = absl::StrCat("/tmp/perf-", fake_pid, ".map");
  absl::StatusOr<bool> none = CopyPerfMap(fake_pid, *dir);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  ASSERT_TRUE(WriteFileAtomic(map_path, std::string_view("7f0000001000 20 jitted_fn\n")).ok());
  absl::StatusOr<bool> copied = CopyPerfMap(fake_pid, *dir);
  ::unlink(map_path.c_str());
  ASSERT_TRUE(copied.ok());
  EXPECT_TRUE(*copied);
  absl::StatusOr<std::string> text =
      ReadFileToString(dir->FilePath(absl::StrCat("images/perf-", fake_pid, ".map")));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "7f0000001000 20 jitted_fn\n");
}

}  // namespace
}  // namespace ptd
