// FtfReader on hand-made input: what the spec allows that our writer never emits
// (inline strings and threads, unknown record types, redefinitions), and errors.
#include "ftf/ftf_reader.h"

#include <string>
#include <vector>

#include "common/file_util.h"
#include "ftf/ftf_writer.h"
#include "ftf_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::ftf::testing {
namespace {

using ::testing::HasSubstr;

std::string Header() {
  std::string out;
  PutWord(out, kMagicWord);
  PutWord(out, 1 | (2 << 4));  // initialization
  PutWord(out, 1'000'000'000);
  return out;
}

void PutString(std::string& out, uint16_t index, const std::string& s) {
  uint64_t words = 1 + (s.size() + 7) / 8;
  PutWord(out, 2 | (words << 4) | (uint64_t{index} << 16) | (uint64_t{s.size()} << 32));
  std::string padded = s;
  padded.resize((s.size() + 7) / 8 * 8, '\0');
  out += padded;
}

void PutThread(std::string& out, uint8_t index, uint64_t pid, uint64_t tid) {
  PutWord(out, 3 | (3 << 4) | (uint64_t{index} << 16));
  PutWord(out, pid);
  PutWord(out, tid);
}

// Instant event with indexed thread, category and name, no args.
void PutInstant(std::string& out, uint8_t thread, uint16_t category, uint16_t name, uint64_t ts) {
  PutWord(out, 4 | (2 << 4) | (uint64_t{thread} << 24) | (uint64_t{category} << 32) |
                   (uint64_t{name} << 48));
  PutWord(out, ts);
}

TEST(FtfReaderTest, SkipsUnknownRecordTypesByTheirSize) {
  std::string bytes = Header();
  PutWord(bytes, 5 | (3 << 4));  // blob, 3 words
  PutWord(bytes, 0xdeadbeef);
  PutWord(bytes, 0xdeadbeef);
  PutWord(bytes, 11 | (2 << 4));  // a type the spec does not define yet
  PutWord(bytes, 4 | (2 << 4));   // looks like an event header, but is payload
  PutWord(bytes, 15 | (uint64_t{3} << 4));  // large record: 32-bit size at bits 4-35
  PutWord(bytes, 1);
  PutWord(bytes, 2);
  PutWord(bytes, 8 | (2 << 4));  // scheduling
  PutWord(bytes, 0);
  PutString(bytes, 1, "name");
  PutThread(bytes, 1, 10, 20);
  PutInstant(bytes, 1, 0, 1, 77);
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(bytes);
  ASSERT_TRUE(records.ok()) << records.status();
  int skipped = 0;
  for (const FtfRecord& r : *records) skipped += r.skipped;
  EXPECT_EQ(skipped, 4);
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "name");
  EXPECT_EQ(events[0].ts, 77u);
  EXPECT_EQ(events[0].thread.tid, 20u);
}

TEST(FtfReaderTest, ReadsInlineStringsAndInlineThreads) {
  std::string bytes = Header();
  // Event: instant, 1 arg, inline thread, inline category "cat" (0x8003), inline name
  // "hello" (0x8005). Words: header, ts, pid, tid, "cat", "hello", arg header, "key", value.
  PutWord(bytes, 4 | (9 << 4) | (uint64_t{1} << 20) | (uint64_t{0x8003} << 32) |
                     (uint64_t{0x8005} << 48));
  PutWord(bytes, 5);
  PutWord(bytes, 300);
  PutWord(bytes, 301);
  bytes += std::string("cat\0\0\0\0\0", 8);
  bytes += std::string("hello\0\0\0", 8);
  // Argument: uint64, 3 words, inline name "key" (0x8003).
  PutWord(bytes, 4 | (3 << 4) | (uint64_t{0x8003} << 16));
  bytes += std::string("key\0\0\0\0\0", 8);
  PutWord(bytes, 42);
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(bytes);
  ASSERT_TRUE(records.ok()) << records.status();
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].thread_ref, 0);
  EXPECT_EQ(events[0].thread.pid, 300u);
  EXPECT_EQ(events[0].thread.tid, 301u);
  EXPECT_EQ(events[0].category, "cat");
  EXPECT_EQ(events[0].name, "hello");
  ASSERT_EQ(events[0].args.size(), 1u);
  EXPECT_EQ(events[0].args[0].name, "key");
  EXPECT_EQ(events[0].args[0].bits, 42u);
}

TEST(FtfReaderTest, AnIndexMeansItsLatestDefinition) {
  std::string bytes = Header();
  PutString(bytes, 1, "first");
  PutThread(bytes, 1, 1, 2);
  PutInstant(bytes, 1, 0, 1, 10);
  PutString(bytes, 1, "second");
  PutThread(bytes, 1, 3, 4);
  PutInstant(bytes, 1, 0, 1, 20);
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(bytes);
  ASSERT_TRUE(records.ok()) << records.status();
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "first");
  EXPECT_EQ(events[0].thread.tid, 2u);
  EXPECT_EQ(events[1].name, "second");
  EXPECT_EQ(events[1].thread.tid, 4u);
}

TEST(FtfReaderTest, ProviderInfoStartsTheProviderAfresh) {
  std::string bytes = Header();
  PutString(bytes, 1, "name");
  PutWord(bytes, 0 | (1 << 4) | (1 << 16) | (uint64_t{5} << 20));  // provider info id 5
  PutThread(bytes, 1, 1, 2);
  PutInstant(bytes, 1, 0, 1, 10);  // string 1 belongs to provider 0's table
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(bytes);
  ASSERT_FALSE(records.ok());
  EXPECT_THAT(std::string(records.status().message()), HasSubstr("string index 1 used before"));
}

absl::Status ReadError(const std::string& bytes) {
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(bytes);
  return records.ok() ? absl::OkStatus() : records.status();
}

TEST(FtfReaderTest, ErrorsNameTheOffsetAndTheRecord) {
  std::string bytes = Header();  // 24 bytes
  PutWord(bytes, 2 | (0 << 4));  // size 0 at offset 24
  EXPECT_THAT(std::string(ReadError(bytes).message()),
              HasSubstr("memory.ftf: offset 24 (0x18): string record: size 0"));

  bytes = Header();
  PutWord(bytes, 4 | (5 << 4));  // event of 5 words, only 2 present
  PutWord(bytes, 0);
  EXPECT_THAT(std::string(ReadError(bytes).message()),
              HasSubstr("offset 24 (0x18): event record: truncated: header says 40 bytes, 16 remain"));

  bytes = Header();
  PutThread(bytes, 1, 1, 2);
  PutInstant(bytes, 1, 0, 9, 10);  // at offset 48
  EXPECT_THAT(std::string(ReadError(bytes).message()),
              HasSubstr("offset 48 (0x30): event record: name: string index 9 used before"));

  bytes = Header();
  PutInstant(bytes, 3, 0, 0, 10);
  EXPECT_THAT(std::string(ReadError(bytes).message()), HasSubstr("thread index 3 used before"));

  bytes = Header();
  bytes += "abc";  // partial header
  EXPECT_THAT(std::string(ReadError(bytes).message()), HasSubstr("offset 24: truncated record header"));

  EXPECT_THAT(std::string(ReadError("").message()), HasSubstr("empty"));
  EXPECT_THAT(std::string(ReadError(std::string(16, 'x')).message()),
              HasSubstr("not a Fuchsia trace"));

}

TEST(FtfReaderTest, ArgumentValueOutsideItsSizeIsAnError) {
  std::string bytes = Header();
  PutThread(bytes, 1, 1, 2);
  // Instant with 1 arg; the arg (uint64) claims 1 word, so its value would lie outside.
  PutWord(bytes, 4 | (4 << 4) | (uint64_t{1} << 20) | (uint64_t{1} << 24));
  PutWord(bytes, 10);
  PutWord(bytes, 4 | (1 << 4));
  PutWord(bytes, 99);
  EXPECT_THAT(std::string(ReadError(bytes).message()),
              HasSubstr("uint64 value runs past the argument's 1 words"));
}

TEST(FtfReaderTest, ReadsGzipWhateverTheFileIsCalled) {
  ptd::testing::TempDir dir;
  ASSERT_TRUE(WriteFtfFile(dir.Sub("a.ftf.gz"), [](FtfWriter& writer) { writer.Instant(1, 2, 3, "c", "gz"); }).ok());
  ASSERT_EQ(std::rename(dir.Sub("a.ftf.gz").c_str(), dir.Sub("b.ftf").c_str()), 0);
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllFile(dir.Sub("b.ftf"));
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(EventsOf(*records).size(), 1u);
  EXPECT_EQ(EventsOf(*records)[0].name, "gz");
}

TEST(FtfReaderTest, MissingFileErrorNamesThePath) {
  absl::StatusOr<std::unique_ptr<FtfReader>> reader = FtfReader::Open("/nonexistent/x.ftf");
  ASSERT_FALSE(reader.ok());
  EXPECT_THAT(std::string(reader.status().message()), HasSubstr("/nonexistent/x.ftf"));
}

}  // namespace
}  // namespace ptd::ftf::testing
