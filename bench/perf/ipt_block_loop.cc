// The floor for any libipt-based decoder: libipt's block decoder over every chunk of a
// trace directory, counting instructions and nothing else. bench/compare runs it next
// to `ptrace-direct decode` and `perf script`. Code comes from the executable MMAP/MMAP2
// records of the sideband (files at their paths) and the images[] of meta.json.
//
// usage: ptd_ipt_block_loop TRACE_DIR   -> one JSON line on stdout

#include <intel-pt.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "perfdata/executable_mappings.h"

namespace {

// Adds every executable file mapping named in a sideband file to `image`.
void AddSidebandMappings(const std::string& path, pt_image* image, std::set<std::tuple<std::string, uint64_t>>* seen) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ptd::ReadFileBytes(path);
  if (!bytes.ok()) return;
  for (const ptd::perfdata::ExecutableMapping& m : ptd::perfdata::ReadExecutableMappings(*bytes)) {
    if (m.name.empty() || m.name[0] != '/' || !seen->insert({m.name, m.vaddr}).second) continue;
    pt_image_add_file(image, m.name.c_str(), m.file_offset, m.size, nullptr, m.vaddr);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRACE_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  absl::StatusOr<ptd::TraceMeta> meta = ptd::ReadTraceMeta(dir);
  if (!meta.ok()) {
    std::fprintf(stderr, "%s\n", std::string(meta.status().message()).c_str());
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  pt_image* image = pt_image_alloc("bench");
  std::set<std::tuple<std::string, uint64_t>> seen;
  for (const ptd::ImageEntry& e : meta->images) {
    const std::string path = ptd::ResolveTracePath(dir, e.path);
    if (seen.insert({e.name, e.vaddr}).second) pt_image_add_file(image, path.c_str(), e.file_offset, e.size, nullptr, e.vaddr);
  }
  for (const ptd::SidebandFile& f : meta->sideband) AddSidebandMappings(ptd::ResolveTracePath(dir, f.file), image, &seen);

  uint64_t insns = 0, blocks = 0, errors = 0, pt_bytes = 0;
  for (const ptd::PtStream& stream : meta->streams) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ptd::ReadFileBytes(ptd::ResolveTracePath(dir, stream.file));
    if (!bytes.ok()) continue;
    for (const ptd::PtChunk& chunk : stream.chunks) {
      if (chunk.file_offset + chunk.size > bytes->size() || chunk.size == 0) continue;
      pt_bytes += chunk.size;
      pt_config config;
      pt_config_init(&config);
      config.begin = bytes->data() + chunk.file_offset;
      config.end = config.begin + chunk.size;
      if (meta->host.cpu.vendor == "intel") {
        config.cpu.vendor = pcv_intel;
        config.cpu.family = static_cast<uint16_t>(meta->host.cpu.family);
        config.cpu.model = static_cast<uint8_t>(meta->host.cpu.model);
        config.cpu.stepping = static_cast<uint8_t>(meta->host.cpu.stepping);
        pt_cpu_errata(&config.errata, &config.cpu);
      }
      config.cpuid_0x15_eax = meta->pt.cpuid_0x15_eax;
      config.cpuid_0x15_ebx = meta->pt.cpuid_0x15_ebx;
      config.mtc_freq = static_cast<uint8_t>(meta->pt.mtc_freq);
      config.nom_freq = static_cast<uint8_t>(meta->pt.nom_freq);
      pt_block_decoder* dec = pt_blk_alloc_decoder(&config);
      if (dec == nullptr) continue;
      pt_blk_set_image(dec, image);
      int status = pt_blk_sync_forward(dec);
      while (status != -pte_eos) {
        if (status < 0) {
          ++errors;
          status = pt_blk_sync_forward(dec);
          if (status < 0) break;
          continue;
        }
        while (status & pts_event_pending) {
          pt_event ev;
          status = pt_blk_event(dec, &ev, sizeof(ev));
          if (status < 0) break;
        }
        if (status < 0) continue;
        pt_block block;
        status = pt_blk_next(dec, &block, sizeof(block));
        insns += block.ninsn;
        blocks += block.ninsn > 0;
      }
      pt_blk_free_decoder(dec);
    }
  }
  pt_image_free(image);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"insns\": %" PRIu64 ", \"blocks\": %" PRIu64 ", \"errors\": %" PRIu64 ", \"pt_bytes\": %" PRIu64
              ", \"seconds\": %.6f}\n",
              insns, blocks, errors, pt_bytes, seconds);
  return 0;
}
