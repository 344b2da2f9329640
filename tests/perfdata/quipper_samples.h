#pragma once
// The perf.data files with Intel PT from the quipper project, relative to the samples
// directory (../shared/samples, README there): one written to a file, one piped
// (`perf record -o -`).

namespace ptd::testing {

inline constexpr char kQuipperFileMode[] = "/quipper_perfdata/perf.data.intel_pt-4.14";
inline constexpr char kQuipperPipeMode[] = "/quipper_perfdata/perf.data.piped.intel_pt-4.14";

}  // namespace ptd::testing
