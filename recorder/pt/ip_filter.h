#pragma once
// --filter: what the user writes, turned into what the kernel accepts. The kernel's
// address filters (perf_event_parse_addr_filter) are numeric only — "filter|start|stop
// OFFSET[/SIZE][@FILE]", OFFSET a file offset when a FILE is named — and intel_pt refuses
// "start" and size-0 ranges and more ranges than caps/num_address_ranges
// (pt_event_addr_filters_validate). perf resolves symbols in the tool; so do we.
//
// Our grammar: items separated by ','; each "ACTION TARGET" with ACTION filter (trace
// only there) or stop (stop tracing there), and TARGET one of
//   SYMBOL[@FILE]        a function, looked up in FILE's symbols (default: the target's
//                        executable); its whole body
//   @FILE                all of FILE's code (its executable PT_LOAD segments)
//   OFFSET/SIZE[@FILE]   numbers (0x... or decimal) passed through
// Example: "filter main, filter compute@/usr/lib/libm.so.6".

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ptd::pt {

// The kernel filter string for `text`; FILE paths are made absolute (the kernel wants a
// regular file). `default_file` is the target's executable. `max_ranges` is
// caps/num_address_ranges (0: unknown, not checked).
absl::StatusOr<std::string> ResolveIpFilter(const std::string& text,
                                            const std::string& default_file,
                                            uint64_t max_ranges);

}  // namespace ptd::pt
