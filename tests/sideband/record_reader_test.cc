// RecordReader against bytes packed by hand from the layouts in linux/perf_event.h (not
// with RecordBuilder, so the two are checked against an independent encoding).
#include "sideband/record_reader.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sideband/perf_record.h"

namespace ptd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Appends little-endian fields; the record's size is patched by Finish().
class Packer {
 public:
  void Begin(uint32_t type, uint16_t misc) {
    start_ = bytes_.size();
    U32(type);
    U16(misc);
    U16(0);
  }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Str(const char* s, size_t padded_len) {
    std::vector<uint8_t> field(padded_len, 0);
    std::memcpy(field.data(), s, std::strlen(s));
    bytes_.insert(bytes_.end(), field.begin(), field.end());
  }
  // sample_id for TID|TIME|CPU|IDENTIFIER.
  void Trailer(uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu, uint64_t id) {
    U32(pid), U32(tid), U64(time), U32(cpu), U32(0), U64(id);
  }
  void Finish() {
    uint16_t size = static_cast<uint16_t>(bytes_.size() - start_);
    std::memcpy(bytes_.data() + start_ + 6, &size, 2);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void Raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<uint8_t> bytes_;
  size_t start_ = 0;
};

std::vector<PerfRecord> ReadOk(const std::vector<uint8_t>& bytes, RecordFormat format = {}) {
  absl::StatusOr<RecordList> list = ReadAllRecords(bytes, "test.data", format);
  EXPECT_TRUE(list.ok()) << list.status();
  return list.ok() ? list->records : std::vector<PerfRecord>{};
}

std::string ReadError(const std::vector<uint8_t>& bytes, RecordFormat format = {}) {
  absl::StatusOr<RecordList> list = ReadAllRecords(bytes, "bad.data", format);
  EXPECT_FALSE(list.ok());
  return list.ok() ? "" : std::string(list.status().message());
}

TEST(RecordReaderTest, ParsesHandPackedMmap2WithInode) {
  Packer p;
  p.Begin(kPerfRecordMmap2, kPerfMiscUser);
  p.U32(100), p.U32(101);
  p.U64(0x7f0000001000), p.U64(0x3000), p.U64(0x2000);
  p.U32(8), p.U32(1), p.U64(123456), p.U64(7);
  p.U32(5), p.U32(2);  // PROT_READ|PROT_EXEC, MAP_PRIVATE
  p.Str("/usr/lib/libc.so.6", 24);
  p.Trailer(100, 101, 5000, 1, 42);
  p.Finish();
  std::vector<PerfRecord> records = ReadOk(p.bytes());
  ASSERT_EQ(records.size(), 1u);
  const PerfRecord& r = records[0];
  EXPECT_EQ(r.type, kPerfRecordMmap2);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.size, p.bytes().size());
  const auto* m = std::get_if<Mmap2Record>(&r.body);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->pid, 100u);
  EXPECT_EQ(m->tid, 101u);
  EXPECT_EQ(m->addr, 0x7f0000001000u);
  EXPECT_EQ(m->len, 0x3000u);
  EXPECT_EQ(m->pgoff, 0x2000u);
  EXPECT_EQ(m->maj, 8u);
  EXPECT_EQ(m->min, 1u);
  EXPECT_EQ(m->ino, 123456u);
  EXPECT_EQ(m->ino_generation, 7u);
  EXPECT_EQ(m->prot, 5u);
  EXPECT_EQ(m->flags, 2u);
  EXPECT_FALSE(m->has_build_id);
  EXPECT_EQ(m->filename, "/usr/lib/libc.so.6");
  EXPECT_TRUE(r.sample_id.has_tid && r.sample_id.has_time && r.sample_id.has_cpu &&
              r.sample_id.has_id);
  EXPECT_FALSE(r.sample_id.has_stream_id);
  EXPECT_EQ(r.sample_id.pid, 100u);
  EXPECT_EQ(r.sample_id.tid, 101u);
  EXPECT_EQ(r.sample_id.time, 5000u);
  EXPECT_EQ(r.sample_id.cpu, 1u);
  EXPECT_EQ(r.sample_id.id, 42u);
}

TEST(RecordReaderTest, ParsesHandPackedMmap2WithBuildId) {
  Packer p;
  p.Begin(kPerfRecordMmap2, kPerfMiscUser | kPerfMiscMmapBuildId);
  p.U32(7), p.U32(7);
  p.U64(0x400000), p.U64(0x1000), p.U64(0);
  p.bytes().push_back(3);  // build_id_size
  p.bytes().push_back(0);
  p.U16(0);
  for (int i = 0; i < 20; ++i) p.bytes().push_back(static_cast<uint8_t>(0xa0 + i));
  p.U32(5), p.U32(2);
  p.Str("/bin/x", 8);
  p.Trailer(7, 7, 1, 0, 0);
  p.Finish();
  std::vector<PerfRecord> records = ReadOk(p.bytes());
  ASSERT_EQ(records.size(), 1u);
  const auto& m = std::get<Mmap2Record>(records[0].body);
  EXPECT_TRUE(m.has_build_id);
  EXPECT_EQ(m.build_id_size, 3);
  EXPECT_EQ(m.build_id[0], 0xa0);
  EXPECT_EQ(m.build_id[19], 0xa0 + 19);
  EXPECT_EQ(m.filename, "/bin/x");
}

TEST(RecordReaderTest, ParsesHandPackedCommForkSwitchAuxAndOffsets) {
  Packer p;
  p.Begin(kPerfRecordComm, kPerfMiscCommExec);
  p.U32(10), p.U32(10);
  p.Str("worker", 8);
  p.Trailer(10, 10, 100, 0, 1);
  p.Finish();
  const uint64_t fork_offset = p.bytes().size();
  p.Begin(kPerfRecordFork, 0);
  p.U32(10), p.U32(10), p.U32(11), p.U32(10), p.U64(150);
  p.Trailer(10, 10, 150, 0, 1);
  p.Finish();
  const uint64_t switch_offset = p.bytes().size();
  p.Begin(kPerfRecordSwitchCpuWide, kPerfMiscSwitchOut | kPerfMiscSwitchOutPreempt);
  p.U32(20), p.U32(21);
  p.Trailer(10, 11, 200, 3, 1);
  p.Finish();
  p.Begin(kPerfRecordAux, 0);
  p.U64(0x1000), p.U64(0x800), p.U64(kPerfAuxFlagTruncated | kPerfAuxFlagCollision);
  p.Trailer(10, 11, 250, 3, 1);
  p.Finish();
  p.Begin(kPerfRecordSwitch, 0);  // switch in
  p.Trailer(10, 11, 260, 2, 1);
  p.Finish();
  std::vector<PerfRecord> records = ReadOk(p.bytes());
  ASSERT_EQ(records.size(), 5u);

  const auto& comm = std::get<CommRecord>(records[0].body);
  EXPECT_EQ(comm.comm, "worker");
  EXPECT_TRUE(comm.exec);

  EXPECT_EQ(records[1].offset, fork_offset);
  const auto& fork = std::get<ForkRecord>(records[1].body);
  EXPECT_EQ(fork.pid, 10u);
  EXPECT_EQ(fork.ppid, 10u);
  EXPECT_EQ(fork.tid, 11u);
  EXPECT_EQ(fork.ptid, 10u);
  EXPECT_EQ(fork.time, 150u);

  EXPECT_EQ(records[2].offset, switch_offset);
  const auto& sw = std::get<SwitchCpuWideRecord>(records[2].body);
  EXPECT_TRUE(sw.out);
  EXPECT_TRUE(sw.preempt);
  EXPECT_EQ(sw.next_prev_pid, 20u);
  EXPECT_EQ(sw.next_prev_tid, 21u);
  EXPECT_EQ(records[2].sample_id.cpu, 3u);

  const auto& aux = std::get<AuxRecord>(records[3].body);
  EXPECT_EQ(aux.aux_offset, 0x1000u);
  EXPECT_EQ(aux.aux_size, 0x800u);
  EXPECT_TRUE(aux.truncated());
  EXPECT_TRUE(aux.collision());
  EXPECT_FALSE(aux.partial());
  EXPECT_FALSE(aux.overwrite());

  const auto& in = std::get<SwitchRecord>(records[4].body);
  EXPECT_FALSE(in.out);
  EXPECT_EQ(records[4].sample_id.cpu, 2u);
}

TEST(RecordReaderTest, SampleIdWithIdStreamIdAndNoSampleIdAll) {
  const uint64_t type = kPerfSampleTid | kPerfSampleTime | kPerfSampleId |
                        kPerfSampleStreamId | kPerfSampleCpu;
  Packer p;
  p.Begin(kPerfRecordItraceStart, 0);
  p.U32(5), p.U32(6);
  p.U32(5), p.U32(6), p.U64(99), p.U64(77), p.U64(88), p.U32(1), p.U32(0);
  p.Finish();
  std::vector<PerfRecord> records = ReadOk(p.bytes(), RecordFormat{type, true});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].sample_id.id, 77u);
  EXPECT_EQ(records[0].sample_id.stream_id, 88u);
  EXPECT_EQ(records[0].sample_id.time, 99u);
  EXPECT_EQ(std::get<ItraceStartRecord>(records[0].body).tid, 6u);

  // Without sample_id_all the same bytes are a body with extra bytes at its end: the
  // fixed fields still parse and no trailer is claimed.
  records = ReadOk(p.bytes(), RecordFormat{type, false});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].sample_id.has_time);
  EXPECT_FALSE(records[0].sample_id.has_tid);
}

TEST(RecordReaderTest, SkipsUnknownAndUnmodelledTypesBySize) {
  Packer p;
  p.Begin(30, 0);  // a future kernel type (below the perf tool range)
  p.U64(1), p.U64(2), p.U64(3), p.U64(4), p.U64(5);
  p.Finish();
  p.Begin(kPerfRecordSample, 0);  // no sample_id trailer on SAMPLE
  p.U64(0xdead);
  p.Finish();
  p.Begin(kPerfRecordLost, 0);
  p.U64(9), p.U64(1234);
  p.Trailer(1, 1, 10, 0, 9);
  p.Finish();
  absl::StatusOr<RecordList> list = ReadAllRecords(p.bytes(), "x", {});
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->records.size(), 3u);
  EXPECT_EQ(list->counters.other_records, 2u);
  EXPECT_EQ(list->counters.unknown_type_records, 1u);
  EXPECT_EQ(list->counters.by_type[30], 1u);
  // The unknown kernel type's last 32 bytes are taken as its sample_id trailer.
  EXPECT_EQ(std::get<OtherRecord>(list->records[0].body).payload.size(), 8u);
  EXPECT_EQ(list->records[0].sample_id.pid, 2u);
  EXPECT_EQ(std::get<OtherRecord>(list->records[1].body).payload.size(), 8u);
  const auto& lost = std::get<LostRecord>(list->records[2].body);
  EXPECT_EQ(lost.lost, 1234u);
  EXPECT_EQ(list->records[2].offset, 48u + 16u);
}

// A valid two-record stream to corrupt: COMM is 8 header + 8 pid/tid + 8 string + 32
// trailer bytes.
constexpr size_t kCommSize = 56;
std::vector<uint8_t> TwoComms() {
  Packer p;
  for (int i = 0; i < 2; ++i) {
    p.Begin(kPerfRecordComm, 0);
    p.U32(1), p.U32(1);
    p.Str("abcdefg", 8);
    p.Trailer(1, 1, 10, 0, 0);
    p.Finish();
  }
  return p.bytes();
}

TEST(RecordReaderTest, TruncatedHeaderNamesSourceAndOffset) {
  std::vector<uint8_t> bytes = TwoComms();
  ASSERT_EQ(bytes.size(), 2 * kCommSize);
  bytes.resize(kCommSize + 5);
  EXPECT_THAT(ReadError(bytes),
              AllOf(HasSubstr("bad.data"), HasSubstr("byte offset 56"), HasSubstr("truncated header")));
}

TEST(RecordReaderTest, TruncatedBodyNamesRecordType) {
  std::vector<uint8_t> bytes = TwoComms();
  bytes.resize(bytes.size() - 8);
  EXPECT_THAT(ReadError(bytes),
              AllOf(HasSubstr("byte offset 56"), HasSubstr("COMM record"), HasSubstr("truncated")));
}

TEST(RecordReaderTest, ZeroAndTinySizesAreErrors) {
  std::vector<uint8_t> bytes = TwoComms();
  bytes[kCommSize + 6] = 0;
  bytes[kCommSize + 7] = 0;
  EXPECT_THAT(ReadError(bytes), HasSubstr("size 0 is smaller than the 8-byte header"));
  bytes[kCommSize + 6] = 4;
  EXPECT_THAT(ReadError(bytes), HasSubstr("size 4"));
}

TEST(RecordReaderTest, SizeNotMultipleOfEightIsAnError) {
  std::vector<uint8_t> bytes = TwoComms();
  bytes[6] = 44;  // first record claims 44 bytes
  EXPECT_THAT(ReadError(bytes), AllOf(HasSubstr("byte offset 0"), HasSubstr("not a multiple of 8")));
}

TEST(RecordReaderTest, StringWithoutNulIsAnError) {
  std::vector<uint8_t> bytes = TwoComms();
  // Fill the second COMM's string field (8 bytes after pid/tid) with non-zero bytes.
  for (int i = 0; i < 8; ++i) bytes[kCommSize + 16 + i] = 'x';
  EXPECT_THAT(ReadError(bytes), AllOf(HasSubstr("byte offset 56"), HasSubstr("comm not NUL-terminated")));
}

TEST(RecordReaderTest, RecordTooSmallForTrailerIsAnError) {
  Packer p;
  p.Begin(kPerfRecordSwitch, 0);
  p.U64(0);  // 8 bytes, trailer needs 32
  p.Finish();
  EXPECT_THAT(ReadError(p.bytes()), HasSubstr("sample_id trailer"));
}

TEST(RecordReaderTest, CountsLargerThanTheRecordAreErrors) {
  Packer ns;
  ns.Begin(kPerfRecordNamespaces, 0);
  ns.U32(1), ns.U32(1), ns.U64(1000000);
  ns.Trailer(1, 1, 1, 0, 0);
  ns.Finish();
  EXPECT_THAT(ReadError(ns.bytes()), HasSubstr("nr_namespaces"));
  Packer poke;
  poke.Begin(kPerfRecordTextPoke, 0);
  poke.U64(0xffffffff81000000), poke.U16(100), poke.U16(100), poke.U32(0);
  poke.Trailer(0, 0, 1, 0, 0);
  poke.Finish();
  EXPECT_THAT(ReadError(poke.bytes()), HasSubstr("TEXT_POKE"));
}

TEST(RecordReaderTest, ErrorIsStickyAndEndIsNullopt) {
  std::vector<uint8_t> bytes = TwoComms();
  RecordReader ok_reader(bytes, "s", {});
  EXPECT_TRUE(ok_reader.Next()->has_value());
  EXPECT_TRUE(ok_reader.Next()->has_value());
  EXPECT_FALSE(ok_reader.Next()->has_value());
  bytes.resize(bytes.size() - 1);
  RecordReader bad_reader(bytes, "s", {});
  EXPECT_TRUE(bad_reader.Next().ok());
  EXPECT_FALSE(bad_reader.Next().ok());
  EXPECT_FALSE(bad_reader.Next().ok());
  EXPECT_EQ(bad_reader.offset(), kCommSize);
  RecordList partial = ReadRecordsUpToError(bytes, "s", {});
  EXPECT_EQ(partial.records.size(), 1u);
  EXPECT_FALSE(partial.error.ok());
}

TEST(RecordReaderTest, EveryTruncationAndByteFlipIsHandled) {
  // Nothing may read out of bounds (ASan build) whatever the bytes; and every prefix
  // that isn't a whole number of records must be an error.
  std::vector<uint8_t> bytes = TwoComms();
  for (size_t len = 0; len <= bytes.size(); ++len) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + len);
    absl::StatusOr<RecordList> list = ReadAllRecords(prefix, "p", {});
    EXPECT_EQ(list.ok(), len == 0 || len == kCommSize || len == 2 * kCommSize) << len;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t value : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x0a}}) {
      std::vector<uint8_t> flipped = bytes;
      flipped[i] = value;
      (void)ReadRecordsUpToError(flipped, "f", {});
    }
  }
}

}  // namespace
}  // namespace ptd
