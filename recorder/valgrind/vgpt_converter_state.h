#pragma once
// The converter's state (VgptConverter's private types), shared by its two halves:
// vgpt_converter.cc (threads, blocks and their retirement, the end) and
// vgpt_control_records.cc (the tool's control records).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "recorder/valgrind/tool/vgpt_stream.h"
#include "recorder/valgrind/vgpt_converter.h"

namespace ptd {

inline constexpr uint32_t kNoBlock = 0;

// A program's comm: its file name cut as the kernel cuts it.
inline std::string CommOf(const std::string& exe) {
  std::string base(Basename(exe));
  if (base.size() > 15) base.resize(15);  // TASK_COMM_LEN - 1, as the kernel cuts it
  return base;
}

struct VgptConverter::Block {
  uint64_t start = 0, end = 0, last_ip = 0, target = 0;
  uint64_t trigger = 0;  // a --trigger address inside the block (0: none)
  uint32_t n = 0;        // instructions
  uint32_t lengths_at = 0;  // their lengths: Instance::lengths[lengths_at .. + n]
  uint8_t kind = VGPT_KIND_NONE;
  bool described = false;
  bool hidden = false;  // Valgrind's own code: not traced
  bool jit = false;     // runs from memory no file backs: captured (VGPT_CODE)
};

struct VgptConverter::Process {
  int pid = 0;
  int ppid = 0;
  uint64_t clock = 0;
  // Instructions executed (Valgrind's own code too), the last wall stamp (the tool's
  // VGPT_TIME, a system call's return) and the count then.
  uint64_t instructions = 0;
  uint64_t stamp_ns = 0;
  uint64_t stamp_instructions = 0;
  // A fork is named by the instance (file number) of the program that made it and its
  // seq in that program: each exec'd program counts its forks from 1 again.
  using ForkKey = std::pair<uint32_t, uint32_t>;  // instance, fork_seq
  std::map<ForkKey, uint64_t> fork_times;         // -> time of the fork
  std::map<ForkKey, int> forking_tid;
  std::set<uint32_t> closed_instances;  // instances read to their end: no more forks come
  std::vector<uint64_t> triggers;  // sorted
  bool alive = true;
  bool exec_pending = false;  // the last instance ended with an exec attempt
};

struct VgptConverter::Thread {
  int tid = 0;
  int pid = 0;
  Instance* pending_in = nullptr;
  uint32_t pending_id = kNoBlock;
  uint64_t pending_time = 0;
  uint64_t last_ip = 0;  // where the thread was last known to be (for a stream's end)
  int64_t depth = 0;     // calls and signal deliveries minus returns (the stack key)
  // In a system call since the process clock read syscall_clock: its SYSCALL_TIME record
  // says how long it took.
  bool in_syscall = false;
  uint64_t syscall_clock = 0;
  uint64_t syscall_instructions = 0;  // the process's count at the call
  uint64_t StackKey() const { return kStackKeyBase - 8 * static_cast<uint64_t>(depth); }
};

struct VgptConverter::Instance {
  std::string name;
  bool hello = false;
  bool closed = false;
  bool exited = false;
  bool last_was_exec = false;
  // The last record: an exec of a program that runs untraced (VGPT_EXEC_UNTRACED).
  std::optional<UntracedExec> untraced_exec;
  int pid = 0;
  uint32_t number = 0;  // the file's <n> (<pid>-<n>.vgpt), from the hello record
  Process* process = nullptr;
  Thread* current = nullptr;
  std::vector<Block> blocks;
  std::vector<uint8_t> lengths;
};

}  // namespace ptd
