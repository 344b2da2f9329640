#pragma once
// The perf_event_attr bits that make the kernel write the records this folder reads:
// MMAP and MMAP2 (which code is mapped where), COMM with its exec flag and FORK/EXIT
// (which thread is which), and SWITCH (which thread ran on which CPU), each followed by
// the sample_id fields (sample_id_all). Shared by the recorder, which opens such events,
// and the perf.data exporter, which describes them.

#include <linux/perf_event.h>

namespace ptd {

void SetSidebandRecordBits(bool context_switches, perf_event_attr* attr);

}  // namespace ptd
