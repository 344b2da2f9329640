#pragma once
// What the fast decoder finds decoding a straight-line run of code (FastBlockDecoder::Fill:
// how many instructions, the last one, the error after them), kept once per section of
// file bytes and shared by every stream and worker thread of a decode: the library code
// every process of a recording runs is decoded once, not once per stream.
//
// Keyed by the bytes, not the address: the module (file) a section maps, its file offset
// and size, the offset of the run in it, and the execution mode. The same library mapped
// at different addresses (ASLR, other processes) shares its runs; addresses are kept
// relative to the section's start. Different bytes never share a key: a module's bytes
// are a file read once per decode (memory dumps and JIT code too are file bytes, each
// at its own offset of its dump), and a mapping replaced in one process is another
// section there while the old one's runs stay right for the processes that still map it.
//
// Only what depends on the section's bytes alone may be added: the caller leaves out runs
// with an instruction read near the section's end (its bytes may continue into whatever
// the process maps next).

#include <intel-pt.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "absl/container/flat_hash_map.h"
#include "decoder/flow/fast_insn.h"
#include "image/module_cache.h"

namespace ptd::decoder {

// One run: `ninsn` good instructions from its start, the last of them `last` (valid when
// ninsn > 0), then `error` (0, -pte_bad_insn, -pte_nomap).
struct BlockSummary {
  uint32_t ninsn = 0;
  int error = 0;
  FastInsn last;
};

// The runs of one section's bytes in one mode, by offset from the section's start.
// Lookups take a shared lock, additions an exclusive one (both only when a stream's own
// block cache misses).
class SectionBlocks {
 public:
  explicit SectionBlocks(std::shared_ptr<const image::Module> module) : module_(std::move(module)) {}

  // The run at `base + offset` of a section mapped at `base`, its addresses made absolute.
  bool Find(uint64_t base, uint64_t offset, BlockSummary* out) const;
  // The run at `base + offset` (addresses absolute), kept relative to `base`. The first
  // one added for an offset stays (every later one holds the same).
  void Add(uint64_t base, uint64_t offset, const BlockSummary& summary);

 private:
  // Holds the module, so its address stays its own as long as the key does.
  std::shared_ptr<const image::Module> module_;
  mutable std::shared_mutex mutex_;
  absl::flat_hash_map<uint64_t, BlockSummary> runs_;  // addresses relative to the section
};

// Owned by the decode (trace_decoder.cc), outlived by nothing that uses it.
class SectionBlockCache {
 public:
  // The runs of `module`'s bytes [file_offset, file_offset + size) decoded in `mode`, made
  // on first use; valid as long as the cache.
  SectionBlocks* Get(const std::shared_ptr<const image::Module>& module, uint64_t file_offset, uint64_t size,
                     pt_exec_mode mode);

 private:
  struct Key {
    const image::Module* module;
    uint64_t file_offset;
    uint64_t size;
    pt_exec_mode mode;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.module, k.file_offset, k.size, k.mode);
    }
  };
  std::mutex mutex_;
  absl::flat_hash_map<Key, std::unique_ptr<SectionBlocks>> sections_;
};

}  // namespace ptd::decoder
