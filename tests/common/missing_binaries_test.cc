// common/missing_binaries: one entry per path, biggest first, and a summary that fits a
// line however many are missing.
#include "common/missing_binaries.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

MissingBinaries Many(int n) {
  MissingBinaries missing;
  for (int i = 0; i < n; ++i) missing.Add({absl::StrCat("/lib/small", i, ".so"), "", 4096});
  missing.Add({"/lib/libc.so", "", 3u << 20});
  missing.Add({"/lib/libc.so", "abcd", 1u << 20});  // same path: one entry, size kept
  missing.Add({"/usr/bin/prog", "", 200u << 10});
  return missing;
}

TEST(MissingBinariesTest, SummaryIsOneLineNamingTheBiggest) {
  MissingBinaries missing = Many(60);
  EXPECT_EQ(missing.size(), 62u);
  const std::string line = missing.Summary(8, /*verbose=*/false);
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 0) << line;
  EXPECT_EQ(line.rfind("62 binaries not found (8 decode errors where their code ran): biggest: "
                       "/lib/libc.so (3.0 MiB), /usr/bin/prog (200 KiB), /lib/small",
                       0),
            0u)
      << line;
  EXPECT_THAT(line, HasSubstr("--verbose lists all"));
  EXPECT_THAT(line, Not(HasSubstr("/lib/small59.so")));
}

TEST(MissingBinariesTest, VerboseListsEachWithItsBuildId) {
  const std::string text = Many(3).Summary(-1, /*verbose=*/true);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5) << text;
  EXPECT_THAT(text, HasSubstr("5 binaries not found:\n  /lib/libc.so (build-id abcd; 3.0 MiB mapped)"));
  EXPECT_THAT(text, HasSubstr("/lib/small2.so (4 KiB mapped)"));
  EXPECT_THAT(text, Not(HasSubstr("decode errors")));
}

TEST(MissingBinariesTest, AFewAreAllNamedWithTheirBuildIds) {
  MissingBinaries missing;
  missing.Add({"[vdso]", "abcd", 8192});
  EXPECT_EQ(missing.Summary(0, false), "1 binary not found (0 decode errors where their code ran): "
                                       "[vdso] (build-id abcd; 8 KiB mapped)");
}

TEST(MissingBinariesTest, NothingMissingSaysNothing) {
  EXPECT_EQ(MissingBinaries().Summary(0, false), "");
}

}  // namespace
}  // namespace ptd
