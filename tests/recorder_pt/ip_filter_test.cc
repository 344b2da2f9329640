// --filter resolution (names to the kernel's numeric file-offset filters) and the fake
// kernel's check of filter strings, which follows perf_event_parse_addr_filter and
// pt_event_addr_filters_validate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cerrno>
#include <limits.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "recorder/images/elf_symbol.h"
#include "recorder/pt/ip_filter.h"
#include "tests/recorder_pt/fake_address_filter.h"

namespace ptd::pt {
namespace {

using ::testing::HasSubstr;
using testing::CheckKernelAddressFilter;

std::string Target() { return absl::StrCat(PTD_BINARY_DIR, "/tests/recorder_pt/ptd-trigger-target"); }

perf_event_attr UserOnly() {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.exclude_kernel = 1;
  return attr;
}

TEST(KernelAddressFilterTest, FollowsTheKernelsGrammar) {
  const perf_event_attr attr = UserOnly();
  EXPECT_EQ(CheckKernelAddressFilter("filter 0x1130/0x40@/bin/true", attr, 2), 0);
  EXPECT_EQ(CheckKernelAddressFilter("filter 4400/64@/bin/true,stop 0x10/8@/bin/true", attr, 2), 0);
  // perf's symbolic syntax is not the kernel's: names are no numbers.
  EXPECT_EQ(CheckKernelAddressFilter("filter main @ /bin/true", attr, 2), EINVAL);
  EXPECT_EQ(CheckKernelAddressFilter("filter main@/bin/true", attr, 2), EINVAL);
  // intel_pt: no size-0 ranges, no start, no more ranges than the CPU has.
  EXPECT_EQ(CheckKernelAddressFilter("filter 0x1130@/bin/true", attr, 2), EOPNOTSUPP);
  EXPECT_EQ(CheckKernelAddressFilter("start 0x1130/0x40@/bin/true", attr, 2), EOPNOTSUPP);
  EXPECT_EQ(CheckKernelAddressFilter(
                "filter 0x1/1@/bin/true filter 0x2/1@/bin/true filter 0x3/1@/bin/true", attr, 2),
            EOPNOTSUPP);
  // No file: kernel addresses, refused for a user-only event; a file must be regular.
  EXPECT_EQ(CheckKernelAddressFilter("filter 0x1130/0x40", attr, 2), EINVAL);
  EXPECT_EQ(CheckKernelAddressFilter("filter 0x1130/0x40@/tmp", attr, 2), EINVAL);
}

TEST(IpFilterTest, SymbolBecomesItsFileOffsetRange) {
  absl::StatusOr<ElfSymbolAddress> sym = FindElfFunction(Target(), "ptd_trigger_point");
  ASSERT_TRUE(sym.ok()) << sym.status();
  ASSERT_GT(sym->size, 0u);
  auto filter = ResolveIpFilter("filter ptd_trigger_point", Target(), 2);
  ASSERT_TRUE(filter.ok()) << filter.status();
  char real[PATH_MAX];
  ASSERT_NE(realpath(Target().c_str(), real), nullptr);
  EXPECT_EQ(*filter, absl::StrFormat("filter 0x%x/0x%x@%s", sym->file_offset, sym->size, real));
  EXPECT_EQ(CheckKernelAddressFilter(*filter, UserOnly(), 2), 0);
}

TEST(IpFilterTest, FilesNumbersAndSeveralItems) {
  auto filter = ResolveIpFilter(absl::StrCat("filter @", Target(), ", stop 0x10/0x8@/bin/true"), "", 2);
  ASSERT_TRUE(filter.ok()) << filter.status();
  EXPECT_THAT(*filter, HasSubstr(",stop 0x10/0x8@/"));
  EXPECT_EQ(CheckKernelAddressFilter(*filter, UserOnly(), 2), 0);
}

TEST(IpFilterTest, RefusesWhatTheKernelWouldWithAClearMessage) {
  struct Case {
    const char* filter;
    const char* message;  // part of the error
  };
  for (const Case& c : {Case{"filter main @ /bin/true", "filter TARGET"},  // perf's syntax
                        Case{"start ptd_trigger_point", "no start filters"},
                        Case{"filter no_such_function", "no_such_function"},
                        Case{"filter main, filter ptd_trigger_point, stop 0x1/1", "num_address_ranges"},
                        Case{"filter 0x10/0", "the range is empty"}}) {
    SCOPED_TRACE(c.filter);
    auto filter = ResolveIpFilter(c.filter, Target(), 2);
    ASSERT_FALSE(filter.ok());
    EXPECT_THAT(std::string(filter.status().message()), HasSubstr(c.message));
  }
}

// The kernel splits the filter string on spaces, commas and newlines
// (perf_event_parse_addr_filter's strsep on " ,\n"), so a file whose path holds one
// would reach it as a different, broken filter.
TEST(IpFilterTest, APathTheKernelsTokenizerWouldSplitIsRefused) {
  char dir_template[] = "/tmp/ptd ip filter XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string copy = dir + "/target,copy";
  ASSERT_EQ(std::system(absl::StrCat("cp '", Target(), "' '", copy, "'").c_str()), 0);
  absl::StatusOr<std::string> resolved = ResolveIpFilter("filter main", copy, 2);
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  ASSERT_FALSE(resolved.ok()) << *resolved;
  EXPECT_THAT(resolved.status().message(), HasSubstr("space or comma"));
  EXPECT_THAT(resolved.status().message(), HasSubstr(copy));
}

}  // namespace
}  // namespace ptd::pt
