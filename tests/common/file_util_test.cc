// Basename / Dirname: the one way the project splits a path (comm names, archive folders,
// debug-link directories, raw-import maps).
#include "common/file_util.h"

#include "gtest/gtest.h"

namespace ptd {
namespace {

TEST(FileUtilTest, BasenameIsTheLastComponent) {
  EXPECT_EQ(Basename("/usr/lib/x86_64-linux-gnu/libc.so.6"), "libc.so.6");
  EXPECT_EQ(Basename("prog"), "prog");
  EXPECT_EQ(Basename("dir/"), "");
  EXPECT_EQ(Basename(""), "");
}

TEST(FileUtilTest, DirnameIsWhatComesBeforeTheLastSlash) {
  EXPECT_EQ(Dirname("/usr/lib/libc.so.6"), "/usr/lib");
  EXPECT_EQ(Dirname("trace/aux/cpu0"), "trace/aux");
  EXPECT_EQ(Dirname("/vmlinux"), "");
  EXPECT_EQ(Dirname("maps.txt"), ".");
}

}  // namespace
}  // namespace ptd
