// The backend `record` and the library choose: hardware PT when present and not asked
// otherwise, else Valgrind, else ptrace; attaching is ptrace's; unknown names refused.
#include "recorder/session/record_backend.h"

#include <stdlib.h>

#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "recorder/pt/pt_pmu.h"
#include "recorder/valgrind/valgrind_recorder.h"

namespace ptd {
namespace {

bool MachineHasPt() { return pt::DiscoverPtPmu().ok(); }

// The choice for `record --emulate[=emulator]` with `tweak` applied to the options.
absl::StatusOr<BackendChoice> ChooseEmulated(
    const std::string& emulator, const std::function<void(RecordOptions&)>& tweak = nullptr) {
  RecordOptions options;
  options.emulate = true;
  options.emulator = emulator;
  if (tweak) tweak(options);
  return ChooseBackend(options);
}

TEST(RecordBackendTest, UnknownEmulatorIsRefusedByName) {
  absl::StatusOr<BackendChoice> choice = ChooseEmulated("qemu");
  ASSERT_FALSE(choice.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(choice.status()));
  EXPECT_NE(choice.status().message().find("qemu"), std::string::npos);
}

// Options with which the emulator is ptrace, and what the choice's `why` must say.
struct PtraceCase {
  std::string name;
  std::string emulator;
  std::function<void(RecordOptions&)> tweak;
  std::string why;  // empty: not checked
};

class PtraceChoiceTest : public ::testing::TestWithParam<PtraceCase> {};

TEST_P(PtraceChoiceTest, PicksPtraceAndSaysWhy) {
  absl::StatusOr<BackendChoice> choice = ChooseEmulated(GetParam().emulator, GetParam().tweak);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->backend, RecordBackend::kPtrace);
  EXPECT_NE(choice->why.find(GetParam().why), std::string::npos) << choice->why;
}

INSTANTIATE_TEST_SUITE_P(
    RecordBackendTest, PtraceChoiceTest,
    ::testing::Values(PtraceCase{"PtraceWhenAskedFor", "ptrace", nullptr, ""},
                      PtraceCase{"PtraceOnlyOptionsPickPtraceWhenNoEmulatorIsNamed", "",
                                 [](RecordOptions& options) {
                                   options.command = {"/bin/true"};
                                   options.ground_truth_path = "truth.bin";
                                 },
                                 "--ground-truth"},
                      PtraceCase{"AttachingEmulatesWithPtraceEvenWhenValgrindIsThere", "",
                                 [](RecordOptions& options) { options.pids = {1}; }, "cannot attach"}),
    [](const ::testing::TestParamInfo<PtraceCase>& info) { return info.param.name; });

TEST(RecordBackendTest, ValgrindCannotAttach) {
  absl::StatusOr<BackendChoice> choice =
      ChooseEmulated("valgrind", [](RecordOptions& options) { options.pids = {1}; });
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("--emulate=ptrace"), std::string::npos);
}

TEST(RecordBackendTest, WithoutPtTheBestEmulatorIsPickedAndSaid) {
  if (MachineHasPt()) GTEST_SKIP() << "this machine has Intel PT: record would use it";
  std::string why_not;
  const bool valgrind = ValgrindAvailable(&why_not);
  RecordOptions options;  // no --emulate at all
  options.command = {"/bin/true"};
  absl::StatusOr<BackendChoice> choice = ChooseBackend(options);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->backend, valgrind ? RecordBackend::kValgrind : RecordBackend::kPtrace);
  EXPECT_NE(choice->why.find("no Intel PT"), std::string::npos) << choice->why;
}

TEST(RecordBackendTest, WithoutValgrindTheChoiceFallsBackToPtraceAndSaysWhy) {
  if (MachineHasPt()) GTEST_SKIP() << "this machine has Intel PT: record would use it";
  const std::string saved = getenv("PATH") != nullptr ? getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  RecordOptions options;
  options.command = {"/bin/true"};
  absl::StatusOr<BackendChoice> choice = ChooseBackend(options);
  options.emulator = "valgrind";
  options.emulate = true;
  absl::StatusOr<BackendChoice> forced = ChooseBackend(options);
  setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->backend, RecordBackend::kPtrace);
  EXPECT_NE(choice->why.find("valgrind"), std::string::npos) << choice->why;
  ASSERT_FALSE(forced.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(forced.status()));
}

}  // namespace
}  // namespace ptd
