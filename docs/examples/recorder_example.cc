// Example of the librecorder API (docs/recorder.md): records a command in snapshot mode,
// takes a snapshot after a second, and writes a trace directory for `ptrace-direct decode`.
//
//   recorder_example OUT_DIR CMD [ARGS...]
//
// Build against the installed library: ptd/recorder.h, -lptd_recorder and its
// dependencies (abseil, libelf, Zydis, libipt); in this tree: the ptd_recorder target.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ptd/recorder.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  ptd::RecorderConfig config;
  config.backend = ptd::Backend::kHardware;  // Intel PT only (kAuto would fall back to emulation)
  config.command.assign(argv + 2, argv + argc);
  config.snapshot = true;
  config.snapshot_size = 4 << 20;
  config.timing = "normal";

  ptd::Recorder recorder(config);
  if (absl::Status st = recorder.Start(); !st.ok()) {
    // On AMD, in most VMs or on old kernels: "no intel_pt PMU on this machine ...".
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return st.code() == absl::StatusCode::kFailedPrecondition ? 2 : 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  if (absl::Status st = recorder.Snapshot(); !st.ok()) {
    std::fprintf(stderr, "snapshot: %s\n", std::string(st.message()).c_str());
  }
  if (absl::Status st = recorder.WriteTo(argv[1], /*force=*/true); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
