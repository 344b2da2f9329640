// Function names as the authors of Rust and OCaml programs write them, from real programs
// recorded under Valgrind: Rust with legacy and with v0 symbols (demangled, no hash
// suffix, generics and closures readable, as many calls as callgrind counts) and OCaml
// (Module.name). Go's names are checked by valgrind_recorder_test.cc's Go tests.
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "recorder/valgrind/valgrind_recorder.h"
#include "tests/testing/test_util.h"
#include "tests/valgrind/valgrind_ground_truth.h"

namespace ptd::testing {
namespace {

class LanguageNamesTest : public ValgrindRecordingTest<> {
 protected:
  DecodedRecording Record(const std::string& program) {
    return RecordUnderValgrindForTest({program}, tmp_.path());
  }
};

// Every function of the program named as in its source, called as often as callgrind
// (which demangles with the same rules) counts; no legacy hash suffix anywhere.
void ExpectRustNames(const DecodedRecording& rec, const std::map<std::string, uint64_t>& callgrind,
                     const std::vector<std::string>& functions) {
  for (const std::string& fn : functions) {
    EXPECT_GT(CallsOf(rec.decoded.calls, fn), 0u) << fn;
    EXPECT_EQ(CallsOf(rec.decoded.calls, fn), CallsOf(callgrind, fn)) << fn;
  }
  const std::regex hash_suffix("::h[0-9a-f]{16}$");
  for (const auto& [name, count] : rec.decoded.calls) {
    EXPECT_FALSE(std::regex_search(name, hash_suffix)) << name;
    EXPECT_NE(name.rfind("_ZN", 0), 0u) << name;
    EXPECT_NE(name.rfind("_R", 0), 0u) << name;
  }
}

TEST_F(LanguageNamesTest, RustLegacySymbolsAreDemangledWithoutTheirHash) {
  const std::string program = Program("ptd_prog_rust_legacy");
  if (!PathExists(program)) GTEST_SKIP() << "rustc not installed: " << program << " not built";
  DecodedRecording rec = Record(program);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls({program}, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  // Legacy symbols name a generic's instances alike and number no closure.
  ExpectRustNames(rec, *callgrind,
                  {"prog_rust::main", "prog_rust::apply", "prog_rust::Point<T>::sum", "prog_rust::main::{{closure}}"});
  EXPECT_EQ(CallsOf(rec.decoded.calls, "prog_rust::Point<T>::sum"), 60u);  // 30 of each instance
}

TEST_F(LanguageNamesTest, RustV0SymbolsShowGenericArgumentsAndNumberedClosures) {
  const std::string program = Program("ptd_prog_rust_v0");
  if (!PathExists(program)) GTEST_SKIP() << "rustc not installed: " << program << " not built";
  DecodedRecording rec = Record(program);
  absl::StatusOr<std::map<std::string, uint64_t>> callgrind = CallgrindCalls({program}, tmp_.path());
  ASSERT_TRUE(callgrind.ok()) << callgrind.status();
  ExpectRustNames(rec, *callgrind,
                  {"prog_rust::main", "prog_rust::apply", "<prog_rust::Point<u64>>::sum",
                   "<prog_rust::Point<f64>>::sum", "prog_rust::main::{closure#1}",
                   "prog_rust::fold_with::<prog_rust::main::{closure#2}>"});
  // From the source: 30 calls of each instance of sum, of apply and of the chosen closure.
  EXPECT_EQ(CallsOf(rec.decoded.calls, "<prog_rust::Point<f64>>::sum"), 30u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "prog_rust::main::{closure#1}"), 30u);
  EXPECT_EQ(CallsOf(rec.decoded.calls, "prog_rust::apply"), 30u);
}

TEST_F(LanguageNamesTest, OcamlFunctionsAreNamedModuleDotFunction) {
  const std::string program = Program("ptd_prog_ocaml");
  if (!PathExists(program)) GTEST_SKIP() << "ocamlopt not installed: " << program << " not built";
  DecodedRecording rec = Record(program);
  for (const char* fn : {"Prog_ocaml.search", "Prog_ocaml.nested", "Prog_ocaml.quiet", "Prog_ocaml.deep",
                         "Stdlib.Printf.kfprintf"}) {
    EXPECT_GT(CallsOf(rec.decoded.calls, fn), 0u) << fn;
  }
  for (const auto& [name, count] : rec.decoded.calls) {
    EXPECT_NE(name.rfind("camlProg_ocaml", 0), 0u) << name;
  }
}

}  // namespace
}  // namespace ptd::testing
