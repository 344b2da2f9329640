#pragma once
// JIT code captured by an emulator as it runs: the bytes of code executed from memory no
// file backs (anonymous, or writable), kept per process as a jitdump of unnamed loads,
// images/jit-capture-PID.dump, on the trace's clock. The decoder places each piece in
// the timed image (image::PlaceJitCode) and names it after the runtime's jitdump load
// of the same bytes, or its perf map. A piece whose bytes differ from what was captured
// at that place before is a new generation: it takes effect just after the old code last
// ran, so both decode with their own bytes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/trace_dir.h"

namespace ptd {

struct JitCaptureStats {
  uint64_t pieces = 0;       // loads written
  uint64_t generations = 0;  // pieces that replaced other bytes (code rewritten in place)
  uint64_t bytes = 0;
};

class JitCodeCapture {
 public:
  // Code about to run at `address` in process `pid` at `time`: recorded unless the same
  // bytes were captured there already (then it only counts as a run).
  void Code(int pid, int tid, uint64_t address, absl::Span<const uint8_t> bytes, uint64_t time);
  // Code captured at `address` ran again at `time` (front ends that capture once per
  // translation rather than per execution).
  void Ran(int pid, uint64_t address, uint64_t time);
  // A process's address space is replaced (exec): its captures start over.
  void Exec(int pid);

  // Writes images/jit-capture-PID.dump for every process with captured code; a note per file.
  absl::Status Write(const TraceDirWriter& dir, std::vector<std::string>* notes) const;
  const JitCaptureStats& stats() const { return stats_; }

 private:
  struct Piece {
    uint64_t end = 0;
    std::vector<uint8_t> bytes;
    uint64_t last_run = 0;
  };
  struct Process {
    std::map<uint64_t, Piece> pieces;  // by start; may overlap where their bytes agree
    std::vector<uint8_t> dump;         // the jitdump written so far
    uint64_t next_index = 1;
    uint64_t generations = 0;
  };

  std::map<int, Process> processes_;
  JitCaptureStats stats_;
};

}  // namespace ptd
