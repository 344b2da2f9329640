// The reader on damaged input: every truncation of a small file, every single-bit flip,
// and random bytes. It must return records or an error naming an offset, never crash or
// read out of bounds (this test also runs in the ASan+UBSan build).
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ftf/ftf_checker.h"
#include "ftf/ftf_reader.h"
#include "ftf/ftf_summary.h"
#include "ftf/ftf_text.h"
#include "ftf/ftf_writer.h"
#include "ftf_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ptd::ftf {
namespace {

using ::ptd::ftf::testing::ReaderOfBytes;
using ::testing::HasSubstr;

// Everything the writer emits, small.
std::string SmallTrace() {
  std::string bytes;
  auto w = FtfWriter::ToSink(MakeStringSink(&bytes), "memory.ftf");
  w->WriteProcess(1, "proc");
  w->WriteThread(1, 2, "thread");
  const std::vector<Arg> args = {Arg::Int32("i", -1), Arg::Double("d", 0.5),
                                 Arg::String("s", "text"), Arg::Bool("b", true)};
  w->DurationBegin(1, 2, 10, "cat", "outer", args);
  w->DurationComplete(1, 2, 11, 12, "cat", "leaf");
  w->Counter(1, 2, 13, "cat", "ctr", 4, absl::MakeConstSpan(&args[0], 1));
  w->Instant(1, 2, 14, "cat", "mark");
  w->DurationEnd(1, 2, 15, "cat", "outer", absl::MakeConstSpan(&args[1], 1));
  EXPECT_TRUE(w->Close().ok());
  return bytes;
}

struct ReadResult {
  absl::Status status;
  size_t records = 0;
};

// Reads everything, also feeding the checker, summarizer and text output (they see
// whatever the reader accepts).
ReadResult ReadEverything(const std::string& bytes) {
  FtfChecker checker;
  FtfSummarizer summarizer;
  ReadResult result;
  result.status = ForEachRecord(*ReaderOfBytes(bytes, "fuzz.ftf"), [&](const FtfRecord& record) {
    ++result.records;
    checker.Add(record);
    summarizer.Add(record);
    FormatRecord(record);
  });
  checker.Finish();
  FormatFtfSummary(summarizer.Finish(), 5);
  return result;
}

TEST(FtfReaderRobustnessTest, EveryTruncationEndsCleanlyOrWithAnOffset) {
  const std::string full = SmallTrace();
  std::set<size_t> boundaries;
  {
    ASSERT_TRUE(ForEachRecord(*ReaderOfBytes(full, "full.ftf"), [&](const FtfRecord& record) {
                  boundaries.insert(record.offset);
                }).ok());
    boundaries.insert(full.size());
  }
  for (size_t length = 0; length <= full.size(); ++length) {
    SCOPED_TRACE(length);
    ReadResult result = ReadEverything(full.substr(0, length));
    if (length > 0 && boundaries.count(length)) {
      EXPECT_TRUE(result.status.ok()) << result.status;
    } else {
      ASSERT_FALSE(result.status.ok());
      EXPECT_THAT(std::string(result.status.message()), HasSubstr("fuzz.ftf: "));
      if (length > 0) {
        EXPECT_THAT(std::string(result.status.message()), HasSubstr("offset"));
      }
    }
  }
}

TEST(FtfReaderRobustnessTest, EverySingleBitFlipIsSurvived) {
  const std::string full = SmallTrace();
  size_t errors = 0;
  for (size_t bit = 0; bit < full.size() * 8; ++bit) {
    std::string damaged = full;
    damaged[bit / 8] = static_cast<char>(damaged[bit / 8] ^ (1 << (bit % 8)));
    errors += !ReadEverything(damaged).status.ok();
  }
  // Many flips only change a value; flips in headers must be caught somewhere.
  EXPECT_GT(errors, 0u);
}

TEST(FtfReaderRobustnessTest, RandomBytesAfterTheMagicAreSurvived) {
  std::mt19937_64 rng(12345);
  const std::string full = SmallTrace();
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    testing::PutWord(bytes, kMagicWord);
    // Half the inputs start from a real preamble so deeper parsing is reached.
    if (i % 2) bytes = full.substr(0, 48 + 8 * (rng() % 8));
    size_t words = rng() % 64;
    for (size_t w = 0; w < words; ++w) {
      uint64_t word = rng();
      // Small sizes and known types make it past the size check more often.
      if (rng() % 2) word = (word & ~uint64_t{0xfff0}) | ((rng() % 8) << 4);
      testing::PutWord(bytes, word);
    }
    if (rng() % 4 == 0) bytes.resize(bytes.size() - rng() % 8);
    ReadEverything(bytes);
  }
}

}  // namespace
}  // namespace ptd::ftf
