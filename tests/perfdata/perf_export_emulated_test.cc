// export perf on an emulated trace recorded here (ptrace single-step backend, this VM):
// perf 6.1's own Intel PT decoder and a bare libipt instruction walk written here must
// list the same taken branches. Two independent decoders agreeing on our perf.data is
// the check that the exported attr, AUXTRACE_INFO, sideband and build-id cache are right.
// `decode perf.data` on the export must give what decoding the trace directory gives.

#include <dirent.h>
#include <intel-pt.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <regex>
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

// One emulated recording of /bin/true and its export, shared by the suite (recording
// single-steps ~110,000 instructions: seconds on these VMs).
class PerfExportEmulatedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new ::ptd::testing::TempDir();
    auto rec = ::ptd::testing::RunCommand({PTD_CLI_PATH, "record", "--emulate=ptrace", "-o", Trace(), "--", "/bin/true"});
    if (rec.exit_code != 0) {
      skip_reason_ = new std::string("record --emulate unavailable here: " + rec.err);
      return;
    }
    PerfExportOptions options;
    options.trace_dir = Trace();
    options.output = PerfDataPath();
    options.buildid_dir = tmp_->Sub("buildid");
    export_ = new absl::StatusOr<PerfExportResult>(ExportPerfData(options));
  }
  static void TearDownTestSuite() {
    delete export_;
    delete skip_reason_;
    delete tmp_;
    export_ = nullptr;
    skip_reason_ = nullptr;
    tmp_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
    ASSERT_NE(export_, nullptr);
    ASSERT_TRUE(export_->ok()) << export_->status();
  }
  static std::string Trace() { return tmp_->Sub("trace"); }
  static std::string PerfDataPath() { return tmp_->Sub("perf.data"); }
  static std::string Scratch(const std::string& name) { return tmp_->Sub(name); }
  static const PerfExportResult& Exported() { return **export_; }

 private:
  static inline ::ptd::testing::TempDir* tmp_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
  static inline absl::StatusOr<PerfExportResult>* export_ = nullptr;
};

TEST_F(PerfExportEmulatedTest, PerfScriptAndLibiptAgreeOnEveryBranch) {
  if (access("/usr/bin/perf", X_OK) != 0) GTEST_SKIP() << "/usr/bin/perf (linux-perf) not installed";
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(Trace());
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_GE(Exported().cached_binaries, 1u);  // the vDSO dump at least

  auto perf = ::ptd::testing::RunCommand({"/usr/bin/perf", "--buildid-dir", Exported().buildid_dir, "script", "-i",
                                          PerfDataPath(), "--itrace=b", "-F", "ip,addr"});
  ASSERT_EQ(perf.exit_code, 0) << perf.err;
  std::vector<Branch> theirs = PerfBranches(perf.out);
  std::vector<Branch> ours = LibiptBranches(Trace(), *meta);
  ASSERT_GT(ours.size(), 1000u);
  for (size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i) {
    ASSERT_EQ(theirs[i], ours[i]) << "branch " << i << std::hex << ": perf " << theirs[i].first << " => "
                                  << theirs[i].second << ", libipt " << ours[i].first << " => " << ours[i].second;
  }
  ASSERT_EQ(theirs.size(), ours.size());
}

// `decode perf.data` on our own export: the same call stacks as decoding the trace
// directory it came from (the FTF bytes are equal: same threads, times and frames).
TEST_F(PerfExportEmulatedTest, ExportedPerfDataDecodesDirectlyLikeItsTraceDirectory) {
  auto from_dir = ::ptd::testing::RunCommand({PTD_CLI_PATH, "decode", Trace(), "-o", Scratch("dir.ftf"), "--stats-json",
                                              Scratch("dir.json")});
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  auto direct = ::ptd::testing::RunCommand({PTD_CLI_PATH, "decode", PerfDataPath(), "--buildid-dir",
                                            Exported().buildid_dir, "-o", Scratch("perf.ftf"), "--stats-json",
                                            Scratch("perf.json")});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  absl::StatusOr<std::string> dir_stats = ReadFileToString(Scratch("dir.json"));
  absl::StatusOr<std::string> perf_stats = ReadFileToString(Scratch("perf.json"));
  ASSERT_TRUE(dir_stats.ok() && perf_stats.ok());
  for (const char* key : {"instructions", "calls", "returns", "errors", "threads"}) {
    std::smatch a, b;
    const std::regex re(std::string("\"") + key + "\": ([0-9]+)");
    ASSERT_TRUE(std::regex_search(*dir_stats, a, re) && std::regex_search(*perf_stats, b, re)) << key;
    EXPECT_EQ(a[1].str(), b[1].str()) << key;
  }
  absl::StatusOr<std::string> dir_ftf = ReadFileToString(Scratch("dir.ftf"));
  absl::StatusOr<std::string> perf_ftf = ReadFileToString(Scratch("perf.ftf"));
  ASSERT_TRUE(dir_ftf.ok() && perf_ftf.ok());
  EXPECT_GT(dir_ftf->size(), 1000u);
  EXPECT_TRUE(*dir_ftf == *perf_ftf) << "FTF bytes differ";
}

// Without the build-id cache the export names, the vDSO dump is nowhere: decode warns
// with its name and build-id (the cache entry's directory name) and still succeeds.
TEST_F(PerfExportEmulatedTest, DecodeNamesTheMissingVdsoWithItsBuildId) {
  const std::string vdso_dir = Exported().buildid_dir + "/[vdso]";
  std::string build_id;
  if (DIR* d = opendir(vdso_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') build_id = e->d_name;
    }
    closedir(d);
  }
  ASSERT_EQ(build_id.size(), 40u) << "no vDSO entry in " << vdso_dir;
  ASSERT_TRUE(MakeDirs(Scratch("home")).ok());
  auto r = ::ptd::testing::RunCommand({"/usr/bin/env", "HOME=" + Scratch("home"), PTD_CLI_PATH, "decode",
                                       PerfDataPath(), "-o", Scratch("novdso.ftf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[vdso] (build-id " + build_id + ";"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(Scratch("home") + "/.debug"), std::string::npos) << r.err;
  EXPECT_TRUE(PathExists(Scratch("novdso.ftf")));
}

}  // namespace
}  // namespace ptd::perfdata
