#pragma once
// Front end 2 of the emulator: a synthetic walker over the real code of an ELF file
// (e.g. libc.so.6). It starts at exported functions and follows the instructions,
// choosing conditional branch outcomes and indirect targets (other exported functions)
// with a seeded PRNG and keeping a consistent call stack, and feeds the same
// PacketGenerator as the ptrace front end. The result is a valid trace of any length
// for benchmarks and differential decoder tests, with ground truth.
//
// Where real execution would need data the walker does not have (a ret with an empty
// stack, an indirect branch) it picks an exported function; where it cannot continue
// (bytes outside executable segments, undecodable, a loop without packets) it disables
// tracing asynchronously (FUP + TIP.PGD) and re-enables at another function, which a
// decoder handles like any interrupt.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "recorder/emulate/ground_truth_writer.h"
#include "image/insn_classifier.h"
#include "recorder/ptgen/packet_generator.h"
#include "recorder/ptgen/packet_sink.h"

namespace ptd {

struct CodeWalkerOptions {
  std::string elf_path;
  uint64_t seed = 1;
  uint64_t max_instructions = 1000000;
  uint64_t max_pt_bytes = 0;        // also stop once this many bytes were generated (0: no limit)
  uint64_t load_base = 0;           // position-independent ELF: where it is "loaded" (0: 0x7f1200000000)
  uint32_t backward_taken_percent = 90;  // loops run ~10 iterations on average
  uint32_t forward_taken_percent = 50;
  // Robustness: every this many PT bytes, an internal overflow (OVF) loses the next
  // `overflow_lost_instructions` (0: never).
  uint64_t overflow_every_bytes = 0;
  uint64_t overflow_lost_instructions = 100;
  PacketGeneratorOptions generator;
  int pid = 1;  // identity of the synthetic thread in ground truth and sideband
  int tid = 1;
};

// A walk of `elf_path`: `max_instructions` instructions from `seed`, the rest default.
inline CodeWalkerOptions WalkOptions(std::string elf_path, uint64_t seed, uint64_t max_instructions) {
  CodeWalkerOptions options;
  options.elf_path = std::move(elf_path);
  options.seed = seed;
  options.max_instructions = max_instructions;
  return options;
}

struct CodeWalkerStats {
  uint64_t instructions = 0;    // retired (traced) instructions
  uint64_t lost_instructions = 0;
  uint64_t escapes = 0;         // asynchronous disable + re-enable elsewhere
  uint64_t calls = 0;
  uint64_t returns = 0;
  uint64_t functions = 0;       // exported functions available as targets
  PacketGeneratorStats packets;
  double seconds = 0;
};

// An executable PT_LOAD segment as mapped.
struct WalkerSegment {
  uint64_t vaddr = 0;        // runtime address of the first byte
  uint64_t file_offset = 0;
  uint64_t size = 0;
};

class CodeWalker {
 public:
  static absl::StatusOr<std::unique_ptr<CodeWalker>> Open(const CodeWalkerOptions& options);

  // Walks until a limit of the options is reached. `truth` may be null.
  CodeWalkerStats Walk(PacketSink* sink, GroundTruthWriter* truth);

  const std::vector<WalkerSegment>& segments() const { return segments_; }
  const std::string& elf_path() const { return options_.elf_path; }

 private:
  explicit CodeWalker(const CodeWalkerOptions& options);
  const image::InsnInfo* Decode(uint64_t ip);
  uint64_t RandomFunction();
  bool Chance(uint32_t percent);

  CodeWalkerOptions options_;
  std::vector<uint8_t> file_;  // the whole ELF file
  std::vector<WalkerSegment> segments_;
  std::vector<uint64_t> functions_;  // runtime addresses of exported functions
  image::InsnClassifier classifier_;
  std::mt19937_64 rng_;
};

// Walks and writes a trace directory (meta.json mode "emulated", one per-thread stream,
// synthesized MMAP2/COMM sideband for the ELF, the ELF listed in images[]) that
// `ptrace-direct decode` reads. `truth_path` may be empty.
absl::StatusOr<CodeWalkerStats> WriteWalkerTrace(const CodeWalkerOptions& options,
                                                 const std::string& output_dir, bool force,
                                                 const std::string& truth_path);

}  // namespace ptd
