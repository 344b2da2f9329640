// Decoding speed on a real trace (the mruby sample, 6.3 M instructions): our whole
// pipeline (libipt block decoder → flow events → call-stack model → FTF) beside a bare
// libipt block-decoder loop over the same bytes and the same image, in the same run.
// The figure to report is the ratio ours / bare. Also: wall time with --jobs 1 and 2
// (parallel decoding in pieces; the machine's load average is printed with it).
//
//   decode_bench [SAMPLES_DIR] [REPEATS]     (default ../shared/samples, 5)
#include <intel-pt.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "decoder/trace_decoder.h"
#include "image/maps_spec.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/raw_import.h"
#include "image/section_cache.h"

namespace {

// CPU time of this process: the machine this runs on is shared, and wall time there
// measures the neighbours.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
};

double Seconds(double since) { return Clock::now() - since; }

// Wall time, for --jobs: parallel decoding spends more CPU to finish sooner.
double WallNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The loop every libipt user writes: sync, drain events, next block, count.
uint64_t BareBlockLoop(const std::vector<uint8_t>& padded, size_t size, pt_image* image) {
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(padded.data());
  config.end = config.begin + size;
  config.flags.variant.block.end_on_call = 1;
  config.flags.variant.block.end_on_jump = 1;
  pt_block_decoder* decoder = pt_blk_alloc_decoder(&config);
  pt_blk_set_image(decoder, image);
  uint64_t instructions = 0;
  int status;
  while ((status = pt_blk_sync_forward(decoder)) >= 0) {
    for (;;) {
      while (status & pts_event_pending) {
        pt_event event;
        status = pt_blk_event(decoder, &event, sizeof event);
        if (status < 0) break;
      }
      if (status < 0) break;
      pt_block block;
      status = pt_blk_next(decoder, &block, sizeof block);
      instructions += block.ninsn;
      if (status < 0) break;
    }
    if (status == -pte_eos) break;
  }
  pt_blk_free_decoder(decoder);
  return instructions;
}

}  // namespace

int main(int argc, char** argv) {
  std::string samples = argc > 1 ? argv[1] : std::string(PTD_SOURCE_DIR) + "/../shared/samples";
  int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  std::string sample = samples + "/libxdc_experiments/mruby";
  if (!ptd::PathExists(sample + "/trace")) {
    std::fprintf(stderr, "decode_bench: %s/trace not found (pass the samples directory)\n", sample.c_str());
    return 2;
  }
  char tmpl[] = "/tmp/ptd-bench-XXXXXX";
  std::string tmp = mkdtemp(tmpl);
  ptd::image::RawImportOptions import;
  import.pt_path = sample + "/trace";
  import.output_dir = tmp + "/trace";
  ptd::image::MapSpec pages;
  pages.kind = ptd::image::MapSpec::Kind::kPages;
  pages.address_file = sample + "/data.addr";
  pages.path = sample + "/data.dump";
  import.maps.push_back(pages);
  auto imported = ptd::image::ImportRaw(import);
  if (!imported.ok()) {
    std::fprintf(stderr, "decode_bench: import: %s\n", std::string(imported.status().message()).c_str());
    return 1;
  }
  auto meta = ptd::ReadTraceMeta(import.output_dir);
  auto bytes = ptd::ReadFileBytes(ptd::ResolveTracePath(import.output_dir, meta->streams[0].file));
  size_t size = bytes->size();
  std::vector<uint8_t> padded(*bytes);
  padded.resize(size + 64, 0);

  double bare_best = 1e9, ours_best = 1e9, insn_best = 1e9, wall1_best = 1e9, wall2_best = 1e9;
  uint64_t bare_insns = 0, ours_insns = 0;
  for (int i = 0; i < repeats; ++i) {
    // Like `decode`, each run starts with a fresh section cache (libipt's block cache
    // lives in it), and loading the image counts.
    auto t0 = Clock::now();
    ptd::image::SectionCache sections;
    ptd::image::ModuleCache modules;
    ptd::image::ProcessImage image(&sections, &modules, "bench");
    for (const ptd::ImageEntry& e : meta->images) {
      ptd::image::Mapping m;
      m.path = ptd::ResolveTracePath(import.output_dir, e.path);
      m.vaddr = e.vaddr;
      m.file_offset = e.file_offset;
      m.size = e.size;
      (void)image.AddMapping(m);
    }
    bare_insns = BareBlockLoop(padded, size, image.libipt_image());
    bare_best = std::min(bare_best, Seconds(t0));

    ptd::decoder::DecodeOptions options;
    options.axis = ptd::decoder::TimeAxisChoice::kInstructions;
    t0 = Clock::now();
    auto result = ptd::decoder::DecodeTraceToFtf(import.output_dir, tmp + "/out.ftf", options);
    ours_best = std::min(ours_best, Seconds(t0));
    if (!result.ok()) {
      std::fprintf(stderr, "decode_bench: %s\n", std::string(result.status().message()).c_str());
      return 1;
    }
    ours_insns = result->stats.instructions;
    // Same decode, wall time, with one and with two jobs (identical output).
    for (int jobs : {1, 2}) {
      options.jobs = jobs;
      double w0 = WallNow();
      auto timed = ptd::decoder::DecodeTraceToFtf(import.output_dir, tmp + "/out-jobs.ftf", options);
      double wall = WallNow() - w0;
      if (!timed.ok() || timed->stats.instructions != ours_insns) {
        std::fprintf(stderr, "decode_bench: --jobs %d decode failed or differs\n", jobs);
        return 1;
      }
      double& best = jobs == 1 ? wall1_best : wall2_best;
      best = std::min(best, wall);
    }
    options.jobs = 1;
    if (i == 0) {
      options.decoder = ptd::decoder::DecoderKind::kInsn;
      t0 = Clock::now();
      (void)ptd::decoder::DecodeTraceToFtf(import.output_dir, tmp + "/out-insn.ftf", options);
      insn_best = Seconds(t0);
    }
  }
  auto row = [&](const char* what, double s, uint64_t insns) {
    std::printf("%-44s %8.3f s  %8.1f M insn/s  %7.2f MB/s\n", what, s, insns / 1e6 / s, size / 1e6 / s);
  };
  std::printf("mruby sample: %zu bytes of PT, %llu instructions, best of %d runs (CPU time)\n", size,
              static_cast<unsigned long long>(bare_insns), repeats);
  row("bare libipt block loop (count only)", bare_best, bare_insns);
  row("ptrace-direct decode, block decoder → FTF", ours_best, ours_insns);
  row("ptrace-direct decode, insn decoder → FTF (1 run)", insn_best, ours_insns);
  std::printf("ratio ours/bare (time): %.2f\n", ours_best / bare_best);
  std::printf("wall time, block decoder → FTF: --jobs 1 %.3f s, --jobs 2 %.3f s: speed-up %.2f\n", wall1_best,
              wall2_best, wall1_best / wall2_best);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) > 0) std::printf("load average during the run: %.2f\n", load[0]);
  (void)ptd::RemoveTree(tmp);
  return bare_insns == ours_insns ? 0 : 1;
}
