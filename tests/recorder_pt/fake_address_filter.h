#pragma once
// The kernel's check of an intel_pt address filter string, as PERF_EVENT_IOC_SET_FILTER
// does it: perf_event_parse_addr_filter (kernel/events/core.c) tokenizes on " ,\n",
// wants "filter|start|stop" then "%u/%u@%s", "%u/%u", "%u@%s" or "%u" (numbers with
// kstrtoul base 0, so 0x... works, names do not), and a named file must be a regular
// file; then pt_event_addr_filters_validate (arch/x86/events/intel/pt.c) refuses size 0,
// "start", and more ranges than caps/num_address_ranges. Any filter on a CPU-wide event
// (no task: a cgroup's) is EOPNOTSUPP (perf_event_set_addr_filter: "!event->ctx->task";
// older kernels: file filters, in perf_event_parse_addr_filter). Returns 0 or the errno.

#include <linux/perf_event.h>

#include <cstdint>
#include <string>

namespace ptd::pt::testing {

int CheckKernelAddressFilter(const std::string& filter, const perf_event_attr& attr,
                             uint64_t num_address_ranges, bool per_task = true);

}  // namespace ptd::pt::testing
