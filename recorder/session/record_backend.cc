#include "recorder/session/record_backend.h"

#include "absl/strings/str_cat.h"
#include "recorder/pt/pt_pmu.h"
#include "recorder/valgrind/valgrind_recorder.h"

namespace ptd {

const char* RecordBackendName(RecordBackend backend) {
  switch (backend) {
    case RecordBackend::kHardware: return "Intel PT hardware";
    case RecordBackend::kValgrind: return "Valgrind emulation";
    case RecordBackend::kPtrace: return "ptrace emulation";
  }
  return "?";
}

absl::StatusOr<BackendChoice> ChooseBackend(const RecordOptions& options) {
  BackendChoice choice;
  const std::string& asked = options.emulator;
  if (!asked.empty() && asked != "valgrind" && asked != "ptrace") {
    return absl::InvalidArgumentError(
        absl::StrCat("--emulate=", asked, ": unknown emulator (want valgrind or ptrace)"));
  }
  if (!options.emulate && asked.empty()) {
    if (pt::DiscoverPtPmu().ok()) {
      choice.backend = RecordBackend::kHardware;
      choice.why = "recording with Intel PT hardware";
      return choice;
    }
  }
  if (asked == "ptrace") {
    choice.backend = RecordBackend::kPtrace;
    choice.why = "recording with the ptrace emulator (--emulate=ptrace)";
    return choice;
  }
  // Options only the ptrace emulator has pick it when no emulator was named.
  const bool ptrace_only = !options.ground_truth_path.empty() || !options.start_at_symbol.empty() ||
                           options.virtual_cpus > 0 || options.emulate_overflow_every > 0;
  if (ptrace_only && asked.empty()) {
    choice.backend = RecordBackend::kPtrace;
    choice.why = absl::StrCat(options.emulate ? "" : "no Intel PT on this machine: ",
                              "recording with the ptrace emulator (--ground-truth, --start-at, "
                              "--virtual-cpus and --emulate-overflow-every are its options)");
    return choice;
  }
  std::string why_not;
  const bool valgrind = ValgrindAvailable(&why_not);
  const bool attach = !options.pids.empty() || !options.cgroup.empty();
  if (asked == "valgrind") {
    if (attach) {
      return absl::InvalidArgumentError(
          "--emulate=valgrind cannot attach to a running process (--pid, --cgroup); use --emulate=ptrace");
    }
    if (!valgrind) return absl::FailedPreconditionError(why_not);
    choice.backend = RecordBackend::kValgrind;
    choice.why = "recording with the Valgrind emulator (--emulate=valgrind)";
    return choice;
  }
  const std::string no_pt = options.emulate ? "" : "no Intel PT on this machine: ";
  if (attach) {
    choice.backend = RecordBackend::kPtrace;
    choice.why = absl::StrCat(no_pt, "recording with the ptrace emulator (Valgrind cannot attach to ",
                              options.cgroup.empty() ? "--pid" : "--cgroup", ")");
  } else if (valgrind) {
    choice.backend = RecordBackend::kValgrind;
    choice.why = absl::StrCat(no_pt, "recording with the Valgrind emulator");
  } else {
    choice.backend = RecordBackend::kPtrace;
    choice.why = absl::StrCat(no_pt, "recording with the ptrace emulator (slow: ", why_not, ")");
  }
  return choice;
}

}  // namespace ptd
