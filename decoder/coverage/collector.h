#pragma once
// Which code ran, and how often (`ptrace-direct coverage`): every instruction run the
// decoder reports (BlockObserver) is resolved once into the straight-line pieces of code
// it executed (libipt's runs follow direct jumps and calls, so one run may be several
// pieces), each a block keyed by its module and offset there, ending at its first
// branch. The fast decoder counts the runs of its multi-block path in its block cache
// and reports each distinct run with its count (FastBlockCache::CountRuns), so coverage
// decodes at nearly decode's speed. Memory grows with the code executed, not with the
// trace: one entry per distinct run and per block, whatever the number of executions.
// With --jobs N each piece's decoder counts the blocks of its piece apart (ForPieces),
// and the counts of the pieces the decode uses are summed: the same blocks and counts
// as one decoder's. Modules are numbered by base address (then name), whatever the
// order the decoders met them in.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "decoder/flow/flow_decoder.h"
#include "decoder/parallel/parallel_decode.h"
#include "image/module_cache.h"
#include "image/process_image.h"

namespace ptd::decoder {

// One mapped file (or memory dump) at one load address.
struct CoverageModule {
  std::string name;   // the path the traced process mapped ("/usr/lib/libc.so.6", "[vdso]")
  std::string file;   // the file the decoder read (the trace's archived copy, when there is one)
  uint64_t base = 0;  // the address of the file's offset 0
  uint64_t end = 0;   // the end of the highest mapping of it seen (exclusive)
  std::shared_ptr<const image::Module> module;  // null for a memory dump without a file
};

// Straight-line code executed `hits` times (by every thread together).
struct CoveredBlock {
  uint32_t module = 0;  // index into modules()
  uint64_t offset = 0;  // of the first instruction, from the module's base (its file offset)
  uint32_t size = 0;    // bytes, up to the end of the last instruction
  uint32_t instructions = 0;
  uint32_t function = 0;  // index into functions()
  uint64_t hits = 0;
};

class CoverageCollector {
 public:
  // `counted_runs` (the default): the fast decoder counts the runs its multi-block path
  // takes and hands over the counts (BlockObserver::counts_runs), at its own speed. False:
  // every run is reported as it is decoded, one block per step (the reference the
  // tests compare the counted path with). The blocks and counts are the same.
  explicit CoverageCollector(bool counted_runs = true);
  ~CoverageCollector();

  // The observer of one stream's decoder. `clock` (may be null) supplies the image the
  // decoder runs on and says when it changed; without one, `image` is the stream's only one.
  std::unique_ptr<BlockObserver> ForStream(ImageClock* clock, image::ProcessImage* image);
  // --jobs N: the observer of one worker thread's decoder of a stream (`clock`: the
  // worker's images), for the parallel decode (StreamJob::make_run_observer). Workers
  // resolve runs into the collector's blocks concurrently; each piece's counts are added
  // when the decode uses the piece.
  std::unique_ptr<PieceRunObserver> ForPieces(ImageClock* clock);

  const std::vector<CoverageModule>& modules() const { return modules_; }
  const std::vector<std::string>& functions() const { return functions_; }
  // Sorted by module, then offset.
  std::vector<CoveredBlock> Blocks() const;
  // Runs whose code could not be read or walked (unmapped, undecodable): not counted.
  uint64_t unresolved_runs() const { return unresolved_runs_; }

 private:
  class StreamObserver;
  class PieceBlocks;
  // Hits by block index, and runs that could not be walked.
  struct Tally {
    absl::flat_hash_map<uint32_t, uint64_t> hits;
    uint64_t unresolved_runs = 0;
    void Add(const Tally& other);
  };
  // The blocks of the run [ip .. end_ip] of `count` instructions in `image`; empty when
  // it cannot be walked.
  std::vector<uint32_t> Resolve(image::ProcessImage& image, uint64_t ip, uint64_t end_ip, uint32_t count);
  // Under mutex_.
  uint32_t BlockOf(image::ProcessImage& image, uint64_t start, uint64_t end, uint32_t instructions);
  uint32_t ModuleOf(const image::ProcessImage::SectionBytes& section);
  void Add(const Tally& tally);

  // Guards the tables below while parallel pieces' decoders add to them (blocks and
  // modules) and the stitching thread adds counts.
  std::mutex mutex_;

  std::vector<CoverageModule> modules_;
  absl::flat_hash_map<std::tuple<std::string, uint64_t>, uint32_t> module_index_;  // (name, base)
  std::vector<std::string> functions_;
  absl::flat_hash_map<std::string, uint32_t> function_index_;
  std::vector<CoveredBlock> blocks_;
  // (module name, module base, offset, size)
  absl::flat_hash_map<std::tuple<std::string, uint64_t, uint64_t, uint32_t>, uint32_t> block_index_;
  uint64_t unresolved_runs_ = 0;
  bool counted_runs_ = true;
};

}  // namespace ptd::decoder
