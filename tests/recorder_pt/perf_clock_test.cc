// The perf clock from user space: the event page's TSC conversion read consistently, the
// measured offset without it, and what a recording does with either.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <cstdio>

#include <cstring>
#include <chrono>
#include <thread>

#include "recorder/sideband/data_ring.h"
#include "recorder/sideband/perf_event.h"
#include "recorder/sideband/perf_mmap.h"
#include "recorder/pt/perf_clock.h"
#include "recorder/sideband/sideband_events.h"
#include "sideband/record_reader.h"
#include "tests/recorder_pt/pt_recording_fixture.h"

namespace ptd::pt {
namespace {

TEST_F(PtRecordingTest, AFailedPerfClockProbeIsSaidNotTakenAsZero) {
  // The fake's event page offers no TSC conversion (cap_user_time_zero 0), as on VMs
  // without a stable TSC: the recorder needs the measured perf clock offset.
  options_.measure_perf_clock_offset = []() -> absl::StatusOr<int64_t> {
    return absl::PermissionDeniedError("perf_event_open(dummy) failed: Permission denied");
  };
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_THAT(meta.notes, ::testing::Contains(::testing::AllOf(::testing::HasSubstr("perf clock"),
                                                             ::testing::HasSubstr("Permission denied"),
                                                             ::testing::HasSubstr("CLOCK_MONOTONIC"))));
}

TEST_F(PtRecordingTest, TheMeasuredPerfClockOffsetStampsTheRecording) {
  // A large offset makes the recording's times land near it: it is applied, not dropped.
  static constexpr int64_t kOffset = int64_t{1} << 60;
  options_.measure_perf_clock_offset = []() -> absl::StatusOr<int64_t> { return kOffset; };
  auto rec = Start();
  ASSERT_TRUE(rec.ok()) << rec.status();
  TraceMeta meta;
  ASSERT_TRUE((*rec)->Finish("control", {}, &meta).ok());
  EXPECT_GE(meta.start_ns, static_cast<uint64_t>(kOffset));
  EXPECT_THAT(meta.notes, ::testing::Not(::testing::Contains(::testing::HasSubstr("perf clock"))));
}

// The kernel makes the page's lock odd while it rewrites the conversion
// (perf_event_update_userpage: ++lock, write, ++lock), and perf's reader
// (perf_read_tsc_conversion) retries until it sees the same even value twice. A page left
// odd with half-written values must not be read; the writer finishes it a little later.
TEST(PerfClockTest, TimeConversionIsNotReadWhileTheKernelRewritesIt) {
  perf_event_mmap_page page;
  std::memset(&page, 0, sizeof(page));
  page.lock = 1;  // mid-update: zero and mult not written yet
  page.cap_user_time_zero = 1;
  page.time_mult = 1;
  page.time_shift = 0;
  page.time_zero = 0;
  std::thread kernel([&page] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    page.time_zero = 1ull << 62;
    __atomic_store_n(&page.lock, 2u, __ATOMIC_RELEASE);
  });
  const uint64_t now = EventClockNow(&page, 0);
  kernel.join();
  EXPECT_GE(now, 1ull << 62) << "read the half-written conversion";
}

TEST(PerfClockTest, WithoutTimeZeroTheEventClockIsTheKernelsPerfClock) {
  // A software event's page has no cap_user_time_zero on VMs; the kernel still stamps
  // records with local_clock(), not CLOCK_MONOTONIC. A record it writes between two
  // EventClockNow() reads must fall between them (1 ms of slack for the measurement).
  perf_event_mmap_page page;
  std::memset(&page, 0, sizeof(page));
  absl::StatusOr<int64_t> offset = MeasurePerfClockOffset();
  ASSERT_TRUE(offset.ok()) << offset.status();
  std::printf("perf clock - CLOCK_MONOTONIC here: %lld ns\n", static_cast<long long>(*offset));
  SidebandEventOptions options;
  options.per_cpu = false;
  perf_event_attr attr = DummySidebandAttr(options);
  absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, 0, -1);
  ASSERT_TRUE(event.ok()) << event.status();
  absl::StatusOr<PerfMmap> ring = PerfMmap::Map(*event, PageSize());
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_TRUE(event->Enable().ok());
  const uint64_t before = EventClockNow(&page, *offset);
  ASSERT_EQ(prctl(PR_SET_NAME, "clock-probe"), 0);
  const uint64_t after = EventClockNow(&page, *offset);
  ASSERT_TRUE(event->Disable().ok());
  std::string bytes;
  DataRingStats stats;
  ASSERT_TRUE(DataRing(ring->header(), ring->data(), ring->data_size()).Drain(&bytes, &stats).ok());
  RecordFormat format;
  format.sample_type = kSidebandSampleType;
  format.sample_id_all = true;
  auto records = ReadAllRecords(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "probe",
      format);
  ASSERT_TRUE(records.ok()) << records.status();
  uint64_t stamped = 0;
  for (const PerfRecord& r : records->records) {
    if (r.type == PERF_RECORD_COMM) stamped = r.sample_id.time;
  }
  ASSERT_NE(stamped, 0u);
  constexpr uint64_t kSlack = 1000000;
  EXPECT_LE(before, stamped + kSlack);
  EXPECT_GE(after + kSlack, stamped);
}

}  // namespace
}  // namespace ptd::pt
