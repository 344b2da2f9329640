#pragma once
// What `perf record -p` synthesizes at attach: the kernel only reports mappings and names
// that change after the event exists, so the existing ones are read from /proc and
// encoded as MMAP2 / COMM (and FORK for non-main threads) records in the same layout,
// stamped before the first real record.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recorder/sideband/proc_maps.h"
#include "sideband/record_reader.h"

namespace ptd {

struct ThreadComm {
  int tid = -1;
  std::string comm;
};

// The thread ids in /proc/PID/task, sorted.
absl::StatusOr<std::vector<int>> ListThreads(int pid);
// /proc/PID/task/*/comm, sorted by tid. Threads that exit while being read are skipped.
absl::StatusOr<std::vector<ThreadComm>> ReadThreadComms(int pid);

struct ProcSynthOptions {
  RecordFormat format;      // sample_type / sample_id_all of the real sideband event
  uint64_t time_ns = 0;     // sample_id time: before the first real record
  uint32_t cpu = 0;         // sample_id cpu
  uint64_t id = 0;          // sample_id identifier
};

struct SynthesizedSideband {
  std::vector<uint8_t> bytes;  // records, ready for sideband/synth.<pid>.data
  uint64_t mmap_records = 0;
  uint64_t comm_records = 0;
  uint64_t fork_records = 0;
  std::vector<ProcMapping> mappings;  // every mapping read (not only executable ones)
  std::vector<ThreadComm> threads;
};

// Encodes records from already-read /proc data (pure; tested without a process).
// MMAP2 for every executable mapping (including [vdso]); one COMM per thread
// (exec flag clear); FORK {pid, ppid=pid, tid, ptid=pid} for every thread but the main one.
SynthesizedSideband SynthesizeRecords(int pid, const std::vector<ProcMapping>& mappings,
                                      const std::vector<ThreadComm>& threads,
                                      const ProcSynthOptions& options);

// Reads /proc/PID/maps and /proc/PID/task/*/comm and encodes them.
absl::StatusOr<SynthesizedSideband> SynthesizeProcess(int pid, const ProcSynthOptions& options);

}  // namespace ptd
