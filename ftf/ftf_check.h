#pragma once
// One call to check a whole FTF file (plain or gzip): reads it and runs FtfChecker.
// Meant for every test that writes FTF: EXPECT_TRUE(CheckFtfFile(path).ok()).

#include <string>

#include "absl/status/status.h"

namespace ptd::ftf {

// OK when the file reads to its end and passes every structural check; otherwise
// FailedPrecondition listing the problems (or the read error, which names the offset).
absl::Status CheckFtfFile(const std::string& path);

}  // namespace ptd::ftf
