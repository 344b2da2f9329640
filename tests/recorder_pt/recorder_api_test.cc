// The public librecorder API (ptd/recorder.h, ptd/trace_scope.h), linked as a user would,
// on this machine (no PT: clear error) and against the fake kernel (full flow).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <random>

#include "common/file_util.h"
#include "common/trace_meta.h"
#include "ptd/recorder.h"
#include "ptd/trace_scope.h"
#include "tests/recorder_pt/fake_ring_factory.h"
#include "tests/recorder_pt/fake_sysfs.h"
#include "tests/testing/test_util.h"

namespace ptd {
namespace {

using ::testing::HasSubstr;

constexpr char kNoPt[] = "no intel_pt PMU on this machine (AMD, VM, or old kernel); use --emulate";

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (auto& b : out) b = static_cast<char>(rng() | 1);
  return out;
}

void Produce(pt::testing::FakePtKernel& k, const std::string& bytes) {
  k.WriteTrace(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

TEST(RecorderApiTest, StartOnThisMachineSaysThereIsNoIntelPt) {
  if (IsDirectory("/sys/bus/event_source/devices/intel_pt")) GTEST_SKIP() << "intel_pt present";
  RecorderConfig config;
  config.backend = Backend::kHardware;
  config.command = {"/bin/true"};
  Recorder recorder(config);
  absl::Status st = recorder.Start();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(st.message()), std::string("RecorderConfig.backend = hardware: ") + kNoPt);
  EXPECT_FALSE(recorder.Snapshot().ok());
  EXPECT_FALSE(recorder.WriteTo("/nonexistent/x").ok());
}

class RecorderApiFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pt::testing::FakePtSysfs().WriteTo(sysfs_.path());
    factory_ = std::make_shared<pt::testing::FakeRingFactory>();
    config_.sysfs_root = sysfs_.path();
    config_.ring_factory = factory_;
    config_.snapshot_size = 8 * 4096;
  }
  ptd::testing::TempDir sysfs_;
  ptd::testing::TempDir out_;
  std::shared_ptr<pt::testing::FakeRingFactory> factory_;
  RecorderConfig config_;
};

TEST_F(RecorderApiFakeTest, StartSnapshotStopWriteTo) {
  config_.command = {"/bin/sleep", "30"};
  Recorder recorder(config_);
  ASSERT_TRUE(recorder.Start().ok());
  EXPECT_GT(recorder.target_pid(), 0);
  ASSERT_EQ(factory_->size(), 1u);  // per-thread by default: one ring
  Produce(factory_->kernel(0), Bytes(4000, 1));
  ASSERT_TRUE(recorder.Snapshot().ok());
  Produce(factory_->kernel(0), Bytes(6000, 2));
  ASSERT_TRUE(recorder.Stop().ok());
  const std::string dir = out_.Sub("api.trace");
  ASSERT_TRUE(recorder.WriteTo(dir).ok());
  auto meta = ReadTraceMeta(dir);
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_EQ(meta->streams.size(), 1u);
  const PtStream& s = meta->streams[0];
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].reason, "api");
  EXPECT_EQ(s.chunks[1].reason, "stop");
  auto bytes = ReadFileToString(dir + "/" + s.file);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, Bytes(4000, 1) + Bytes(6000, 2));
  // A second copy is allowed; an existing directory needs force.
  EXPECT_FALSE(recorder.WriteTo(dir).ok());
  EXPECT_TRUE(recorder.WriteTo(dir, /*force=*/true).ok());
}

TEST_F(RecorderApiFakeTest, FullTraceModeDrainsInTheBackground) {
  config_.command = {"/bin/sleep", "30"};
  config_.snapshot = false;
  config_.buffer_size = 4 * 4096;
  Recorder recorder(config_);
  ASSERT_TRUE(recorder.Start().ok());
  // Four ringfuls through a one-ring buffer: only possible if something drains it.
  std::string all;
  for (int i = 0; i < 16; ++i) {
    std::string piece = Bytes(4096, 10 + i);
    size_t kept = 0;
    while (kept == 0) {
      kept = factory_->kernel(0).WriteTrace(
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(piece.data()), piece.size()));
      if (kept == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    all += piece.substr(0, kept);
    if (kept < piece.size()) break;  // the kernel dropped the rest: recorded as truncation
  }
  ASSERT_TRUE(recorder.Stop().ok());
  const std::string dir = out_.Sub("linear.trace");
  ASSERT_TRUE(recorder.WriteTo(dir).ok());
  auto meta = ReadTraceMeta(dir);
  ASSERT_TRUE(meta.ok());
  auto bytes = ReadFileToString(dir + "/" + meta->streams[0].file);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, all);
  EXPECT_GT(all.size(), config_.buffer_size);
}

TEST_F(RecorderApiFakeTest, TraceScopeTracesTheCallingThread) {
  const std::string dir = out_.Sub("scope.trace");
  {
    TraceScope scope(dir, config_);
    ASSERT_TRUE(scope.status().ok()) << scope.status();
    ASSERT_EQ(factory_->size(), 1u);
    Produce(factory_->kernel(0), Bytes(2000, 3));
  }
  auto meta = ReadTraceMeta(dir);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->pids, std::vector<int>{getpid()});
  ASSERT_EQ(meta->streams.size(), 1u);
  EXPECT_EQ(meta->streams[0].tid, static_cast<int>(syscall(SYS_gettid)));
  EXPECT_EQ(factory_->enables(), 1);
}

TEST(TraceScopeTest, OnThisMachineRecordsNothingAndSaysWhy) {
  if (IsDirectory("/sys/bus/event_source/devices/intel_pt")) GTEST_SKIP() << "intel_pt present";
  ptd::testing::TempDir out;
  {
    TraceScope scope(out.Sub("x.trace"));
    EXPECT_EQ(std::string(scope.status().message()),
              std::string("tracing the calling thread needs Intel PT: ") + kNoPt);
  }
  EXPECT_FALSE(PathExists(out.Sub("x.trace")));
}

TEST(RecorderExampleTest, DocumentedExampleBuildsAndReportsTheMissingPmu) {
  if (IsDirectory("/sys/bus/event_source/devices/intel_pt")) GTEST_SKIP() << "intel_pt present";
  ptd::testing::TempDir out;
  auto r = ptd::testing::RunCommand({std::string(PTD_BINARY_DIR) + "/tests/recorder_pt/ptd-recorder-example",
                                     out.Sub("ex.trace"), "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(kNoPt));
}

}  // namespace
}  // namespace ptd
