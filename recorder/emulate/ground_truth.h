#pragma once
// Ground truth of an emulated recording: the exact instructions each thread executed and
// the call / return / unwind events derived from the stack pointer, with times. Written
// by the emulator (GroundTruthWriter), read here; independent of any PT decoder so that
// tests can judge the decoder against it. Format (docs/emulation-ptrace.md, "Ground truth"):
//
//   header  "PTDGTRU1" (8 bytes), u32 version = 1, u32 flags = 0   (little-endian)
//   records tag byte + unsigned LEB128 varints; "zz" = zigzag-encoded signed varint.
//     1 THREAD   pid, tid                  following records belong to this thread
//     2 INSNS    dt(zz), n, n × dip(zz)    n retired instructions; dip = ip - previous ip
//                                           of the same thread (0 before its first)
//     3 CALL     dt(zz), from, to, sp, depth, flags   sp: RSP before the call, the frame
//                                           lives while RSP < sp; flags bit0 = signal
//                                           handler entry (no call instruction)
//     4 RETURN   dt(zz), from, to, depth   a ret that ended the innermost frame
//     5 UNWIND   dt(zz), at, to, frames, depth   RSP rose past `frames` frames at once
//                                           (longjmp, exception, OCaml raise)
//     6 SYSCALL  dt(zz), ip                 the thread entered the kernel at `ip`
//     7 SIGNAL   dt(zz), interrupted, handler, signo   asynchronous transfer
//     8 END      dt(zz)                     the thread exited or tracing stopped
//     9 LOST     dt(zz), n                  n instructions executed but left out of the
//                                           PT stream on purpose (OVF injection)
//   dt = time - time of the previous record in the file (ns of CLOCK_MONOTONIC for
//   ptrace recordings, a synthetic clock for the walker). depth = frames live after.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd {

inline constexpr char kGroundTruthMagic[] = "PTDGTRU1";
inline constexpr uint32_t kGroundTruthVersion = 1;

enum class GroundTruthTag : uint8_t {
  kThread = 1,
  kInsns = 2,
  kCall = 3,
  kReturn = 4,
  kUnwind = 5,
  kSyscall = 6,
  kSignal = 7,
  kEnd = 8,
  kLost = 9,
};

// One decoded record. Instruction runs are delivered one instruction at a time
// (type kInsns, `ip` set), so consumers see a flat, ordered stream.
struct GroundTruthRecord {
  GroundTruthTag type = GroundTruthTag::kInsns;
  int pid = -1;
  int tid = -1;
  uint64_t time = 0;
  uint64_t ip = 0;      // kInsns: the instruction; kSyscall: the syscall
  uint64_t from = 0;    // kCall/kReturn: branch IP; kUnwind: instruction that moved RSP;
                        // kSignal: interrupted IP
  uint64_t to = 0;      // target / next IP / handler
  uint64_t sp = 0;      // kCall
  uint64_t count = 0;   // kUnwind: frames; kLost: instructions; kSignal: signo
  uint32_t depth = 0;   // frames live after the event
  uint32_t flags = 0;   // kCall bit0: signal handler entry
};

// Streaming reader over a whole file in memory. Errors name the file and byte offset.
class GroundTruthReader {
 public:
  static absl::StatusOr<GroundTruthReader> Open(const std::string& path);
  // `source` names the bytes in error messages.
  static absl::StatusOr<GroundTruthReader> FromBytes(std::vector<uint8_t> bytes,
                                                     std::string source);

  // Fills `record` and returns true; false at the end of the data.
  absl::StatusOr<bool> Next(GroundTruthRecord* record);

 private:
  GroundTruthReader(std::vector<uint8_t> bytes, std::string source);
  absl::Status ReadVarint(uint64_t* value, const char* field);
  absl::Status ReadZigzag(int64_t* value, const char* field);
  absl::Status Corrupt(const char* what) const;

  struct ThreadState {
    int pid = -1;
    int tid = -1;
    uint64_t last_ip = 0;
  };

  std::vector<uint8_t> bytes_;
  std::string source_;
  size_t pos_ = 0;
  size_t record_start_ = 0;
  uint64_t time_ = 0;
  std::vector<ThreadState> threads_;
  size_t current_ = 0;         // index into threads_, valid once a THREAD record was read
  bool have_thread_ = false;
  uint64_t run_left_ = 0;      // instructions of the current INSNS record still to deliver
  uint64_t run_time_ = 0;
};

// Everything about one thread, for tests that compare whole runs.
struct GroundTruthThread {
  int pid = -1;
  int tid = -1;
  std::vector<uint64_t> ips;                 // executed instructions in order
  std::vector<uint64_t> ip_times;            // per instruction: the time of its INSNS run
  std::vector<GroundTruthRecord> events;     // every non-instruction record
  std::vector<uint64_t> event_insn_index;    // events[i] happened after ips[0..index)
  uint64_t lost = 0;                         // instructions left out of the PT stream
};

// Reads a whole file, grouped by thread (ordered by first appearance).
absl::StatusOr<std::vector<GroundTruthThread>> LoadGroundTruth(const std::string& path);

}  // namespace ptd
