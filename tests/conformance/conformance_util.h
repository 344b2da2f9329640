#pragma once
// Runs a program as people run it, and the same program through `ptrace-direct record`,
// for the conformance tests: what the program shows (stdout, stderr, exit status) must
// not change when it is recorded.

#include <string>
#include <vector>

#include "tests/testing/test_util.h"

namespace ptd::testing {

// The emulation backends a launched program can be recorded with.
enum class Backend { kValgrind, kPtrace };
const char* BackendOption(Backend backend);  // "--emulate=valgrind"

// Empty when `backend` can record on this machine, else why not (for GTEST_SKIP).
std::string WhyBackendUnavailable(Backend backend);

// `ptrace-direct record -q --emulate=... -o trace_dir -- argv...`.
CommandResult RecordProgram(Backend backend, const std::string& trace_dir, const std::vector<std::string>& argv);

// Expects `recorded` to show what `native` showed: the same stdout, stderr and exit status.
void ExpectSameAsNative(const CommandResult& native, const CommandResult& recorded, const std::string& what);

}  // namespace ptd::testing
