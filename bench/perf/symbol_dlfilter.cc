// A perf dlfilter that does what a perf2perfetto-style tool's filter does per branch:
// resolve the sample's ip and addr to symbols (perf's own symbol lookup through
// perf_dlfilter_fns), count, and drop the sample so perf prints nothing. bench/compare
// runs `perf script --itrace=b --dlfilter` with it: the floor for tools that build call
// stacks from perf's decoder.
//
// At the end it prints one line to stderr:
//   ptd_symbol_dlfilter: S samples, I ip symbols, A addr symbols
// (--dlarg FILE writes that line to FILE instead).

#include <cinttypes>
#include <cstdio>

extern "C" {
#include <perf/perf_dlfilter.h>

// perf fills this in before calling start().
struct perf_dlfilter_fns perf_dlfilter_fns;
}

namespace {

struct Counts {
  uint64_t samples = 0;
  uint64_t ip_symbols = 0;
  uint64_t addr_symbols = 0;
  const char* out_path = nullptr;
};

}  // namespace

extern "C" {

int start(void** data, void* ctx) {
  auto* counts = new Counts;
  int argc = 0;
  char** argv = perf_dlfilter_fns.args != nullptr ? perf_dlfilter_fns.args(ctx, &argc) : nullptr;
  if (argc > 0) counts->out_path = argv[0];
  *data = counts;
  return 0;
}

int filter_event(void* data, const struct perf_dlfilter_sample* sample, void* ctx) {
  auto* counts = static_cast<Counts*>(data);
  ++counts->samples;
  const struct perf_dlfilter_al* ip = perf_dlfilter_fns.resolve_ip(ctx);
  if (ip != nullptr && ip->sym != nullptr) ++counts->ip_symbols;
  if (sample->addr_correlates_sym) {
    const struct perf_dlfilter_al* addr = perf_dlfilter_fns.resolve_addr(ctx);
    if (addr != nullptr && addr->sym != nullptr) ++counts->addr_symbols;
  } else if (sample->addr != 0) {
    struct perf_dlfilter_al al = {};
    al.size = sizeof al;
    if (perf_dlfilter_fns.resolve_address(ctx, sample->addr, &al) == 0 && al.sym != nullptr) ++counts->addr_symbols;
  }
  return 1;  // filtered out: the tool writes its own output
}

int stop(void* data, void*) {
  auto* counts = static_cast<Counts*>(data);
  FILE* out = counts->out_path != nullptr ? std::fopen(counts->out_path, "w") : stderr;
  if (out == nullptr) {
    std::fprintf(stderr, "ptd_symbol_dlfilter: cannot write %s\n", counts->out_path);
    delete counts;
    return -1;
  }
  std::fprintf(out, "ptd_symbol_dlfilter: %" PRIu64 " samples, %" PRIu64 " ip symbols, %" PRIu64 " addr symbols\n",
               counts->samples, counts->ip_symbols, counts->addr_symbols);
  if (out != stderr) std::fclose(out);
  delete counts;
  return 0;
}

const char* filter_description(const char** long_description) {
  if (long_description != nullptr) *long_description = nullptr;
  return "resolve every sample's ip and addr to a symbol, count, print nothing";
}

}  // extern "C"
