#pragma once
// The code of one process as the decoder sees it: a libipt pt_image whose sections come
// from the shared section cache, plus what libipt does not give: the bytes (to classify
// instructions), and the function that contains an address (symbols, PLT stubs, JIT
// maps, else "dso+0xoffset").

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/recent_by_address.h"
#include "image/module_cache.h"
#include "image/section_cache.h"
#include "image/symbol_table.h"

struct pt_image;

namespace ptd::image {

// The exec that put a process's program in place.
struct ProgramStart {
  uint64_t exec_ns = 0;  // on the sideband's clock; 0: none seen (the program was running
                         // when the trace began, or the trace has no timing packets)
  std::string program;   // its name (the COMM the exec set)
};

// One mapping of file bytes into the address space.
struct Mapping {
  std::string path;         // file to read (absolute, or resolved against the trace dir)
  std::string name;         // what the process saw ("/usr/lib/libc.so.6", "[vdso]")
  uint64_t vaddr = 0;
  uint64_t file_offset = 0;
  uint64_t size = 0;        // 0: to the end of the file
  std::string build_id;     // expected build-id (hex), empty when unknown
  bool memory_dump = false; // raw bytes, not a file mapping: names are relative to the
                            // lowest address mapped under the same name
  std::string function;     // JIT code: the whole mapping is this one function (its name
                            // holds until other named code is mapped over it)
  uint64_t function_start = 0;  // the function's range when wider than the mapping (a
  uint64_t function_end = 0;    // captured piece of it); 0: the mapping's own
};

// The bounds of the function an address belongs to, as far as the decoder can tell.
struct FunctionRange {
  uint64_t start = 0;
  uint64_t end = 0;           // exclusive; jumps inside [start, end) stay in the function
  bool plt = false;
  bool mapped = false;        // false: no code known at this address
  bool symbol = false;        // [start, end) is a symbol's (ELF, JIT), not a guessed range
  uint64_t parent_start = 0;  // a part split off a function (foo.cold): that function's
                              // start; 0 for whole functions
  bool inlines = false;       // inlined calls' code lies in [start, end) (DWARF)
};

// The function with its name.
struct FunctionInfo : FunctionRange {
  absl::string_view name;     // stays valid as long as the ProcessImage
  const SourceFrame* source = nullptr;  // its DWARF subprogram (declaration file:line)
};

class ProcessImage {
 public:
  ProcessImage(SectionCache* sections, ModuleCache* modules, std::string name);
  ~ProcessImage();
  ProcessImage(const ProcessImage&) = delete;
  ProcessImage& operator=(const ProcessImage&) = delete;

  // Maps `mapping`; a later mapping replaces what it overlaps (as mmap does).
  absl::Status AddMapping(const Mapping& mapping);
  // Unmaps everything (a rebuild: no exec seen). Perf map symbols stay; names handed out
  // stay valid.
  void Clear();
  // Unmaps everything for the program an exec started (as Clear) and remembers the exec.
  void Exec(ProgramStart start);
  // The exec of the program mapped now (exec_ns 0: none since the image was cleared).
  const ProgramStart& program_start() const { return program_start_; }
  // Symbols for JIT code from a perf map file ("START SIZE name" per line, hex).
  absl::Status AddPerfMap(const std::string& path);
  // Names kernel code from a copy of /proc/kallsyms ("ADDRESS TYPE NAME [MODULE]"): its
  // text symbols, each up to the next. Lines with address 0 (kptr_restrict) are skipped.
  absl::Status AddKallsyms(const std::string& path);

  pt_image* libipt_image() const { return image_; }
  // Some mapped file holds OCaml native code (its exception traps are worth scanning for).
  bool has_ocaml() const { return has_ocaml_; }

  // Cached by address; call on branch targets, not on every instruction.
  FunctionInfo Resolve(uint64_t address);
  // Resolve's [start, end) without naming or caching: const, so decoder threads may call
  // it at once while nothing changes the image.
  FunctionRange RangeOf(uint64_t address) const;
  // The innermost source frame (image/inline_table.h) at `address`, or nullptr when no
  // DWARF names one; `end`: where the answer may change (a runtime address).
  const SourceFrame* SourceFrameAt(uint64_t address, uint64_t* end) const;
  // Where the innermost source frame changes along the straight run of instructions
  // from `start` to `last` (the run's last instruction): the first instruction's, then
  // one per change, by instruction index in the run. Cached by run until the image
  // changes. False when `last` is not reached from `start` instruction by instruction.
  struct SourceFrameChange {
    uint32_t index = 0;  // of the instruction in the run
    const SourceFrame* frame = nullptr;
  };
  bool SourceFramesAlong(uint64_t start, uint64_t last, const std::vector<SourceFrameChange>** changes);
  // Copies up to `size` code bytes at `address`; returns how many were available.
  size_t ReadCode(uint64_t address, uint8_t* out, size_t size) const;
  // The mapping (one libipt section) that holds `address`, with the file bytes it maps;
  // false: none. The fast decoder ends its blocks where libipt's do, at section ends;
  // sections of one module with the same file offset and size hold the same bytes
  // wherever they are mapped (modules are read once per decode and never change), so
  // what is decoded from them can be shared.
  struct SectionBytes {
    uint64_t start = 0;
    uint64_t end = 0;  // exclusive
    const std::shared_ptr<const Module>* module = nullptr;  // valid until the image changes
    uint64_t file_offset = 0;  // of `start`
    absl::string_view name;    // the mapping's name as the process saw it (Mapping::name)
  };
  bool SectionBytesAt(uint64_t address, SectionBytes* out) const;
  // SectionBytesAt's [start, end) alone.
  bool SectionBounds(uint64_t address, uint64_t* start, uint64_t* end) const {
    SectionBytes section;
    if (!SectionBytesAt(address, &section)) return false;
    *start = section.start;
    *end = section.end;
    return true;
  }

  // Things worth telling the user (build-id mismatches, missing files).
  const std::vector<std::string>& warnings() const { return warnings_; }
  size_t region_count() const { return regions_.size(); }

 private:
  struct Region {
    uint64_t start = 0;
    uint64_t end = 0;
    uint64_t file_offset = 0;  // of `start` in the module's file
    std::shared_ptr<const Module> module;
    uint64_t bias = 0;         // runtime address − ELF address (symbols)
    bool has_bias = false;
    std::string name;
    bool memory_dump = false;
  };

  // A named piece of JIT code (Mapping::function).
  struct JitFunction {
    uint64_t end = 0;
    absl::string_view name;
  };

  const Region* FindRegion(uint64_t address) const;
  const std::pair<const uint64_t, JitFunction>* FindJitFunction(uint64_t address) const;
  FunctionInfo ResolveUncached(uint64_t address);
  // The mappings or symbols changed: names resolved before may be wrong now.
  void ForgetResolved();
  absl::string_view Intern(std::string name);

  SectionCache* sections_;
  ModuleCache* modules_;
  std::string name_;
  pt_image* image_;
  std::vector<Region> regions_;  // sorted, non-overlapping
  ProgramStart program_start_;
  bool has_ocaml_ = false;
  SymbolTable jit_symbols_;  // perf map: untimed, below the named JIT code
  std::map<uint64_t, JitFunction> jit_functions_;  // by start, non-overlapping
  absl::flat_hash_map<uint64_t, FunctionInfo> resolved_;
  struct RunChanges {
    bool ok = false;
    std::vector<SourceFrameChange> changes;
  };
  // Node map: recent_runs_ points into it.
  absl::node_hash_map<std::pair<uint64_t, uint64_t>, RunChanges> source_runs_;
  // The last runs looked up, by start, direct-mapped in front of source_runs_ (one per
  // event in a function with inlined calls).
  struct RecentRun {
    uint64_t last = 0;
    const RunChanges* run = nullptr;
  };
  RecentByAddress<RecentRun, 1024> recent_runs_;
  // The last ones resolved, direct-mapped in front of resolved_ (a call-heavy trace
  // resolves each call's target: ~4 % of a Python recording's decode went to the probe).
  RecentByAddress<FunctionInfo, 1024> recent_resolved_;
  std::deque<std::string> names_;  // storage for names made up here
  std::vector<std::string> warnings_;
};

}  // namespace ptd::image
