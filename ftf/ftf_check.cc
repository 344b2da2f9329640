#include "ftf/ftf_check.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ftf/ftf_checker.h"
#include "ftf/ftf_reader.h"

namespace ptd::ftf {

absl::Status CheckFtfFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<FtfReader>> reader = FtfReader::Open(path);
  if (!reader.ok()) return reader.status();
  FtfChecker checker;
  absl::Status read = ForEachRecord(**reader, [&](const FtfRecord& record) { checker.Add(record); });
  if (!read.ok()) checker.AddReadError(std::string(read.message()));
  std::vector<std::string> problems = checker.Finish();
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      path, ": ", checker.problem_count(), " structural problem(s):\n  ", absl::StrJoin(problems, "\n  ")));
}

}  // namespace ptd::ftf
