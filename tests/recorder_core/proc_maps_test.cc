#include "recorder/sideband/proc_maps.h"

#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "gtest/gtest.h"

namespace ptd {
namespace {

TEST(ProcMapsTest, ParsesEveryKindOfLine) {
  const char* text =
      "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1311      /usr/bin/cat\n"
      "7f3b2c028000-7f3b2c1bd000 r-xp 00028000 08:11 2623      /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f3b2c400000-7f3b2c401000 rwxs 00000000 00:00 0 \n"
      "7f3b2c500000-7f3b2c501000 r-xp 00001000 103:02 99  /tmp/dir with spaces/lib x.so (deleted)\n"
      "7ffd4a9f3000-7ffd4a9f5000 r-xp 00000000 00:00 0                          [vdso]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
  absl::StatusOr<std::vector<ProcMapping>> maps = ParseProcMaps(text, "maps");
  ASSERT_TRUE(maps.ok()) << maps.status();
  ASSERT_EQ(maps->size(), 6u);
  const ProcMapping& cat = (*maps)[0];
  EXPECT_EQ(cat.start, 0x55d0c0a00000u);
  EXPECT_EQ(cat.end, 0x55d0c0a02000u);
  EXPECT_EQ(cat.prot, static_cast<uint32_t>(PROT_READ));
  EXPECT_EQ(cat.flags, static_cast<uint32_t>(MAP_PRIVATE));
  EXPECT_EQ(cat.dev_major, 0xfdu);
  EXPECT_EQ(cat.dev_minor, 1u);
  EXPECT_EQ(cat.inode, 1311u);
  EXPECT_EQ(cat.path, "/usr/bin/cat");
  EXPECT_FALSE(cat.executable());

  const ProcMapping& libc = (*maps)[1];
  EXPECT_TRUE(libc.executable());
  EXPECT_EQ(libc.pgoff, 0x28000u);
  EXPECT_EQ(libc.dev_major, 8u);
  EXPECT_EQ(libc.dev_minor, 0x11u);

  const ProcMapping& anon = (*maps)[2];
  EXPECT_TRUE(anon.anonymous());
  EXPECT_EQ(anon.prot, static_cast<uint32_t>(PROT_READ | PROT_WRITE | PROT_EXEC));
  EXPECT_EQ(anon.flags, static_cast<uint32_t>(MAP_SHARED));

  EXPECT_EQ((*maps)[3].path, "/tmp/dir with spaces/lib x.so (deleted)");
  EXPECT_EQ((*maps)[3].dev_major, 0x103u);
  EXPECT_TRUE((*maps)[4].special());
  EXPECT_EQ((*maps)[4].path, "[vdso]");
  EXPECT_EQ((*maps)[5].start, 0xffffffffff600000u);
  EXPECT_EQ((*maps)[5].prot, static_cast<uint32_t>(PROT_EXEC));
}

TEST(ProcMapsTest, ErrorsNameTheSourceAndLine) {
  const char* text =
      "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1311 /usr/bin/cat\n"
      "55d0c0a02000 r-xp 00000000 fd:01 1311 /usr/bin/cat\n";
  absl::StatusOr<std::vector<ProcMapping>> maps = ParseProcMaps(text, "/proc/1/maps");
  ASSERT_FALSE(maps.ok());
  EXPECT_NE(maps.status().message().find("/proc/1/maps: line 2"), absl::string_view::npos)
      << maps.status();
  for (const char* bad : {"1000-2000 r-x 0 00:00 0\n", "1000-2000 r-xq 0 00:00 0\n",
                          "1000-2000 r-xp zz 00:00 0\n", "1000-2000 r-xp 0 0000 0\n",
                          "1000-2000 r-xp 0 00:00 x\n", "2000-1000 r-xp 0 00:00 0\n",
                          "11112222333344445-2 r-xp 0 00:00 0\n"}) {
    EXPECT_FALSE(ParseProcMaps(bad, "m").ok()) << bad;
  }
}

int FunctionInThisBinary() { return 7; }

// Cross-checked with facts found another way: this function's address lies in an
// executable mapping of the file /proc/self/exe points to.
TEST(ProcMapsTest, OwnMapsContainOwnCode) {
  absl::StatusOr<std::vector<ProcMapping>> maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.status();
  char exe[PATH_MAX] = {};
  ASSERT_GT(readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
  auto code = reinterpret_cast<uintptr_t>(&FunctionInThisBinary);
  bool found = false;
  for (const ProcMapping& m : *maps) {
    if (code >= m.start && code < m.end) {
      found = true;
      EXPECT_TRUE(m.executable());
      EXPECT_EQ(m.path, exe);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_FALSE(ReadProcMaps(-5).ok());
}

}  // namespace
}  // namespace ptd
