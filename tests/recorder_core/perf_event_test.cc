// The RAII wrappers against the real kernel (software events work on this VM).
#include "recorder/sideband/perf_event.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <variant>

#include "gtest/gtest.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/perf_mmap.h"
#include "recorder/sideband/sideband_events.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {

TEST(SidebandEventsTest, DummyAttrAsksForEverySidebandRecord) {
  SidebandEventOptions options;
  options.per_cpu = true;
  options.clockid = CLOCK_MONOTONIC;
  options.enable_on_exec = true;
  perf_event_attr attr = DummySidebandAttr(options);
  EXPECT_EQ(attr.type, static_cast<uint32_t>(PERF_TYPE_SOFTWARE));
  EXPECT_EQ(attr.config, static_cast<uint64_t>(PERF_COUNT_SW_DUMMY));
  EXPECT_EQ(attr.size, sizeof(attr));
  EXPECT_EQ(attr.sample_type, static_cast<uint64_t>(PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                    PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER));
  EXPECT_TRUE(attr.mmap && attr.mmap2 && attr.comm && attr.comm_exec && attr.task &&
              attr.context_switch && attr.sample_id_all);
  EXPECT_TRUE(attr.inherit);
  EXPECT_TRUE(attr.disabled);
  EXPECT_TRUE(attr.enable_on_exec);
  EXPECT_TRUE(attr.use_clockid);
  EXPECT_EQ(attr.clockid, CLOCK_MONOTONIC);

  options.per_cpu = false;
  options.clockid = -1;
  options.enable_on_exec = false;
  attr = DummySidebandAttr(options);
  EXPECT_FALSE(attr.inherit);  // the kernel refuses to mmap inherited per-thread events
  EXPECT_FALSE(attr.use_clockid);
  EXPECT_FALSE(attr.enable_on_exec);
}

TEST(PerfEventTest, OpenErrorsNameTheEvent) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = 0x7fff0000;  // no such PMU
  absl::StatusOr<PerfEvent> ev = PerfEvent::Open(attr, 0, -1);
  ASSERT_FALSE(ev.ok());
  EXPECT_NE(ev.status().message().find("type=2147418112"), absl::string_view::npos)
      << ev.status();
  PerfEvent closed;
  EXPECT_FALSE(closed.valid());
  EXPECT_FALSE(closed.Enable().ok());
}

TEST(PerfMmapTest, RingSizesArePowersOfTwoPages) {
  EXPECT_EQ(RoundUpToRingSize(1), PageSize());
  EXPECT_EQ(RoundUpToRingSize(PageSize() * 3), PageSize() * 4);
  EXPECT_EQ(RoundUpToRingSize(PageSize() * 4), PageSize() * 4);
  SidebandEventOptions options;
  options.per_cpu = false;
  absl::StatusOr<PerfEvent> ev = PerfEvent::Open(DummySidebandAttr(options), 0, -1);
  ASSERT_TRUE(ev.ok()) << ev.status();
  absl::StatusOr<PerfMmap> bad = PerfMmap::Map(*ev, PageSize() * 3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

// The whole chain on this thread: open, mmap, enable, cause a COMM and an executable
// mmap, drain, parse. Proves the kernel's bytes come out of DataRing as records.
TEST(PerfEventTest, DummyEventOnThisThreadRecordsCommAndMmap) {
  SidebandEventOptions options;
  options.per_cpu = false;
  absl::StatusOr<PerfEvent> ev = PerfEvent::Open(DummySidebandAttr(options), 0, -1);
  ASSERT_TRUE(ev.ok()) << ev.status();
  absl::StatusOr<PerfMmap> mm = PerfMmap::Map(*ev, RoundUpToRingSize(64 << 10));
  ASSERT_TRUE(mm.ok()) << mm.status();
  absl::StatusOr<uint64_t> id = ev->Id();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(ev->Enable().ok());

  char old_name[16] = {};
  prctl(PR_GET_NAME, old_name);
  prctl(PR_SET_NAME, "ptd-ring-test");
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(code, MAP_FAILED);
  prctl(PR_SET_NAME, old_name);
  ASSERT_TRUE(ev->Disable().ok());

  DataRing ring(mm->header(), mm->data(), mm->data_size());
  std::string out;
  DataRingStats stats;
  ASSERT_TRUE(ring.Drain(&out, &stats).ok());
  munmap(code, 4096);
  absl::StatusOr<RecordList> list = ReadAllRecords(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(out.data()), out.size()), "ring",
      RecordFormat{});
  ASSERT_TRUE(list.ok()) << list.status();
  bool saw_comm = false, saw_mmap = false;
  for (const PerfRecord& r : list->records) {
    EXPECT_EQ(r.sample_id.id, *id);
    EXPECT_EQ(r.sample_id.tid, static_cast<uint32_t>(gettid()));
    if (auto* c = std::get_if<CommRecord>(&r.body)) saw_comm |= c->comm == "ptd-ring-test";
    if (auto* m = std::get_if<Mmap2Record>(&r.body)) {
      saw_mmap |= m->addr == reinterpret_cast<uint64_t>(code) && m->len == 4096;
    }
  }
  EXPECT_TRUE(saw_comm);
  EXPECT_TRUE(saw_mmap);
  EXPECT_EQ(stats.records, list->records.size());
}

// A one-page ring overflowed on purpose: the kernel drops what does not fit and, once
// there is room again, writes PERF_RECORD_LOST with the count. Every mmap made is either
// read back or counted as lost; none disappears silently.
TEST(PerfEventTest, OverflowedRingCountsEveryLostRecord) {
  SidebandEventOptions options;
  options.per_cpu = false;
  perf_event_attr attr = DummySidebandAttr(options);
  // Only MMAP2 records then: context switches (this machine is busy) would be lost too
  // and make the count below depend on scheduling.
  attr.context_switch = 0;
  absl::StatusOr<PerfEvent> ev = PerfEvent::Open(attr, 0, -1);
  ASSERT_TRUE(ev.ok()) << ev.status();
  absl::StatusOr<PerfMmap> mm = PerfMmap::Map(*ev, PageSize());
  ASSERT_TRUE(mm.ok()) << mm.status();
  DataRing ring(mm->header(), mm->data(), mm->data_size());
  ASSERT_TRUE(ev->Enable().ok());
  constexpr int kMappings = 200;  // ~100 bytes of MMAP2 each: far more than one page
  std::vector<void*> pages;
  std::string out;
  DataRingStats stats;
  for (int i = 0; i < kMappings; ++i) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    pages.push_back(p);
    // Drain once in the middle: the kernel reports what it dropped so far with the
    // next record that fits.
    if (i == kMappings / 2) {
      ASSERT_TRUE(ring.Drain(&out, &stats).ok());
    }
  }
  ASSERT_TRUE(ring.Drain(&out, &stats).ok());
  void* last = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(last, MAP_FAILED);
  pages.push_back(last);
  ASSERT_TRUE(ev->Disable().ok());
  ASSERT_TRUE(ring.Drain(&out, &stats).ok());
  for (void* p : pages) munmap(p, 4096);

  absl::StatusOr<RecordList> list = ReadAllRecords(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(out.data()), out.size()), "ring",
      RecordFormat{});
  ASSERT_TRUE(list.ok()) << list.status();
  uint64_t mmaps_seen = 0, lost_in_records = 0;
  for (const PerfRecord& r : list->records) {
    if (auto* m = std::get_if<Mmap2Record>(&r.body)) mmaps_seen += m->filename == "//anon";
    if (auto* l = std::get_if<LostRecord>(&r.body)) lost_in_records += l->lost;
  }
  EXPECT_GT(stats.lost_records, 0u);
  EXPECT_EQ(stats.lost_records, lost_in_records);
  EXPECT_EQ(mmaps_seen + stats.lost_records, static_cast<uint64_t>(kMappings + 1));
}

}  // namespace
}  // namespace ptd
