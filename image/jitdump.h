#pragma once
// perf's jitdump format (jit-PID.dump, tools/perf/Documentation/jitdump-specification.txt):
// what V8 (--perf-prof), the JVM's perf agent, .NET, LuaJIT and others write about the
// code they generate. A file header, then records in the order the runtime wrote them:
// JIT_CODE_LOAD (a function's name and its code bytes), JIT_CODE_MOVE (code of an earlier
// load now at another address), JIT_CODE_DEBUG_INFO (source lines of the next load),
// JIT_CODE_UNWINDING_INFO (skipped), JIT_CODE_CLOSE (the runtime is done).
//
// The reader keeps what it can: a record cut short or of an impossible size ends the
// file with a warning (the runtime died mid-write, or the copy was taken while it wrote),
// an unknown record type is skipped with a warning. Only a file that is not a jitdump of
// this machine's architecture is an error.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ptd::image {

// A function's code coming into place (a load, or a move of an earlier load's bytes).
struct JitCodeEvent {
  enum class Kind { kLoad, kMove };
  Kind kind = Kind::kLoad;
  uint64_t timestamp = 0;     // the runtime's clock (JitDump::arch_timestamp says which)
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t code_addr = 0;     // where the code is now
  uint64_t old_code_addr = 0; // moves: where it was
  uint64_t code_size = 0;
  uint64_t code_index = 0;    // the runtime's id of the function's code
  std::string name;           // moves: the name of the load with the same code_index
  uint64_t code_offset = 0;   // where the code bytes are in the file
};

struct JitDebugEntry {
  uint64_t code_addr = 0;
  uint32_t line = 0;
  uint32_t discriminator = 0;
  std::string file;
};

// Source lines of the code loaded next at `code_addr`.
struct JitDebugInfo {
  uint64_t timestamp = 0;
  uint64_t code_addr = 0;
  std::vector<JitDebugEntry> entries;
};

struct JitDump {
  uint32_t version = 0;
  uint32_t elf_mach = 0;
  uint32_t pid = 0;
  uint64_t timestamp = 0;        // when the file was created
  bool arch_timestamp = false;   // JITDUMP_FLAGS_ARCH_TIMESTAMP: times are TSC values,
                                 // else CLOCK_MONOTONIC ns
  std::vector<JitCodeEvent> code;  // loads and moves, in file order
  std::vector<JitDebugInfo> debug_info;
  uint64_t unwinding_records = 0;  // read past, not used
  bool closed = false;             // a JIT_CODE_CLOSE record was seen
  std::vector<std::string> warnings;  // what was skipped or cut short, naming the offset
};

// Parses a whole jitdump; `path` is for messages. Errors: not a jitdump (magic), a
// header cut short, a byte order or architecture (ELF e_machine) other than x86-64.
absl::StatusOr<JitDump> ParseJitDump(absl::Span<const uint8_t> bytes, const std::string& path);
absl::StatusOr<JitDump> ReadJitDump(const std::string& path);

// Writing (what the emulators write for the code they capture, and tests): a file header
// for x86-64, and a JIT_CODE_LOAD record of `load` (pid, tid, timestamp, code_addr,
// code_index, name) with `code` as its bytes.
void AppendJitDumpHeader(uint32_t pid, uint64_t timestamp, std::vector<uint8_t>* out);
void AppendJitCodeLoad(const JitCodeEvent& load, absl::Span<const uint8_t> code, std::vector<uint8_t>* out);

// "jit-1234.dump" (any directory): the name runtimes give jitdumps; sets `pid`.
bool IsJitDumpName(const std::string& path, int* pid = nullptr);

}  // namespace ptd::image
