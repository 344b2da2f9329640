// ptd_walker: writes a synthetic-walk trace directory and reports its speed; with
// --verify, retraces it with libipt's block decoder and compares instruction counts;
// --count-ground-truth FILE counts the instructions a ground-truth file records.
#include <intel-pt.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/emulate/code_walker.h"

namespace {

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct VerifyResult {
  uint64_t instructions = 0;
  uint64_t errors = 0;
  uint64_t overflows = 0;
  std::string first_error;
};

// The whole stream file is mapped; the image holds the ELF's executable segments.
VerifyResult Verify(const std::string& trace_dir) {
  VerifyResult result;
  absl::StatusOr<ptd::TraceMeta> meta = ptd::ReadTraceMeta(trace_dir);
  if (!meta.ok()) {
    result.errors = 1;
    result.first_error = std::string(meta.status().message());
    return result;
  }
  pt_image_section_cache* cache = pt_iscache_alloc("walker");
  pt_image* image = pt_image_alloc("walker");
  for (const ptd::ImageEntry& e : meta->images) {
    const int isid = pt_iscache_add_file(cache, e.path.c_str(), e.file_offset, e.size, e.vaddr);
    if (isid >= 0) pt_image_add_cached(image, cache, isid, nullptr);
  }
  for (const ptd::PtStream& stream : meta->streams) {
    absl::StatusOr<std::vector<uint8_t>> bytes =
        ptd::ReadFileBytes(ptd::ResolveTracePath(trace_dir, stream.file));
    if (!bytes.ok()) continue;
    const size_t size = bytes->size();
    bytes->resize(size + 64, 0);
    pt_config config;
    pt_config_init(&config);
    config.begin = bytes->data();
    config.end = bytes->data() + size;
    pt_block_decoder* decoder = pt_blk_alloc_decoder(&config);
    pt_blk_set_image(decoder, image);
    for (;;) {
      int status = pt_blk_sync_forward(decoder);
      if (status == -pte_eos) break;
      if (status < 0) {
        ++result.errors;
        break;
      }
      for (;;) {
        while (status >= 0 && (status & pts_event_pending)) {
          pt_event event;
          status = pt_blk_event(decoder, &event, sizeof(event));
          if (status >= 0 && event.type == ptev_overflow) ++result.overflows;
        }
        if (status < 0) break;
        pt_block block;
        block.ninsn = 0;
        status = pt_blk_next(decoder, &block, sizeof(block));
        result.instructions += block.ninsn;
        if (status < 0) break;
      }
      if (status == -pte_eos) break;
      ++result.errors;
      if (result.first_error.empty()) {
        uint64_t offset = 0;
        pt_blk_get_offset(decoder, &offset);
        result.first_error = std::string(pt_errstr(pt_errcode(status))) + " at offset " +
                             std::to_string(offset);
      }
    }
    pt_blk_free_decoder(decoder);
  }
  pt_image_free(image);
  pt_iscache_free(cache);
  return result;
}

// Streams a ground-truth file (format in recorder/emulate/ground_truth.h) without the
// reader, which holds the whole file in memory: big walks write GBs. Returns the number
// of instructions its INSNS records hold, or -1 with a message.
int64_t CountGroundTruthInstructions(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size < 16) {
    std::fprintf(stderr, "ptd_walker: %s: cannot read a ground-truth file\n", path.c_str());
    if (fd >= 0) ::close(fd);
    return -1;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return -1;
  ::madvise(map, size, MADV_SEQUENTIAL);
  const uint8_t* p = static_cast<const uint8_t*>(map);
  const uint8_t* end = p + size;
  bool ok = std::string(reinterpret_cast<const char*>(p), 8) == "PTDGTRU1";
  p += 16;
  auto varint = [&](uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
      const uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;
  };
  // Varints after the tag, by tag (INSNS is handled apart).
  constexpr int kFields[10] = {-1, 2, -1, 6, 4, 5, 2, 4, 1, 2};
  int64_t instructions = 0;
  uint64_t v = 0;
  while (ok && p < end) {
    const uint8_t tag = *p++;
    if (tag == 2) {
      uint64_t n = 0;
      ok = varint(&v) && varint(&n);
      for (uint64_t i = 0; ok && i < n; ++i) ok = varint(&v);
      instructions += static_cast<int64_t>(n);
    } else if (tag < 10 && kFields[tag] > 0) {
      for (int i = 0; ok && i < kFields[tag]; ++i) ok = varint(&v);
    } else {
      ok = false;
    }
  }
  const size_t offset = static_cast<size_t>(p - static_cast<const uint8_t*>(map));
  ::munmap(map, size);
  if (!ok) {
    std::fprintf(stderr, "ptd_walker: %s: corrupt ground truth near offset %zu\n", path.c_str(), offset);
    return -1;
  }
  return instructions;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Synthetic Intel PT traces over a real ELF's code, with ground truth"};
  ptd::CodeWalkerOptions options;
  options.elf_path = "/lib/x86_64-linux-gnu/libc.so.6";
  std::string out = "walker.dir";
  std::string truth;
  uint64_t bytes_mb = 16;
  uint64_t instructions = 0;
  bool verify = false;
  std::string count_truth;
  bool force = false;
  app.add_option("--elf", options.elf_path, "ELF whose code is walked")->capture_default_str();
  app.add_option("-o,--output", out, "Trace directory to write")->capture_default_str();
  app.add_flag("--force", force, "Replace an existing trace directory");
  app.add_option("--seed", options.seed, "PRNG seed")->capture_default_str();
  app.add_option("--bytes-mb", bytes_mb, "Stop after this many MB of PT")->capture_default_str();
  app.add_option("--instructions", instructions, "Stop after this many instructions (0: no limit)");
  app.add_option("--ground-truth", truth, "Also write ground truth here");
  app.add_option("--psb-period", options.generator.psb_period, "Bytes between PSB+")->capture_default_str();
  app.add_flag("--noretcomp", options.generator.noretcomp, "No return compression");
  app.add_flag("--long-tnt", options.generator.long_tnt, "TNT-64 packets");
  app.add_option("--overflow-every", options.overflow_every_bytes, "Inject OVF every N bytes");
  app.add_flag("--mtc", options.generator.mtc, "MTC packets (and TMA in PSB+)");
  app.add_flag("--cyc", options.generator.cyc, "CYC packets (with --mtc)");
  app.add_option("--mtc-period", options.generator.mtc_freq, "MTC period (mtc_freq, at most 8)")->capture_default_str();
  app.add_flag("--verify", verify, "Retrace with libipt and compare instruction counts");
  app.add_option("--count-ground-truth", count_truth, "Only count the instructions of this ground-truth file");
  CLI11_PARSE(app, argc, argv);
  if (!count_truth.empty()) {
    const int64_t n = CountGroundTruthInstructions(count_truth);
    if (n < 0) return 1;
    std::printf("%s: %lld instructions\n", count_truth.c_str(), static_cast<long long>(n));
    return 0;
  }
  options.max_pt_bytes = bytes_mb << 20;
  options.max_instructions = instructions == 0 ? ~0ull : instructions;

  absl::StatusOr<ptd::CodeWalkerStats> stats = ptd::WriteWalkerTrace(options, out, force, truth);
  if (!stats.ok()) {
    std::fprintf(stderr, "ptd_walker: %s\n", std::string(stats.status().message()).c_str());
    return 1;
  }
  const double mb = static_cast<double>(stats->packets.bytes) / (1 << 20);
  std::printf("walked %s: %llu instructions, %.1f MB of PT in %.2f s: %.1f M insn/s, %.1f MB/s "
              "(%llu functions, %llu escapes, %llu calls, %llu lost to OVF)\n",
              options.elf_path.c_str(), static_cast<unsigned long long>(stats->instructions), mb,
              stats->seconds, static_cast<double>(stats->instructions) / stats->seconds / 1e6,
              mb / stats->seconds, static_cast<unsigned long long>(stats->functions),
              static_cast<unsigned long long>(stats->escapes),
              static_cast<unsigned long long>(stats->calls),
              static_cast<unsigned long long>(stats->lost_instructions));
  if (!verify) return 0;
  const double start = NowSeconds();
  VerifyResult result = Verify(out);
  const double seconds = NowSeconds() - start;
  std::printf("libipt block decoder: %llu instructions, %llu errors%s%s, %llu overflows, %.2f s "
              "(%.1f M insn/s)\n",
              static_cast<unsigned long long>(result.instructions),
              static_cast<unsigned long long>(result.errors), result.first_error.empty() ? "" : ": ",
              result.first_error.c_str(), static_cast<unsigned long long>(result.overflows), seconds,
              static_cast<double>(result.instructions) / seconds / 1e6);
  const bool match = result.errors == 0 && result.instructions == stats->instructions;
  std::printf("%s\n", match ? "MATCH: decoded instruction count equals the walk's"
                            : "MISMATCH");
  return match ? 0 : 1;
}
