// RecordBuilder: every record type survives encode → RecordReader unchanged, and for a
// few records the bytes equal an independent hand packing of the kernel layout.
#include "sideband/record_builder.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {

SampleId Sid(uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu, uint64_t id) {
  SampleId s;
  s.has_tid = s.has_time = s.has_cpu = s.has_id = true;
  s.pid = pid, s.tid = tid, s.time = time, s.cpu = cpu, s.id = id;
  return s;
}

std::vector<PerfRecord> OneOfEachType() {
  std::vector<PerfRecordBody> bodies;
  bodies.push_back(MmapRecord{1, 2, 0x400000, 0x1000, 0, "/bin/a", false});
  bodies.push_back(MmapRecord{1, 2, 0x600000, 0x1000, 0x1000, "/bin/a", true});
  Mmap2Record m2;
  m2.pid = 1, m2.tid = 2, m2.addr = 0x7f00, m2.len = 0x2000, m2.pgoff = 0x3000;
  m2.maj = 8, m2.min = 3, m2.ino = 999, m2.ino_generation = 4, m2.prot = 5, m2.flags = 2;
  m2.filename = "/usr/lib/x86_64-linux-gnu/libm.so.6";
  bodies.push_back(m2);
  Mmap2Record b = m2;
  b.maj = b.min = 0, b.ino = b.ino_generation = 0;
  b.has_build_id = true, b.build_id_size = 20;
  for (int i = 0; i < 20; ++i) b.build_id[i] = static_cast<uint8_t>(i * 7);
  b.filename = "[vdso]";
  bodies.push_back(b);
  bodies.push_back(CommRecord{1, 1, "exactly8", true});   // 8 chars: NUL needs 8 more
  bodies.push_back(CommRecord{1, 2, "", false});
  bodies.push_back(ForkRecord{1, 1, 2, 1, 77});
  bodies.push_back(ExitRecord{1, 1, 2, 2, 78});
  bodies.push_back(SwitchRecord{true, true});
  bodies.push_back(SwitchRecord{false, false});
  bodies.push_back(SwitchCpuWideRecord{3, 4, true, false});
  bodies.push_back(SwitchCpuWideRecord{0, 0, false, false});
  bodies.push_back(ItraceStartRecord{1, 2});
  bodies.push_back(AuxRecord{0x10000, 0x4000, kPerfAuxFlagOverwrite | kPerfAuxFlagPartial});
  bodies.push_back(LostRecord{5, 17});
  bodies.push_back(LostSamplesRecord{3});
  bodies.push_back(ThrottleRecord{9, 1, 2, false});
  bodies.push_back(ThrottleRecord{10, 1, 2, true});
  bodies.push_back(NamespacesRecord{1, 2, {{1, 2}, {3, 4}, {5, 6}}});
  bodies.push_back(KsymbolRecord{0xffffffffc0000000, 256, 1, 0, "bpf_prog_abc"});
  bodies.push_back(BpfEventRecord{1, 0, 33, {1, 2, 3, 4, 5, 6, 7, 8}});
  bodies.push_back(CgroupRecord{12, "/sys/fs/cgroup/user.slice"});
  bodies.push_back(TextPokeRecord{0xffffffff81000000, {0x0f, 0x1f, 0x44}, {0xe8, 1, 2, 3, 4}});
  bodies.push_back(AuxOutputHwIdRecord{6});
  std::vector<PerfRecord> records;
  uint64_t time = 1000;
  for (PerfRecordBody& body : bodies) {
    PerfRecord r;
    r.body = std::move(body);
    r.type = RecordTypeOf(r.body);
    r.sample_id = Sid(1, 2, time++, 1, 55);
    records.push_back(std::move(r));
  }
  PerfRecord other;  // not modelled: READ
  other.type = kPerfRecordRead;
  other.body = OtherRecord{{1, 2, 3, 4, 5, 6, 7, 8}};
  other.sample_id = Sid(1, 2, time++, 1, 55);
  records.push_back(other);
  return records;
}

TEST(RecordBuilderTest, EveryTypeRoundTripsThroughTheReader) {
  RecordBuilder builder;
  std::vector<PerfRecord> expected = OneOfEachType();
  for (const PerfRecord& r : expected) builder.Append(r);
  absl::StatusOr<RecordList> list = ReadAllRecords(builder.bytes(), "built", {});
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->records.size(), expected.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const PerfRecord& got = list->records[i];
    SCOPED_TRACE(PerfRecordTypeName(got.type));
    EXPECT_EQ(got.type, expected[i].type);
    EXPECT_EQ(got.offset, offset);
    EXPECT_EQ(got.size % 8, 0);
    EXPECT_TRUE(got.body == expected[i].body);
    EXPECT_TRUE(got.sample_id == expected[i].sample_id);
    offset += got.size;
  }
  EXPECT_EQ(offset, builder.bytes().size());
  // Every kernel record type the reader models appears.
  for (uint32_t type = kPerfRecordMmap; type <= kPerfRecordAuxOutputHwId; ++type) {
    if (type == kPerfRecordSample) continue;
    EXPECT_GT(list->counters.by_type[type], 0u) << PerfRecordTypeName(type);
  }
}

TEST(RecordBuilderTest, RoundTripsWithOtherSampleTypes) {
  for (RecordFormat format :
       {RecordFormat{kPerfSampleTid | kPerfSampleTime | kPerfSampleId | kPerfSampleStreamId |
                         kPerfSampleCpu,
                     true},
        RecordFormat{kPerfSampleTime, true}, RecordFormat{kSidebandSampleType, false}}) {
    RecordBuilder builder(format);
    std::vector<PerfRecord> input = OneOfEachType();
    for (PerfRecord& r : input) {
      r.sample_id.has_stream_id = true;
      r.sample_id.stream_id = 4;
      builder.Append(r);
    }
    absl::StatusOr<RecordList> list = ReadAllRecords(builder.bytes(), "built", format);
    ASSERT_TRUE(list.ok()) << list.status();
    ASSERT_EQ(list->records.size(), input.size());
    for (size_t i = 0; i < input.size(); ++i) {
      EXPECT_TRUE(list->records[i].body == input[i].body) << i;
      const SampleId& got = list->records[i].sample_id;
      EXPECT_EQ(got.has_time, format.sample_id_all);
      if (format.sample_id_all) {
        EXPECT_EQ(got.time, input[i].sample_id.time);
      }
      EXPECT_EQ(got.has_tid, format.sample_id_all && (format.sample_type & kPerfSampleTid));
      if (got.has_stream_id) {
        EXPECT_EQ(got.stream_id, 4u);
      }
    }
  }
}

// Hand packing of the layouts in linux/perf_event.h, independent of the builder.
void Put(std::vector<uint8_t>& out, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  Put(out, &v, sizeof v);
}

TEST(RecordBuilderTest, BytesMatchHandPackedComm) {
  RecordBuilder builder;
  builder.Append(CommRecord{42, 43, "sleepy", false}, Sid(42, 43, 0x1122, 1, 9));
  std::vector<uint8_t> expected;
  Put<uint32_t>(expected, 3);      // PERF_RECORD_COMM
  Put<uint16_t>(expected, 0);      // misc
  Put<uint16_t>(expected, 8 + 8 + 8 + 32);
  Put<uint32_t>(expected, 42);
  Put<uint32_t>(expected, 43);
  Put(expected, "sleepy\0\0", 8);  // NUL + padding to 8
  Put<uint32_t>(expected, 42), Put<uint32_t>(expected, 43);
  Put<uint64_t>(expected, 0x1122);
  Put<uint32_t>(expected, 1), Put<uint32_t>(expected, 0);
  Put<uint64_t>(expected, 9);
  EXPECT_EQ(builder.bytes(), expected);
}

TEST(RecordBuilderTest, BytesMatchHandPackedMmap2AndSwitchCpuWide) {
  RecordBuilder builder;
  Mmap2Record m;
  m.pid = 5, m.tid = 5, m.addr = 0x1000, m.len = 0x2000, m.pgoff = 0;
  m.maj = 1, m.min = 2, m.ino = 3, m.ino_generation = 4, m.prot = 5, m.flags = 2;
  m.filename = "/lib/ld-linux-x86-64.so.2";  // 25 chars → 32 bytes with NUL and padding
  builder.Append(m, Sid(5, 5, 7, 0, 1));
  builder.Append(SwitchCpuWideRecord{6, 7, true, true}, Sid(5, 5, 8, 0, 1));
  std::vector<uint8_t> expected;
  Put<uint32_t>(expected, 10);
  Put<uint16_t>(expected, 2);  // PERF_RECORD_MISC_USER
  Put<uint16_t>(expected, 8 + 64 + 32 + 32);
  Put<uint32_t>(expected, 5), Put<uint32_t>(expected, 5);
  Put<uint64_t>(expected, 0x1000), Put<uint64_t>(expected, 0x2000), Put<uint64_t>(expected, 0);
  Put<uint32_t>(expected, 1), Put<uint32_t>(expected, 2);
  Put<uint64_t>(expected, 3), Put<uint64_t>(expected, 4);
  Put<uint32_t>(expected, 5), Put<uint32_t>(expected, 2);
  char name[32] = "/lib/ld-linux-x86-64.so.2";
  Put(expected, name, 32);
  Put<uint32_t>(expected, 5), Put<uint32_t>(expected, 5), Put<uint64_t>(expected, 7);
  Put<uint32_t>(expected, 0), Put<uint32_t>(expected, 0), Put<uint64_t>(expected, 1);
  Put<uint32_t>(expected, 15);
  Put<uint16_t>(expected, (1 << 13) | (1 << 14));  // SWITCH_OUT | SWITCH_OUT_PREEMPT
  Put<uint16_t>(expected, 8 + 8 + 32);
  Put<uint32_t>(expected, 6), Put<uint32_t>(expected, 7);
  Put<uint32_t>(expected, 5), Put<uint32_t>(expected, 5), Put<uint64_t>(expected, 8);
  Put<uint32_t>(expected, 0), Put<uint32_t>(expected, 0), Put<uint64_t>(expected, 1);
  EXPECT_EQ(builder.bytes(), expected);
}

TEST(RecordBuilderTest, MiscFlagsFollowTheBody) {
  PerfRecord r;
  r.misc = kPerfMiscCommExec | kPerfMiscUser;  // stale exec flag
  r.body = CommRecord{1, 1, "x", false};
  std::vector<uint8_t> bytes = EncodeRecord(r, {});
  uint16_t misc;
  std::memcpy(&misc, bytes.data() + 4, 2);
  EXPECT_EQ(misc, kPerfMiscUser);
}

}  // namespace
}  // namespace ptd
