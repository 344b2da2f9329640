#pragma once
// What every robustness test checks after a fault: the trace directory is complete,
// `info` can read it, and `decode` turns it into a valid FTF.

#include <string>
#include <vector>

#include "ftf/ftf_summary.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_util.h"

namespace ptd::testing {

using ::ptd::ftf::FtfSummary;
using ::ptd::ftf::FunctionStats;
using ::ptd::ftf::SummarizeFtfFile;
using ::ptd::ftf::ThreadSummary;

// `info --json DIR` parsed; a test failure (and null) when info fails.
nlohmann::json InfoJson(const std::string& dir);

struct DecodeOutcome {
  bool ok = false;          // the expected exit status and a valid FTF
  CommandResult run;
  FtfSummary summary;
  nlohmann::json stats;     // --stats-json
};
// `decode DIR -o OUT --stats-json ...`, then checks and summarizes the FTF; `ok` when
// decode exited with `expected_exit_code` (1: a damaged trace that still decodes in part).
DecodeOutcome Decode(const std::string& dir, const std::string& out_ftf, int expected_exit_code = 0);

// True when `path` is a valid FTF file (ftf/ftf_check.h).
bool CheckFtfFileOk(const std::string& path);

// Calls of `function` in the decoded FTF (0 when absent).
uint64_t CallsOf(const FtfSummary& summary, const std::string& function);

// True when `notes` (a JSON array of strings) has one containing `text`.
bool HasNote(const nlohmann::json& notes, const std::string& text);

// Entries of `parent` whose names begin with `prefix`.
std::vector<std::string> ListWithPrefix(const std::string& parent, const std::string& prefix);

// Size of `path` in bytes, -1 when absent.
long long FileSizeOf(const std::string& path);

}  // namespace ptd::testing
