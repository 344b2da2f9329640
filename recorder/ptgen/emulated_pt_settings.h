#pragma once
// The PT settings an emulated recording generates packets with, and how meta.json
// describes them: one place for every emulation front end (ptrace, Valgrind), so both
// write the same packets for the same options.

#include "common/trace_meta.h"
#include "recorder/ptgen/pt_stream_set.h"
#include "recorder/session/record_options.h"

namespace ptd {

// Timing as the hardware presets: low = TSC only (in PSB+ and at enables); normal and
// high = + MTC and cycle-accurate CYC (cyc_thresh=1) from the same clock, the ART at
// 1/256 of the "TSC", the core clock equal to it; high also turns return compression off.
PtStreamSetOptions EmulatedStreamOptions(const RecordOptions& options);

// meta.json's mode, pt settings (fields, MTC/CYC ratios, PSB period) and the identity
// time conversion for streams generated with `streams`.
void DescribeEmulatedPt(const RecordOptions& options, const PtStreamSetOptions& streams, TraceMeta* meta);

}  // namespace ptd
