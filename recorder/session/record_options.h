#pragma once
// What `ptrace-direct record` was asked to do. Shared by the hardware path and the
// emulation backend so both accept the same options.

#include <cstdint>
#include <string>
#include <vector>

namespace ptd {

enum class TimingPreset { kLow, kNormal, kHigh };

struct RecordOptions {
  // Target: launch `command` (argv), attach to the processes `pids` (all their threads),
  // or attach to every process of the cgroup directory `cgroup` (its cgroup.procs).
  std::vector<std::string> command;
  std::vector<int> pids;
  std::string cgroup;

  std::string output_dir = "trace.dir";
  bool force = false;  // replace an existing output directory

  bool emulate = false;     // emulation instead of Intel PT hardware
  // Which emulator: "valgrind", "ptrace", or empty for the best one available.
  std::string emulator;
  // Emulation time axis: false = virtual (one ns per retired instruction), true = wall
  // clock. The ptrace emulator always uses the wall clock.
  bool wall_clock = false;
  bool follow_children = true;  // trace children (fork, exec) too
  bool per_thread = false;  // one ring per thread instead of per-CPU rings

  // AUX ring: overwrite (snapshot) mode keeps the newest `snapshot_size` bytes;
  // otherwise full-trace (linear) mode drains `buffer_size`-byte rings to disk.
  bool snapshot = false;
  uint64_t snapshot_size = 4ull << 20;
  uint64_t buffer_size = 16ull << 20;
  uint64_t data_size = 512ull << 10;  // DATA (sideband) ring, power-of-two pages
  // None of the three sizes was given: the hardware backend picks perf's sizes for users
  // the kernel's locked-memory limit applies to (no CAP_IPC_LOCK): 128 KiB AUX, 256 KiB
  // DATA per ring.
  bool default_ring_sizes = true;

  TimingPreset timing = TimingPreset::kNormal;
  std::string pt_config;  // expert "key=value,..." over the preset
  bool kernel = false;    // also trace the kernel (root)
  std::string filter;     // PERF_EVENT_IOC_SET_FILTER string

  std::string trigger_symbol;  // snapshot when this symbol executes
  uint64_t trigger_after = 0;  // the Nth hit fires (0: not given, the first)
  // With trigger_symbol: fire on a return of it later than this after its entry
  // ("5ms"; recorder/session/trigger_policy.h). Empty: fire on the entry.
  std::string trigger_slower_than;
  bool trim = false;           // keep only the trace from the firing call's entry on
  bool multi_snapshot = false; // keep recording after each triggered snapshot
  std::string control_fifo;    // commands: snapshot, stop; answered "ack"
  double duration_s = 0;       // stop by itself after this many seconds (0: no limit)

  // Emulation only.
  std::string start_at_symbol;    // begin tracing when this function is reached
  std::string ground_truth_path;  // write executed IPs and call/return events here
  int virtual_cpus = 0;           // >0: per-CPU mode with this many virtual CPUs
  uint64_t psb_period = 4096;     // bytes between PSB+ (hardware: psb_period field)
  bool noretcomp = false;
  // Robustness tests: an internal overflow (OVF) every this many PT bytes of a stream,
  // losing some of its thread's instructions (per-thread mode; 0: never).
  uint64_t emulate_overflow_every = 0;

  // Copy the mapped files into the trace directory by build-id (recorder/images/trace_archive.h);
  // false: --no-archive. `archive_cache_dir` "": the default shared cache.
  bool archive = true;
  std::string archive_cache_dir;
  // With the archive: fetch the debug files of stripped files with no local debug info
  // from the servers in DEBUGINFOD_URLS into it (--debuginfod).
  bool debuginfod = false;

  bool quiet = false;  // no status line
};

}  // namespace ptd
