#include "common/host_info.h"

#include <sys/utsname.h>

#include <gtest/gtest.h>

namespace ptd {
namespace {

TEST(HostInfoTest, ReadsVendorAndKernelRelease) {
  HostInfo h = ReadHostInfo();
  EXPECT_TRUE(h.cpu.vendor == "intel" || h.cpu.vendor == "amd" || h.cpu.vendor == "unknown");
  EXPECT_GT(h.cpu.family, 0u);
  struct utsname u {};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(h.kernel_release, u.release);
}

}  // namespace
}  // namespace ptd
