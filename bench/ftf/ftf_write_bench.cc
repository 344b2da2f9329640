// Writing FTF: 10 million duration events (5 M Begin/End pairs) on a few threads with a
// realistic name set (2,000 functions, so the string table is hot), to a plain file and
// to gzip; the anchor is write()-ing the same number of bytes, pre-made, to the same
// place, so the ratio shows the writer's own cost.
//
//   build/bench/ftf/ftf_write_bench [--benchmark_filter=...]
//   env PTD_BENCH_DIR picks the directory (default /tmp).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "ftf/ftf_writer.h"

namespace ptd::ftf {
namespace {

constexpr int64_t kEvents = 10'000'000;
constexpr int kFunctions = 2000;
constexpr int kThreads = 4;
// Bytes the plain-file benchmark wrote (it runs first), so the anchor writes as many.
uint64_t g_plain_bytes = 0;

std::string BenchPath(const char* name) {
  const char* dir = std::getenv("PTD_BENCH_DIR");
  return absl::StrCat(dir ? dir : "/tmp", "/ptd-ftf-bench-", getpid(), "-", name);
}

std::vector<std::string> FunctionNames() {
  std::vector<std::string> names;
  for (int i = 0; i < kFunctions; ++i) {
    names.push_back(absl::StrCat("namespace::Class", i % 50, "::method_", i, "(int, char const*)"));
  }
  return names;
}

// Nested call pattern: depth walks up and down 0..15 so Begin/End stay balanced.
void WriteEvents(FtfWriter& writer, const std::vector<std::string>& names, int64_t events) {
  uint64_t ts = 1'000'000;
  int depth[kThreads] = {};
  int stack[kThreads][16];
  uint64_t rng = 88172645463325252ull;
  for (int64_t i = 0; i < events; ++i) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    int t = static_cast<int>(i / 1024) % kThreads;
    ts += 3 + (rng & 7);
    bool begin = depth[t] == 0 || (depth[t] < 16 && (rng & 0x100));
    if (begin) {
      int f = static_cast<int>((rng >> 16) % kFunctions);
      stack[t][depth[t]++] = f;
      writer.DurationBegin(100, 100 + t, ts, "fn", names[f]);
    } else {
      int f = stack[t][--depth[t]];
      const Arg count = Arg::Uint64("instructions", rng & 0xffff);
      writer.DurationEnd(100, 100 + t, ts, "fn", names[f], absl::MakeConstSpan(&count, 1));
    }
  }
  for (int t = 0; t < kThreads; ++t) {
    while (depth[t] > 0) writer.DurationEnd(100, 100 + t, ++ts, "fn", names[stack[t][--depth[t]]]);
  }
}

void BM_WriteDurationEvents(benchmark::State& state, const char* file_name) {
  const std::vector<std::string> names = FunctionNames();
  const std::string path = BenchPath(file_name);
  uint64_t bytes = 0;
  for (auto _ : state) {
    absl::StatusOr<std::unique_ptr<FtfWriter>> writer = FtfWriter::Open(path);
    if (!writer.ok()) {
      state.SkipWithError(std::string(writer.status().message()).c_str());
      return;
    }
    WriteEvents(**writer, names, kEvents);
    absl::Status closed = (*writer)->Close();
    if (!closed.ok()) state.SkipWithError(std::string(closed.message()).c_str());
    bytes = (*writer)->stats().bytes;
  }
  if (std::string(file_name) == "out.ftf") g_plain_bytes = bytes;
  struct stat st = {};
  ::stat(path.c_str(), &st);
  ::unlink(path.c_str());
  // Rates are per CPU second of this process (the default), so a busy machine's waits
  // do not count; wall time is in the Time column.
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(kEvents), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["file_MB"] = static_cast<double>(st.st_size) / 1e6;
  state.counters["bytes/event"] = static_cast<double>(bytes) / kEvents;
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
}

// Anchor: the same number of bytes, already made, written with write() in 1 MiB chunks.
void BM_AnchorRawWrite(benchmark::State& state) {
  const size_t total = g_plain_bytes ? g_plain_bytes : 240'000'000;
  const std::vector<char> chunk(1 << 20, 'x');
  const std::string path = BenchPath("raw.bin");
  for (auto _ : state) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    size_t left = total;
    while (left > 0) {
      size_t n = std::min(left, chunk.size());
      if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) {
        state.SkipWithError("write failed");
        break;
      }
      left -= n;
    }
    ::close(fd);
  }
  ::unlink(path.c_str());
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(kEvents), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_WriteDurationEvents, plain, "out.ftf")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_WriteDurationEvents, gzip, "out.ftf.gz")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_AnchorRawWrite)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace ptd::ftf

BENCHMARK_MAIN();
