// FtfWriter: byte layout checked against the spec by hand, and round trips through
// FtfReader for everything the writer can emit, including table overflow.
#include "ftf/ftf_writer.h"

#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "ftf/ftf_format.h"
#include "ftf_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace ptd::ftf::testing {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<FtfWriter> MemoryWriter(std::string* bytes, const FtfWriterOptions& options = {}) {
  return FtfWriter::ToSink(MakeStringSink(bytes), "memory.ftf", options);
}

// A writer into memory and the bytes it has written.
struct MemoryFtf {
  explicit MemoryFtf(const FtfWriterOptions& options = {}) : writer(MemoryWriter(&bytes, options)) {}
  // Closes the writer and reads back what it wrote.
  absl::StatusOr<std::vector<FtfRecord>> CloseAndReadBack() {
    absl::Status closed = writer->Close();
    if (!closed.ok()) return closed;
    return ReadAllBytes(bytes);
  }
  std::string bytes;
  std::unique_ptr<FtfWriter> writer;
};

// A string record of at most 8 characters as the spec lays it out: type 2, 2 words,
// index in bits 16-30, length in bits 32-46; the text NUL-padded to a word.
void PutShortString(std::string& out, uint64_t index, const std::string& text) {
  PutWord(out, 2 | (2 << 4) | (index << 16) | (uint64_t{text.size()} << 32));
  out += text + std::string(8 - text.size(), '\0');
}

// An argument with a one-word value as the spec lays it out: `type` in bits 0-3, 2 words,
// name ref in bits 16-31; the value word.
void PutWordArgument(std::string& out, uint64_t type, uint64_t name_ref, uint64_t value) {
  PutWord(out, type | (2 << 4) | (name_ref << 16));
  PutWord(out, value);
}

// The preamble as the spec lays it out, built by hand for provider name `name`.
std::string ExpectedPreamble(const std::string& name) {
  std::string out;
  PutWord(out, 0x0016547846040010ull);  // magic, straight from the spec
  uint64_t name_words = (name.size() + 7) / 8;
  // metadata (type 0), provider info (metadata type 1), provider id 0, name length.
  PutWord(out, 0 | ((1 + name_words) << 4) | (uint64_t{1} << 16) | (uint64_t{name.size()} << 52));
  std::string padded = name;
  padded.resize(name_words * 8, '\0');
  out += padded;
  PutWord(out, 0 | (uint64_t{1} << 4) | (uint64_t{2} << 16));  // provider section, id 0
  PutWord(out, 1 | (uint64_t{2} << 4));                        // initialization
  PutWord(out, 1'000'000'000);
  return out;
}

TEST(FtfWriterTest, StartsWithMagicProviderRecordsAndNanosecondTicks) {
  std::string bytes;
  MemoryWriter(&bytes)->Close().IgnoreError();
  EXPECT_EQ(bytes, ExpectedPreamble("ptrace-direct"));
}

TEST(FtfWriterTest, EncodesStringThreadAndBeginRecordsAsTheSpecSays) {
  MemoryFtf ftf;
  const Arg arg = Arg::Uint64("n", 7);
  ftf.writer->DurationBegin(10, 11, 12345, "cat", "fn", absl::MakeConstSpan(&arg, 1));
  ASSERT_TRUE(ftf.writer->Close().ok());

  std::string expected = ExpectedPreamble("ptrace-direct");
  PutShortString(expected, 1, "cat");
  PutShortString(expected, 2, "fn");
  PutShortString(expected, 3, "n");
  // Thread record: type 3, 3 words, index 1; process koid, thread koid.
  PutWord(expected, 3 | (3 << 4) | (uint64_t{1} << 16));
  PutWord(expected, 10);
  PutWord(expected, 11);
  // Event: type 4, 4 words, duration begin (2), 1 arg, thread ref 1, category 1, name 2.
  PutWord(expected, 4 | (4 << 4) | (uint64_t{2} << 16) | (uint64_t{1} << 20) |
                        (uint64_t{1} << 24) | (uint64_t{1} << 32) | (uint64_t{2} << 48));
  PutWord(expected, 12345);
  PutWordArgument(expected, 4, 3, 7);  // uint64
  EXPECT_EQ(ftf.bytes, expected);
}

TEST(FtfWriterTest, EncodesThreadKernelObjectWithProcessKoidArgument) {
  MemoryFtf ftf;
  ftf.writer->WriteThread(100, 101, "worker");
  ASSERT_TRUE(ftf.writer->Close().ok());
  std::string expected = ExpectedPreamble("ptrace-direct");
  PutShortString(expected, 1, "worker");
  PutShortString(expected, 2, "process");
  // Kernel object: type 7, 4 words, obj type 2 (thread), name ref 1, 1 arg; koid.
  PutWord(expected, 7 | (4 << 4) | (uint64_t{2} << 16) | (uint64_t{1} << 24) | (uint64_t{1} << 40));
  PutWord(expected, 101);
  PutWordArgument(expected, 8, 2, 100);  // koid
  EXPECT_EQ(ftf.bytes, expected);
}

TEST(FtfWriterTest, RoundTripsEveryEventTypeAndKernelObject) {
  MemoryFtf ftf;
  ftf.writer->WriteProcess(7, "proc");
  ftf.writer->WriteThread(7, 8, "thr");
  ftf.writer->DurationBegin(7, 8, 100, "c", "outer");
  ftf.writer->DurationComplete(7, 8, 110, 120, "c", "leaf");
  ftf.writer->Instant(7, 8, 130, "c", "mark");
  const Arg value = Arg::Int64("value", -5);
  ftf.writer->Counter(7, 8, 140, "c", "ctr", 99, absl::MakeConstSpan(&value, 1));
  ftf.writer->DurationEnd(7, 8, 150, "c", "outer");
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(ftf.writer->stats().events, 5u);
  std::vector<KernelObjectRecord> objects = ObjectsOf(*records);
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects[0].obj_type, kObjTypeProcess);
  EXPECT_EQ(objects[0].koid, 7u);
  EXPECT_EQ(objects[0].name, "proc");
  EXPECT_EQ(objects[1].obj_type, kObjTypeThread);
  EXPECT_EQ(objects[1].koid, 8u);
  EXPECT_EQ(objects[1].name, "thr");
  ASSERT_EQ(objects[1].args.size(), 1u);
  EXPECT_EQ(objects[1].args[0].name, "process");
  EXPECT_EQ(objects[1].args[0].type, ArgType::kKoid);
  EXPECT_EQ(objects[1].args[0].bits, 7u);

  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 5u);
  const EventType types[] = {EventType::kDurationBegin, EventType::kDurationComplete,
                             EventType::kInstant, EventType::kCounter, EventType::kDurationEnd};
  const char* names[] = {"outer", "leaf", "mark", "ctr", "outer"};
  const uint64_t ts[] = {100, 110, 130, 140, 150};
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(events[i].type, types[i]);
    EXPECT_EQ(events[i].name, names[i]);
    EXPECT_EQ(events[i].category, "c");
    EXPECT_EQ(events[i].ts, ts[i]);
    EXPECT_EQ(events[i].thread.pid, 7u);
    EXPECT_EQ(events[i].thread.tid, 8u);
  }
  EXPECT_EQ(events[1].trailer, 120u);  // end time
  EXPECT_EQ(events[3].trailer, 99u);   // counter id
  ASSERT_EQ(events[3].args.size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(events[3].args[0].bits), -5);
}

TEST(FtfWriterTest, RoundTripsEveryArgumentType) {
  const std::vector<Arg> args = {
      Arg::Null("null"),
      Arg::Int32("i32", INT32_MIN),
      Arg::Uint32("u32", UINT32_MAX),
      Arg::Int64("i64", INT64_MIN),
      Arg::Uint64("u64", UINT64_MAX),
      Arg::Double("dbl", -1.5e-300),
      Arg::String("str", "hello world"),
      Arg::Pointer("ptr", 0x7ffd12345678),
      Arg::Koid("koid", 424242),
      Arg::Bool("yes", true),
      Arg::Bool("no", false),
      Arg::String("empty", ""),
  };
  MemoryFtf ftf;
  ftf.writer->Instant(1, 2, 3, "c", "args", args);
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 1u);
  const std::vector<ArgValue>& got = events[0].args;
  ASSERT_EQ(got.size(), args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    SCOPED_TRACE(args[i].name);
    EXPECT_EQ(got[i].name, args[i].name);
    EXPECT_EQ(got[i].type, args[i].type);
  }
  EXPECT_EQ(static_cast<int32_t>(static_cast<uint32_t>(got[1].bits)), INT32_MIN);
  EXPECT_EQ(got[2].bits, UINT32_MAX);
  EXPECT_EQ(static_cast<int64_t>(got[3].bits), INT64_MIN);
  EXPECT_EQ(got[4].bits, UINT64_MAX);
  EXPECT_EQ(got[5].double_value, -1.5e-300);
  EXPECT_EQ(got[6].string_value, "hello world");
  EXPECT_EQ(got[7].bits, 0x7ffd12345678u);
  EXPECT_EQ(got[8].bits, 424242u);
  EXPECT_EQ(got[9].bits, 1u);
  EXPECT_EQ(got[10].bits, 0u);
  EXPECT_EQ(got[11].string_value, "");
}

TEST(FtfWriterTest, ArgsBeyondFifteenAreDroppedAndCounted) {
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) names.push_back(absl::StrCat("a", i));
  std::vector<Arg> args;
  for (int i = 0; i < 20; ++i) args.push_back(Arg::Int32(names[i], i));
  MemoryFtf ftf;
  ftf.writer->Instant(1, 2, 3, "c", "many", args);
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(ftf.writer->stats().args_dropped, 5u);
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_EQ(events[0].args.size(), 15u);
  EXPECT_EQ(events[0].args[14].name, "a14");
}

// The headline case of the issue: more distinct names than the 15-bit string table holds.
TEST(FtfWriterTest, HundredThousandDistinctNamesReadBackRight) {
  constexpr int kNames = 100'000;
  MemoryFtf ftf;
  for (int i = 0; i < kNames; ++i) {
    std::string name = absl::StrCat("function_", i);
    ftf.writer->DurationBegin(1, 2, 2 * i, "fn", name);
    ftf.writer->DurationEnd(1, 2, 2 * i + 1, "fn", name);
  }
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_GT(ftf.writer->stats().string_records, uint64_t{kMaxStringIndex});
  uint16_t max_index = 0;
  for (const FtfRecord& r : *records) {
    if (r.type == RecordType::kString) max_index = std::max(max_index, r.string_index);
  }
  EXPECT_EQ(max_index, kMaxStringIndex);  // every index used, none beyond the format
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 2u * kNames);
  for (int i = 0; i < kNames; ++i) {
    ASSERT_EQ(events[2 * i].name, absl::StrCat("function_", i)) << "event " << 2 * i;
    ASSERT_EQ(events[2 * i + 1].name, absl::StrCat("function_", i)) << "event " << 2 * i + 1;
    ASSERT_EQ(events[2 * i].category, "fn");
  }
}

// With the smallest table, one record's 32 strings fill half of it: recycling must never
// take an index another string of the same record is still using.
TEST(FtfWriterTest, RecyclingNeverTakesAnIndexTheSameRecordUses) {
  FtfWriterOptions options;
  options.string_table_size = 1;  // raised to kMinStringTableSize
  MemoryFtf ftf(options);
  constexpr int kEvents = 300;
  std::vector<std::string> storage;
  for (int e = 0; e < kEvents; ++e) {
    storage.clear();
    for (int a = 0; a < 15; ++a) {
      storage.push_back(absl::StrCat("name_", e, "_", a));
      storage.push_back(absl::StrCat("value_", e, "_", a));
    }
    std::vector<Arg> args;
    for (int a = 0; a < 15; ++a) args.push_back(Arg::String(storage[2 * a], storage[2 * a + 1]));
    ftf.writer->Instant(1, 2, e, absl::StrCat("cat_", e % 7), absl::StrCat("event_", e), args);
  }
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  for (const FtfRecord& r : *records) {
    if (r.type == RecordType::kString) {
      ASSERT_LE(r.string_index, kMinStringTableSize);
    }
  }
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), size_t{kEvents});
  for (int e = 0; e < kEvents; ++e) {
    ASSERT_EQ(events[e].name, absl::StrCat("event_", e));
    ASSERT_EQ(events[e].category, absl::StrCat("cat_", e % 7));
    ASSERT_EQ(events[e].args.size(), 15u);
    for (int a = 0; a < 15; ++a) {
      ASSERT_EQ(events[e].args[a].name, absl::StrCat("name_", e, "_", a));
      ASSERT_EQ(events[e].args[a].string_value, absl::StrCat("value_", e, "_", a));
    }
  }
}

TEST(FtfWriterTest, NameUsedByEveryRecordIsNotRedefinedWhenTheTableRecycles) {
  FtfWriterOptions options;
  options.string_table_size = kMinStringTableSize;
  MemoryFtf ftf(options);
  for (int i = 0; i < 5000; ++i) ftf.writer->Instant(1, 2, i, "hot", absl::StrCat("cold_", i));
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  int hot_definitions = 0;
  for (const FtfRecord& r : *records) {
    if (r.type == RecordType::kString && r.string_value == "hot") ++hot_definitions;
  }
  EXPECT_EQ(hot_definitions, 1);
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 5000u);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(events[i].category, "hot");
}

// Writes the same events with the category and an arg name as plain strings or as
// handles; `rare_every`: how often the handle strings are used between cold names.
std::string WriteMixedEvents(bool handles, int rare_every) {
  FtfWriterOptions options;
  options.string_table_size = kMinStringTableSize;
  std::string bytes;
  std::unique_ptr<FtfWriter> writer = MemoryWriter(&bytes, options);
  StringHandle category("rare_category");
  StringHandle count("rare_count");
  for (int i = 0; i < 3000; ++i) {
    std::string name = absl::StrCat("cold_", i);
    if (i % rare_every != 0) {
      writer->DurationBegin(1, 2, i, "cold_category", name);
      continue;
    }
    if (handles) {
      const Arg args[] = {Arg::Uint64(count, i)};
      writer->DurationBegin(1, 2, i, category, name);
      writer->DurationEnd(1, 2, i, category, args);
    } else {
      const Arg args[] = {Arg::Uint64("rare_count", i)};
      writer->DurationBegin(1, 2, i, "rare_category", name);
      writer->DurationEnd(1, 2, i, "rare_category", "", args);
    }
  }
  EXPECT_TRUE(writer->Close().ok());
  return bytes;
}

TEST(FtfWriterTest, StringHandlesWriteTheSameBytesAsStrings) {
  // Every record: the handles' indices stay. Rarely: the table recycles their indices in
  // between, so the handles must notice and define their strings again.
  for (int rare_every : {1, 7, 200}) {
    std::string with_strings = WriteMixedEvents(false, rare_every);
    std::string with_handles = WriteMixedEvents(true, rare_every);
    EXPECT_EQ(with_handles, with_strings) << "rare_every " << rare_every;
  }
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(WriteMixedEvents(true, 200));
  ASSERT_TRUE(records.ok()) << records.status();
  int definitions = 0;
  for (const FtfRecord& r : *records) {
    if (r.type == RecordType::kString && r.string_value == "rare_category") ++definitions;
  }
  EXPECT_GT(definitions, 1);  // its index was recycled in between: redefined, not reused
  for (const EventRecord& e : EventsOf(*records)) {
    if (e.type != EventType::kDurationEnd) continue;
    ASSERT_EQ(e.category, "rare_category");
    ASSERT_EQ(e.args.size(), 1u);
    ASSERT_EQ(e.args[0].name, "rare_count");
  }
}

TEST(FtfWriterTest, StringHandleUsedWithASecondWriterDefinesItThere) {
  StringHandle category("shared");
  std::string first_bytes;
  std::string second_bytes;
  std::unique_ptr<FtfWriter> first = MemoryWriter(&first_bytes);
  std::unique_ptr<FtfWriter> second = MemoryWriter(&second_bytes);
  first->DurationBegin(1, 2, 10, category, "a");
  second->DurationBegin(1, 2, 20, category, "b");
  ASSERT_TRUE(first->Close().ok());
  ASSERT_TRUE(second->Close().ok());
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(second_bytes);
  ASSERT_TRUE(records.ok()) << records.status();
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].category, "shared");
  EXPECT_EQ(events[0].name, "b");
}

TEST(FtfWriterTest, MoreThan255ThreadsReadBackRight) {
  constexpr uint64_t kThreads = 1000;
  MemoryFtf ftf;
  for (int round = 0; round < 3; ++round) {
    for (uint64_t t = 0; t < kThreads; ++t) {
      ftf.writer->Instant(1000 + t % 3, 5000 + t, round * kThreads + t, "c", "tick");
    }
  }
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_GT(ftf.writer->stats().thread_records, uint64_t{kMaxThreadIndex});
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 3 * kThreads);
  for (size_t i = 0; i < events.size(); ++i) {
    uint64_t t = i % kThreads;
    ASSERT_EQ(events[i].thread.pid, 1000 + t % 3) << i;
    ASSERT_EQ(events[i].thread.tid, 5000 + t) << i;
    ASSERT_NE(events[i].thread_ref, 0);
  }
}

// Length of the longest prefix of `s` within `limit` bytes that ends on a UTF-8
// character boundary, computed by decoding from the start (independently of the
// writer's backward scan).
size_t Utf8PrefixWithin(const std::string& s, size_t limit) {
  size_t pos = 0;
  while (pos < s.size()) {
    auto lead = static_cast<uint8_t>(s[pos]);
    size_t len = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    if (pos + len > limit) break;
    pos += len;
  }
  return pos;
}

TEST(FtfWriterTest, LongStringsAreTruncatedAtACharacterBoundary) {
  const std::string ascii(40000, 'x');
  std::string two_byte = "a";
  while (two_byte.size() < 40000) two_byte += "\xc3\xa9";  // é
  std::string four_byte = "ab";
  while (four_byte.size() < 40000) four_byte += "\xf0\x9f\x98\x80";  // 😀
  const std::string exact(kMaxStringBytes, 'y');
  const std::vector<const std::string*> inputs = {&ascii, &two_byte, &four_byte, &exact};
  MemoryFtf ftf;
  for (const std::string* s : inputs) {
    const Arg arg = Arg::String("s", *s);
    ftf.writer->Instant(1, 2, 3, "c", *s, absl::MakeConstSpan(&arg, 1));
  }
  absl::StatusOr<std::vector<FtfRecord>> records = ftf.CloseAndReadBack();
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(ftf.writer->stats().strings_truncated, 6u);  // name and value of the first three
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 4u);
  size_t i = 0;
  for (const std::string* s : inputs) {
    SCOPED_TRACE(i);
    std::string expected = s->substr(0, Utf8PrefixWithin(*s, kMaxStringBytes));
    EXPECT_EQ(events[i].name, expected);
    EXPECT_EQ(events[i].args[0].string_value, expected);
    ++i;
  }
  EXPECT_EQ(events[0].name.size(), kMaxStringBytes);
  EXPECT_EQ(events[3].name.size(), kMaxStringBytes);
  EXPECT_LT(events[1].name.size(), kMaxStringBytes);  // the cut fell inside an é
}

std::string GunzipFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(file, buf, sizeof buf)) > 0) out.append(buf, n);
  gzclose(file);
  return out;
}

void WriteSample(FtfWriter& writer) {
  writer.WriteProcess(1, "p");
  writer.WriteThread(1, 2, "t");
  for (int i = 0; i < 20000; ++i) {
    std::string name = absl::StrCat("f", i % 300);
    writer.DurationBegin(1, 2, 10 * i, "c", name);
    const Arg n = Arg::Uint64("instructions", i);
    writer.DurationEnd(1, 2, 10 * i + 5, "c", name, absl::MakeConstSpan(&n, 1));
  }
}

TEST(FtfWriterTest, GzSuffixWritesGzipOfTheSameBytes) {
  ptd::testing::TempDir dir;
  const std::string plain = dir.Sub("t.ftf");
  const std::string gz = dir.Sub("t.ftf.gz");
  for (const std::string& path : {plain, gz}) {
    absl::Status written = WriteFtfFile(path, WriteSample);
    ASSERT_TRUE(written.ok()) << written;
  }
  absl::StatusOr<std::string> plain_bytes = ReadFileToString(plain);
  absl::StatusOr<std::string> gz_bytes = ReadFileToString(gz);
  ASSERT_TRUE(plain_bytes.ok() && gz_bytes.ok());
  ASSERT_GE(gz_bytes->size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>((*gz_bytes)[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<uint8_t>((*gz_bytes)[1]), 0x8b);
  EXPECT_LT(gz_bytes->size(), plain_bytes->size() / 4);
  EXPECT_EQ(GunzipFile(gz), *plain_bytes);
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllFile(gz);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(EventsOf(*records).size(), 40000u);
}

TEST(FtfWriterTest, DiskFullIsReportedByStatusAndClose) {
  FtfWriterOptions options;
  options.buffer_bytes = 64 * 1024;
  absl::StatusOr<std::unique_ptr<FtfWriter>> writer = FtfWriter::Open("/dev/full", options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  WriteSample(**writer);  // many buffers' worth: a flush fails while writing
  EXPECT_FALSE((*writer)->status().ok());
  absl::Status closed = (*writer)->Close();
  EXPECT_FALSE(closed.ok());
  EXPECT_THAT(std::string(closed.message()), HasSubstr("/dev/full"));
  EXPECT_EQ((*writer)->Close(), closed);  // sticky
  (*writer)->Instant(1, 2, 3, "c", "after");  // no effect, no crash
}

TEST(FtfWriterTest, OpenErrorNamesThePath) {
  absl::StatusOr<std::unique_ptr<FtfWriter>> writer = FtfWriter::Open("/nonexistent-dir/x.ftf");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(std::string(writer.status().message()), HasSubstr("/nonexistent-dir/x.ftf"));
}

TEST(FtfWriterTest, DestructorFinishesTheFile) {
  ptd::testing::TempDir dir;
  const std::string path = dir.Sub("early.ftf.gz");
  {
    absl::StatusOr<std::unique_ptr<FtfWriter>> writer = FtfWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    WriteSample(**writer);
  }  // no Close(): an early return in a caller
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllFile(path);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(EventsOf(*records).size(), 40000u);
}

TEST(FtfWriterTest, EmptyNamesUseRefZeroAndNoStringRecord) {
  MemoryFtf ftf;
  ftf.writer->Instant(1, 2, 3, "", "");
  ASSERT_TRUE(ftf.writer->Close().ok());
  EXPECT_EQ(ftf.writer->stats().string_records, 0u);
  absl::StatusOr<std::vector<FtfRecord>> records = ReadAllBytes(ftf.bytes);
  ASSERT_TRUE(records.ok());
  std::vector<EventRecord> events = EventsOf(*records);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "");
  EXPECT_EQ(WordAt(ftf.bytes, ftf.bytes.size() - 16) >> 32, 0u);  // category and name refs 0
}

}  // namespace
}  // namespace ptd::ftf::testing
