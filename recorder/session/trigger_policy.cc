#include "recorder/session/trigger_policy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/units.h"
#include "recorder/images/elf_symbol.h"
#include "recorder/target/target_process.h"

namespace ptd {

absl::StatusOr<TriggerSpec> TriggerSpecOf(const RecordOptions& options) {
  TriggerSpec spec;
  spec.symbol = options.trigger_symbol;
  spec.repeat = options.multi_snapshot;
  spec.trim = options.trim;
  if (spec.symbol.empty()) {
    if (options.trigger_after > 0 || !options.trigger_slower_than.empty() || options.trim) {
      return absl::InvalidArgumentError(
          "--trigger-after, --trigger-slower-than's duration and --trim need a trigger "
          "(--trigger SYMBOL or --trigger-slower-than SYMBOL DURATION)");
    }
    return spec;
  }
  if (options.trigger_after > 0) spec.after = options.trigger_after;
  if (!options.trigger_slower_than.empty()) {
    absl::StatusOr<uint64_t> ns = ParseDurationNs(options.trigger_slower_than);
    if (!ns.ok()) return absl::InvalidArgumentError(absl::StrCat("--trigger-slower-than: ", ns.status().message()));
    if (*ns == 0) {
      return absl::InvalidArgumentError(
          "--trigger-slower-than: the duration must be more than 0 (use --trigger to fire on every entry)");
    }
    spec.slower_than_ns = *ns;
  }
  if (spec.trim && spec.repeat) {
    return absl::InvalidArgumentError(
        "--trim keeps the window of one firing call; it cannot be combined with --multi-snapshot");
  }
  if (spec.trim && options.snapshot) {
    return absl::InvalidArgumentError(
        "--trim applies to full-trace recording; --snapshot already keeps only the newest ring");
  }
  return spec;
}

absl::Status CheckTriggerSymbol(const RecordOptions& options, const TriggerSpec& spec) {
  if (spec.symbol.empty()) return absl::OkStatus();
  const SymbolSpec symbol = ParseSymbolSpec(spec.symbol);
  const char* option = spec.slower_than_ns > 0 ? "--trigger-slower-than" : "--trigger";
  if (options.pids.size() > 1 || !options.cgroup.empty()) {
    // The breakpoint's address is the symbol's in one process (ASLR).
    return absl::InvalidArgumentError(
        absl::StrCat(option, " needs one target process (not several --pid, nor --cgroup)"));
  }
  if (!options.pids.empty()) {
    const int pid = options.pids.front();
    absl::StatusOr<uint64_t> address = ResolveSymbolInProcess(pid, spec.symbol);
    if (address.ok() || !symbol.file_suffix.empty()) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat(option, ": ", symbol.name, " is not a function of process ",
                                            pid, " (", address.status().message(), ")"));
  }
  if (options.command.empty()) return absl::OkStatus();
  std::string file;
  if (symbol.file_suffix.empty()) {
    absl::StatusOr<std::string> exe = ResolveExecutable(options.command[0]);
    if (!exe.ok()) return absl::OkStatus();  // the launch says why
    file = *exe;
  } else if (symbol.file_suffix[0] == '/' && PathExists(symbol.file_suffix)) {
    file = symbol.file_suffix;
  } else {
    return absl::OkStatus();  // a library loaded later: looked for once mapped
  }
  absl::StatusOr<ElfSymbolAddress> found = FindElfFunction(file, symbol.name);
  if (found.ok()) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(
      option, ": function ", symbol.name, " not found in ", file, " (", found.status().message(), ")",
      symbol.file_suffix.empty() ? "; for a library function write NAME@LIBRARY, e.g. malloc@libc.so.6" : ""));
}

std::optional<TriggerFiring> TriggerPolicy::Hit(int pid, int tid, uint64_t entry_ns, uint64_t return_ns) {
  if (done_) return std::nullopt;
  ++hits_;
  if (hits_ < spec_.after) return std::nullopt;
  if (!spec_.repeat) done_ = true;
  firings_.push_back(TriggerFiring{.symbol = spec_.symbol,
                                   .slower_than_ns = spec_.slower_than_ns,
                                   .hit = hits_,
                                   .pid = pid,
                                   .tid = tid,
                                   .entry_ns = entry_ns,
                                   .return_ns = return_ns});
  return firings_.back();
}

std::optional<TriggerFiring> TriggerPolicy::OnEntry(int pid, int tid, uint64_t stack_pointer, uint64_t time) {
  ++entries_;
  if (!watches_returns()) return Hit(pid, tid, time, 0);
  if (done_) return std::nullopt;
  std::vector<Open>& open = open_[tid];
  // A call left without the stack rising past it (a longjmp to deeper code, a thread
  // reused after a cancel) is forgotten when a new entry lies at or above it.
  while (!open.empty() && open.back().stack_pointer <= stack_pointer) open.pop_back();
  open.push_back(Open{pid, stack_pointer, time});
  return std::nullopt;
}

std::optional<TriggerFiring> TriggerPolicy::OnStack(int tid, uint64_t stack_pointer, uint64_t time) {
  auto it = open_.find(tid);
  if (it == open_.end()) return std::nullopt;
  std::vector<Open>& open = it->second;
  std::optional<TriggerFiring> fired;
  while (!open.empty() && stack_pointer > open.back().stack_pointer) {
    const Open call = open.back();
    open.pop_back();
    ++returns_;
    const uint64_t took = time > call.entry_ns ? time - call.entry_ns : 0;
    if (took > slowest_ns_) slowest_ns_ = took;
    if (took > spec_.slower_than_ns && !fired) {
      fired = Hit(call.pid, tid, call.entry_ns, time);
    }
  }
  if (open.empty()) open_.erase(it);
  return fired;
}

std::string TriggerPolicy::Describe(uint64_t address) const {
  std::string what = spec_.slower_than_ns > 0
                         ? absl::StrFormat("--trigger-slower-than %s %s", spec_.symbol,
                                           FormatDurationNs(spec_.slower_than_ns))
                         : absl::StrCat("--trigger ", spec_.symbol);
  if (spec_.after > 1) absl::StrAppend(&what, " --trigger-after ", spec_.after);
  if (address != 0) absl::StrAppend(&what, absl::StrFormat(" (at 0x%x)", address));
  absl::StrAppend(&what, ": ", entries_, " entries");
  if (spec_.slower_than_ns > 0) {
    absl::StrAppend(&what, ", ", returns_, " returns (slowest ", FormatDurationNs(slowest_ns_), "), ",
                    hits_, " slower");
  }
  absl::StrAppend(&what, firings_.empty() ? "; never fired"
                                          : absl::StrCat("; fired ", firings_.size(), " time(s), first on hit ",
                                                         firings_.front().hit, " in thread ",
                                                         firings_.front().tid));
  return what;
}

std::optional<TriggerPoint> TriggerPointOf(const TriggerPolicy& policy) {
  if (policy.firings().empty()) return std::nullopt;
  return policy.firings().front();
}

}  // namespace ptd
