#pragma once
// The vDSO is code the process runs that exists in no file: decoding a clock_gettime
// needs its bytes, so they are dumped from /proc/PID/mem at attach / exec time.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/sideband/proc_maps.h"

namespace ptd {

// Reads [start, start+size) of another process's memory (/proc/PID/mem).
absl::StatusOr<std::vector<uint8_t>> ReadProcessMemory(int pid, uint64_t start, uint64_t size);

// Checks that `bytes` is an ELF image: magic, then a full libelf parse (ELF header,
// section headers). The error says what is wrong; `what` names the image.
absl::Status CheckElfImage(const std::vector<uint8_t>& bytes, const std::string& what);

struct SpecialMemoryDump {
  std::vector<ImageEntry> images;  // for meta.json images[]
  std::vector<std::string> notes;  // for meta.json notes[] (JIT memory, failures)
};

// How another process's memory is read: ReadProcessMemory (tests substitute a refusal).
using ProcessMemoryReader =
    std::function<absl::StatusOr<std::vector<uint8_t>>(int pid, uint64_t start, uint64_t size)>;

// Dumps [vdso] to images/vdso.<pid>.so (must be ELF) and [vsyscall] to
// images/vsyscall.<pid>.bin when readable, and notes anonymous executable mappings (JIT).
// A missing [vdso] is a note, not an error; a non-ELF [vdso] is an error. When the
// target's memory may not be read (PermissionDenied: Yama ptrace_scope 1 refuses
// /proc/PID/mem to a non-root tracer that is not the target's parent), this process's own
// [vdso] is dumped instead if it is the same image: the kernel maps one vDSO image per ABI,
// so the same size and the same ELF class and machine in /proc/PID/exe (readable under
// Yama) mean the same bytes; a note says so with its build-id. Otherwise the error says
// why neither could be used.
absl::StatusOr<SpecialMemoryDump> DumpSpecialMemory(int pid, const std::vector<ProcMapping>& maps,
                                                    const TraceDirWriter& dir,
                                                    const ProcessMemoryReader& read = ReadProcessMemory);

// DumpSpecialMemory of `pid`'s current /proc/PID/maps, its images and notes appended to
// `images` and `notes`. Returns the maps it read.
absl::StatusOr<std::vector<ProcMapping>> DumpSpecialMemoryOf(int pid, const TraceDirWriter& dir,
                                                             std::vector<ImageEntry>* images,
                                                             std::vector<std::string>* notes);

// Copies /tmp/perf-<pid>.map (JIT symbols) to images/perf-<pid>.map; false when there is
// none. Call it at the end of a recording: JITs append to the file as they run.
absl::StatusOr<bool> CopyPerfMap(int pid, const TraceDirWriter& dir);

}  // namespace ptd
