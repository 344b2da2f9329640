// ProgressBar: the line it draws, and that it draws nothing when disabled (stderr not a
// terminal).
#include "common/progress_bar.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

TEST(ProgressBarTest, LineShowsBarPercentRateAndTimeLeft) {
  // 25 MB of 100 MB in 5 s: 5 MB/s, 15 s left.
  std::string line = ProgressBar::Line("decoding", 25'000'000, 100'000'000, 5.0);
  EXPECT_THAT(line, HasSubstr("decoding [#####...............]  25%"));
  EXPECT_THAT(line, HasSubstr("5.00 MB/s"));
  EXPECT_THAT(line, HasSubstr("0:15 left"));
  // No rate before there is anything to measure.
  EXPECT_EQ(ProgressBar::Line("decoding", 0, 100, 0.0), "decoding [....................]   0%");
}

std::string Drawn(bool enabled) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  {
    ProgressBar bar("decoding", 1000, enabled, out);
    bar.Update(500);
    bar.Finish();
  }
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

TEST(ProgressBarTest, DrawsInPlaceOnlyWhenEnabled) {
  std::string on = Drawn(true);
  EXPECT_THAT(on, HasSubstr("\rdecoding ["));
  EXPECT_THAT(on, HasSubstr("\rdecoding: done"));
  EXPECT_EQ(Drawn(false), "");
}

}  // namespace
}  // namespace ptd
