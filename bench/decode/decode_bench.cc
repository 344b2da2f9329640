// Decoding speed on a real trace (the mruby sample, 6.3 M instructions) or any trace
// directory with one stream (--trace DIR, e.g. a bench/walker trace): our whole pipeline
// (flow decoder → flow events → call-stack model → FTF) with the fast decoder and with
// libipt's block decoder, beside a bare libipt block-decoder loop over the same bytes
// and the same image, in the same run, one core (CPU time, best of REPEATS). The figures
// to report are the ratios. Also: wall time with --jobs 1 and 2 (parallel decoding in
// pieces; the machine's load average is printed with it).
//
//   decode_bench [SAMPLES_DIR] [REPEATS]     (default ../shared/samples, 5)
//   decode_bench --trace DIR [REPEATS]
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

// The mruby sample imported into `tmp`/trace; "" on failure.
std::string ImportMruby(const std::string& samples, const std::string& tmp) {
  std::string sample = samples + "/libxdc_experiments/mruby";
  if (!ptd::PathExists(sample + "/trace")) {
    std::fprintf(stderr, "decode_bench: %s/trace not found (pass the samples directory)\n", sample.c_str());
    return "";
  }
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
    return "";
  }
  return import.output_dir;
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace_dir;
  bool own_trace = argc > 2 && std::string(argv[1]) == "--trace";
  std::string samples = argc > 1 && !own_trace ? argv[1] : std::string(PTD_SOURCE_DIR) + "/../shared/samples";
  int arg_repeats = own_trace ? 3 : 2;
  int repeats = argc > arg_repeats ? std::max(1, std::atoi(argv[arg_repeats])) : 5;
  char tmpl[] = "/tmp/ptd-bench-XXXXXX";
  std::string tmp = mkdtemp(tmpl);
  trace_dir = own_trace ? argv[2] : ImportMruby(samples, tmp);
  if (trace_dir.empty()) return 2;
  auto meta = ptd::ReadTraceMeta(trace_dir);
  if (!meta.ok() || meta->streams.size() != 1) {
    std::fprintf(stderr, "decode_bench: %s: need a trace directory with one stream\n", trace_dir.c_str());
    return 2;
  }
  auto bytes = ptd::ReadFileBytes(ptd::ResolveTracePath(trace_dir, meta->streams[0].file));
  size_t size = bytes->size();
  std::vector<uint8_t> padded(*bytes);
  padded.resize(size + 64, 0);

  double bare_best = 1e9, block_best = 1e9, fast_best = 1e9, insn_best = 1e9, wall1_best = 1e9, wall2_best = 1e9;
  uint64_t bare_insns = 0, block_insns = 0, fast_insns = 0;
  bool identical = true;
  for (int i = 0; i < repeats; ++i) {
    // Like `decode`, each run starts with a fresh section cache (libipt's block cache
    // lives in it), and loading the image counts.
    auto t0 = Clock::now();
    ptd::image::SectionCache sections;
    ptd::image::ModuleCache modules;
    ptd::image::ProcessImage image(&sections, &modules, "bench");
    for (const ptd::ImageEntry& e : meta->images) {
      ptd::image::Mapping m;
      m.path = ptd::ResolveTracePath(trace_dir, e.path);
      m.vaddr = e.vaddr;
      m.file_offset = e.file_offset;
      m.size = e.size;
      (void)image.AddMapping(m);
    }
    bare_insns = BareBlockLoop(padded, size, image.libipt_image());
    bare_best = std::min(bare_best, Seconds(t0));

    ptd::decoder::DecodeOptions options;
    options.axis = ptd::decoder::TimeAxisChoice::kInstructions;
    for (auto kind : {ptd::decoder::DecoderKind::kBlock, ptd::decoder::DecoderKind::kFast}) {
      const bool fast = kind == ptd::decoder::DecoderKind::kFast;
      options.decoder = kind;
      t0 = Clock::now();
      auto result = ptd::decoder::DecodeTraceToFtf(trace_dir, tmp + (fast ? "/fast.ftf" : "/block.ftf"), options);
      double& best = fast ? fast_best : block_best;
      best = std::min(best, Seconds(t0));
      if (!result.ok()) {
        std::fprintf(stderr, "decode_bench: %s\n", std::string(result.status().message()).c_str());
        return 1;
      }
      (fast ? fast_insns : block_insns) = result->stats[ptd::decoder::Stat::kInstructions];
    }
    if (i == 0) identical = *ptd::ReadFileToString(tmp + "/fast.ftf") == *ptd::ReadFileToString(tmp + "/block.ftf");
    // Same decode, wall time, with one and with two jobs (identical output).
    options.decoder = ptd::decoder::DecoderKind::kBlock;
    for (int jobs : {1, 2}) {
      options.jobs = jobs;
      double w0 = WallNow();
      auto timed = ptd::decoder::DecodeTraceToFtf(trace_dir, tmp + "/out-jobs.ftf", options);
      double wall = WallNow() - w0;
      if (!timed.ok() || timed->stats[ptd::decoder::Stat::kInstructions] != block_insns) {
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
      (void)ptd::decoder::DecodeTraceToFtf(trace_dir, tmp + "/out-insn.ftf", options);
      insn_best = Seconds(t0);
    }
  }
  auto row = [&](const char* what, double s, uint64_t insns) {
    std::printf("%-46s %8.3f s  %8.1f M insn/s  %7.2f MB/s\n", what, s, insns / 1e6 / s, size / 1e6 / s);
  };
  std::printf("%s: %zu bytes of PT, %llu instructions, best of %d runs (CPU time)\n", trace_dir.c_str(), size,
              static_cast<unsigned long long>(bare_insns), repeats);
  row("bare libipt block loop (count only)", bare_best, bare_insns);
  row("ptrace-direct decode, libipt-block → FTF", block_best, block_insns);
  row("ptrace-direct decode, fast → FTF", fast_best, fast_insns);
  row("ptrace-direct decode, libipt-insn → FTF (1 run)", insn_best, block_insns);
  std::printf("speed fast / libipt-block: %.2fx; fast / bare loop: %.2fx; libipt-block / bare loop: %.2fx\n",
              block_best / fast_best, bare_best / fast_best, bare_best / block_best);
  std::printf("fast and libipt-block FTF: %s\n", identical ? "identical" : "DIFFERENT");
  std::printf("wall time, libipt-block → FTF: --jobs 1 %.3f s, --jobs 2 %.3f s: speed-up %.2f\n", wall1_best,
              wall2_best, wall1_best / wall2_best);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) > 0) std::printf("load average during the run: %.2f\n", load[0]);
  (void)ptd::RemoveTree(tmp);
  return bare_insns == block_insns && block_insns == fast_insns && identical ? 0 : 1;
}
