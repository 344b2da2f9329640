#include "tests/robustness/robustness_util.h"

#include <filesystem>
#include <system_error>

#include "common/file_util.h"
#include "ftf/ftf_check.h"
#include "gtest/gtest.h"
#include "tests/robustness/child_process.h"

namespace ptd::testing {

using ::ptd::ftf::CheckFtfFile;

nlohmann::json InfoJson(const std::string& dir) {
  CommandResult info = RunCli({"info", "--json", dir});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  nlohmann::json j = nlohmann::json::parse(info.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << info.out;
  return j.is_discarded() ? nlohmann::json() : j;
}

DecodeOutcome Decode(const std::string& dir, const std::string& out_ftf, int expected_exit_code) {
  DecodeOutcome outcome;
  const std::string stats = out_ftf + ".stats.json";
  outcome.run = RunCli({"decode", dir, "-o", out_ftf, "-q", "--stats-json", stats});
  EXPECT_EQ(outcome.run.exit_code, expected_exit_code) << outcome.run.err;
  if (outcome.run.exit_code != expected_exit_code) return outcome;
  absl::Status check = CheckFtfFile(out_ftf);
  EXPECT_TRUE(check.ok()) << check;
  absl::StatusOr<FtfSummary> summary = SummarizeFtfFile(out_ftf);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (!check.ok() || !summary.ok()) return outcome;
  outcome.summary = *summary;
  if (absl::StatusOr<std::string> text = ReadFileToString(stats); text.ok()) {
    outcome.stats = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  }
  outcome.ok = true;
  return outcome;
}

bool CheckFtfFileOk(const std::string& path) {
  absl::Status check = CheckFtfFile(path);
  EXPECT_TRUE(check.ok()) << check;
  return check.ok();
}

uint64_t CallsOf(const FtfSummary& summary, const std::string& function) {
  for (const FunctionStats& f : summary.functions.functions) {
    if (f.name == function) return f.calls;
  }
  return 0;
}

bool HasNote(const nlohmann::json& notes, const std::string& text) {
  if (!notes.is_array()) return false;
  for (const nlohmann::json& n : notes) {
    if (n.is_string() && n.get<std::string>().find(text) != std::string::npos) return true;
  }
  return false;
}

std::vector<std::string> ListWithPrefix(const std::string& parent, const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

long long FileSizeOf(const std::string& path) {
  std::error_code ec;
  uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? -1 : static_cast<long long>(size);
}

}  // namespace ptd::testing
