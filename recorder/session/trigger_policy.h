#pragma once
// When a trigger fires, for every backend: --trigger SYMBOL fires on an entry of SYMBOL,
// --trigger-slower-than SYMBOL D on a return of SYMBOL more than D after its entry, and
// --trigger-after N makes the Nth such hit fire (counted over every thread). Backends
// only report what they see (an entry, with its stack pointer; a thread's stack pointer
// after it returned) on their own time axis; the policy pairs entries with returns per
// thread and says when to take the snapshot and which call it was (meta.json "trigger").
//
// Returns are matched by stack pointer, not by call/return events: at the entry the
// return address is at [sp], so the call has returned once the thread runs with a stack
// pointer above it (a plain return, a tail call's return, a longjmp or exception past it
// alike). A backend without the stack pointer passes a stand-in that moves the same way
// (minus the call depth).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/trace_meta.h"
#include "recorder/session/record_options.h"

namespace ptd {

struct TriggerSpec {
  std::string symbol;           // NAME or NAME@LIBRARY; empty: no trigger
  uint64_t slower_than_ns = 0;  // 0: fire on the entry; else on a return later than this
  uint64_t after = 1;           // the Nth hit fires (then, with repeat, every hit after it)
  bool repeat = false;          // --multi-snapshot
  bool trim = false;            // keep only the window of the firing call
};

// Checks the trigger options of `options` (counts, durations, combinations) and returns
// the spec; an empty symbol when no trigger was asked for.
absl::StatusOr<TriggerSpec> TriggerSpecOf(const RecordOptions& options);

// The trigger symbol exists where the target will run it, checked before any work: in
// the executable of a launched command (or the file NAME@/PATH names), in a process to
// attach to. NAME@LIBRARY of a library not loaded yet cannot be checked and passes.
absl::Status CheckTriggerSymbol(const RecordOptions& options, const TriggerSpec& spec);

// The call that made the trigger fire, on the backend's time axis: what meta.json's
// "trigger" records of the first one.
using TriggerFiring = TriggerPoint;

class TriggerPolicy {
 public:
  explicit TriggerPolicy(TriggerSpec spec) : spec_(std::move(spec)) {}

  const TriggerSpec& spec() const { return spec_; }
  bool watches_returns() const { return spec_.slower_than_ns > 0; }

  // A thread is about to run the symbol's first instruction with this stack pointer.
  std::optional<TriggerFiring> OnEntry(int pid, int tid, uint64_t stack_pointer, uint64_t time);
  // The thread runs with this stack pointer: every call of it entered below returned
  // (the innermost first). Fires for the first of them that qualifies. Cheap when
  // nothing returned (one lookup): backends ask at every step.
  std::optional<TriggerFiring> OnStack(int tid, uint64_t stack_pointer, uint64_t time);

  uint64_t entries() const { return entries_; }
  uint64_t hits() const { return hits_; }
  uint64_t returns() const { return returns_; }
  uint64_t slowest_ns() const { return slowest_ns_; }
  const std::vector<TriggerFiring>& firings() const { return firings_; }
  // One line for meta.json notes: what was watched and what happened.
  std::string Describe(uint64_t address) const;

 private:
  struct Open {
    int pid = -1;
    uint64_t stack_pointer = 0;
    uint64_t entry_ns = 0;
  };
  std::optional<TriggerFiring> Hit(int pid, int tid, uint64_t entry_ns, uint64_t return_ns);

  TriggerSpec spec_;
  absl::flat_hash_map<int, std::vector<Open>> open_;  // per thread, outermost first
  uint64_t entries_ = 0;
  uint64_t hits_ = 0;
  uint64_t returns_ = 0;
  uint64_t slowest_ns_ = 0;
  bool done_ = false;  // fired, and not repeating
  std::vector<TriggerFiring> firings_;
};

// meta.json's "trigger": the first firing (none: nullopt). trimmed_from_ns is left 0.
std::optional<TriggerPoint> TriggerPointOf(const TriggerPolicy& policy);

}  // namespace ptd
