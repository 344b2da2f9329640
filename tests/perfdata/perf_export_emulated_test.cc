// export perf on an emulated trace recorded here (ptrace single-step backend, this VM):
// perf 6.1's own Intel PT decoder and a bare libipt instruction walk written here must
// list the same taken branches. Two independent decoders agreeing on our perf.data is
// the check that the exported attr, AUXTRACE_INFO, sideband and build-id cache are right.

#include <intel-pt.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "gtest/gtest.h"
#include "perfdata/executable_mappings.h"
#include "perfdata/perf_exporter.h"
#include "tests/testing/test_util.h"

namespace ptd::perfdata {
namespace {

using Branch = std::pair<uint64_t, uint64_t>;  // from, to

// Taken branches of every chunk: consecutive instructions that are not adjacent.
std::vector<Branch> LibiptBranches(const std::string& dir, const TraceMeta& meta) {
  pt_image* image = pt_image_alloc("test");
  std::set<std::pair<std::string, uint64_t>> seen;
  for (const ImageEntry& e : meta.images) {
    const std::string path = ResolveTracePath(dir, e.path);
    if (seen.insert({e.name, e.vaddr}).second) pt_image_add_file(image, path.c_str(), e.file_offset, e.size, nullptr, e.vaddr);
  }
  for (const SidebandFile& f : meta.sideband) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(dir, f.file));
    if (!bytes.ok()) continue;
    for (const ExecutableMapping& m : ReadExecutableMappings(*bytes)) {
      if (m.name.empty() || m.name[0] != '/' || !seen.insert({m.name, m.vaddr}).second) continue;
      pt_image_add_file(image, m.name.c_str(), m.file_offset, m.size, nullptr, m.vaddr);
    }
  }
  std::vector<Branch> out;
  for (const PtStream& stream : meta.streams) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(ResolveTracePath(dir, stream.file));
    if (!bytes.ok()) continue;
    for (const PtChunk& chunk : stream.chunks) {
      pt_config config;
      pt_config_init(&config);
      config.begin = bytes->data() + chunk.file_offset;
      config.end = config.begin + chunk.size;
      pt_insn_decoder* dec = pt_insn_alloc_decoder(&config);
      pt_insn_set_image(dec, image);
      int status = pt_insn_sync_forward(dec);
      bool have_prev = false;
      pt_insn prev{};
      while (status >= 0) {
        while (status & pts_event_pending) {
          pt_event ev;
          status = pt_insn_event(dec, &ev, sizeof(ev));
          if (status < 0) break;
          // Tracing stopped or restarted: no branch connects across it.
          if (ev.type == ptev_disabled || ev.type == ptev_async_disabled || ev.type == ptev_overflow) have_prev = false;
        }
        if (status < 0) break;
        pt_insn insn;
        status = pt_insn_next(dec, &insn, sizeof(insn));
        if (status < 0) break;
        // Unconditional transfers count even when they land on the next instruction
        // (a syscall seen from user space, call +0); perf reports those too.
        const bool always_taken = prev.iclass == ptic_call || prev.iclass == ptic_jump || prev.iclass == ptic_far_call ||
                                  prev.iclass == ptic_far_jump || prev.iclass == ptic_far_return || prev.iclass == ptic_return;
        if (have_prev && (insn.ip != prev.ip + prev.size || always_taken)) out.push_back({prev.ip, insn.ip});
        prev = insn;
        have_prev = true;
      }
      EXPECT_EQ(status, -pte_eos) << "libipt error " << pt_errstr(pt_errcode(status));
      pt_insn_free_decoder(dec);
    }
  }
  pt_image_free(image);
  return out;
}

// "from => to" lines of perf script, both ends known (perf prints 0 at trace begin/end).
std::vector<Branch> PerfBranches(const std::string& text) {
  std::vector<Branch> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    unsigned long long from = 0, to = 0;
    if (std::sscanf(line.c_str(), " %llx => %llx", &from, &to) == 2 && from != 0 && to != 0) out.push_back({from, to});
  }
  return out;
}

TEST(PerfExportEmulatedTest, PerfScriptAndLibiptAgreeOnEveryBranch) {
  if (access("/usr/bin/perf", X_OK) != 0) GTEST_SKIP() << "/usr/bin/perf (linux-perf) not installed";
  ::ptd::testing::TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  auto rec = ::ptd::testing::RunCommand({PTD_CLI_PATH, "record", "--emulate", "-o", trace, "--", "/bin/true"});
  if (rec.exit_code != 0) GTEST_SKIP() << "record --emulate unavailable here: " << rec.err;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(trace);
  ASSERT_TRUE(meta.ok()) << meta.status();

  PerfExportOptions options;
  options.trace_dir = trace;
  options.output = tmp.Sub("perf.data");
  absl::StatusOr<PerfExportResult> result = ExportPerfData(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->cached_binaries, 1u);  // the vDSO dump at least

  auto perf = ::ptd::testing::RunCommand({"/usr/bin/perf", "--buildid-dir", result->buildid_dir, "script", "-i",
                                          options.output, "--itrace=b", "-F", "ip,addr"});
  ASSERT_EQ(perf.exit_code, 0) << perf.err;
  std::vector<Branch> theirs = PerfBranches(perf.out);
  std::vector<Branch> ours = LibiptBranches(trace, *meta);
  ASSERT_GT(ours.size(), 1000u);
  for (size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i) {
    ASSERT_EQ(theirs[i], ours[i]) << "branch " << i << std::hex << ": perf " << theirs[i].first << " => "
                                  << theirs[i].second << ", libipt " << ours[i].first << " => " << ours[i].second;
  }
  ASSERT_EQ(theirs.size(), ours.size());
}

}  // namespace
}  // namespace ptd::perfdata
