#include "ftf/function_stats.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"
#include "ftf/function_stats_json.h"

namespace ptd::ftf {
namespace {

// Log-linear buckets: exact below 32, then 16 per power of two.
constexpr int kSubBits = 4;
constexpr uint64_t kExactBelow = 2u << kSubBits;

size_t BucketOf(uint64_t v) {
  if (v < kExactBelow) return static_cast<size_t>(v);
  const int e = 63 - std::countl_zero(v);  // >= kSubBits + 1
  const uint64_t sub = (v >> (e - kSubBits)) & ((1u << kSubBits) - 1);
  return static_cast<size_t>(kExactBelow + (e - kSubBits - 1) * (1u << kSubBits) + sub);
}

uint64_t BucketLow(size_t bucket) {
  if (bucket < kExactBelow) return bucket;
  const size_t k = bucket - kExactBelow;
  const int e = static_cast<int>(k >> kSubBits) + kSubBits + 1;
  const uint64_t sub = k & ((1u << kSubBits) - 1);
  return ((uint64_t{1} << kSubBits) + sub) << (e - kSubBits);
}

// The value at fraction `q` of `calls` sorted latencies (nearest rank): the middle of its
// bucket, within [min, max] (so a function called once has every percentile exact).
uint64_t Percentile(const std::vector<uint64_t>& buckets, uint64_t calls, double q, uint64_t min, uint64_t max) {
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(q * static_cast<double>(calls) + 0.999999));
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    seen += buckets[b];
    if (seen >= rank) {
      const uint64_t middle = BucketLow(b) + (BucketLow(b + 1) - BucketLow(b)) / 2;
      return std::clamp(middle, min, max);
    }
  }
  return max;
}

size_t DecadeOf(uint64_t ns) {
  size_t d = 0;
  while (d < kLatencyDecadeBounds.size() && ns >= kLatencyDecadeBounds[d]) ++d;
  return d;
}

bool SlowerFirst(const SlowCall& a, const SlowCall& b) {
  return a.duration_ns != b.duration_ns ? a.duration_ns > b.duration_ns : a.start_ns < b.start_ns;
}

}  // namespace

FunctionStatsBuilder::FunctionStatsBuilder(FunctionStatsOptions options) : options_(std::move(options)) {}

FunctionStatsBuilder::Thread& FunctionStatsBuilder::ThreadOf(uint64_t pid, uint64_t tid) {
  return threads_[{pid, tid}];
}

void FunctionStatsBuilder::Begin(uint64_t pid, uint64_t tid, uint64_t time_ns, absl::string_view name,
                                 absl::string_view source) {
  uint32_t function;
  auto it = function_index_.find(name);
  if (it != function_index_.end()) {
    function = it->second;
  } else {
    function = static_cast<uint32_t>(functions_.size());
    functions_.emplace_back();
    functions_.back().stats.name = std::string(name);
    function_index_.emplace(std::string(name), function);
    if (!options_.slowest_of.empty() && name == options_.slowest_of) slowest_index_ = function;
  }
  if (!source.empty() && functions_[function].stats.source.empty()) {
    functions_[function].stats.source = std::string(source);
  }
  Thread& thread = ThreadOf(pid, tid);
  thread.stack.push_back(Frame{function, time_ns, 0, 0});
  ++thread.open_count[function];
  thread.last_ns = std::max(thread.last_ns, time_ns);
}

void FunctionStatsBuilder::End(uint64_t pid, uint64_t tid, uint64_t time_ns, std::optional<uint64_t> instructions) {
  Thread& thread = ThreadOf(pid, tid);
  thread.last_ns = std::max(thread.last_ns, time_ns);
  if (thread.stack.empty()) return;
  Close(pid, tid, thread, time_ns, instructions);
}

void FunctionStatsBuilder::Close(uint64_t pid, uint64_t tid, Thread& thread, uint64_t end_ns,
                                 std::optional<uint64_t> instructions) {
  const Frame frame = thread.stack.back();
  thread.stack.pop_back();
  const uint64_t duration = end_ns > frame.start_ns ? end_ns - frame.start_ns : 0;
  Accumulator& acc = functions_[frame.function];
  FunctionStats& f = acc.stats;
  ++f.calls;
  f.self_ns += duration > frame.callees_ns ? duration - frame.callees_ns : 0;
  uint32_t& open = thread.open_count[frame.function];
  if (--open == 0) f.total_ns += duration;
  if (instructions) {
    f.self_instructions += *instructions > frame.callees_instructions ? *instructions - frame.callees_instructions : 0;
    if (open == 0) f.total_instructions += *instructions;
  } else {
    acc.missing_instructions = true;
  }
  f.min_ns = f.calls == 1 ? duration : std::min(f.min_ns, duration);
  f.max_ns = std::max(f.max_ns, duration);
  ++f.histogram[DecadeOf(duration)];
  const size_t bucket = BucketOf(duration);
  if (bucket >= acc.buckets.size()) acc.buckets.resize(bucket + 1, 0);
  ++acc.buckets[bucket];
  if (!thread.stack.empty()) {
    thread.stack.back().callees_ns += duration;
    thread.stack.back().callees_instructions += instructions.value_or(0);
  }
  if (slowest_index_ && frame.function == *slowest_index_) {
    NoteSlow(SlowCall{pid, tid, frame.start_ns, duration, instructions.value_or(0)});
  }
}

void FunctionStatsBuilder::NoteSlow(const SlowCall& call) {
  if (options_.slowest_count == 0) return;
  // A min-heap under SlowerFirst keeps the fastest of the kept calls at the front.
  if (slowest_.size() < options_.slowest_count) {
    slowest_.push_back(call);
    std::push_heap(slowest_.begin(), slowest_.end(), SlowerFirst);
  } else if (SlowerFirst(call, slowest_.front())) {
    std::pop_heap(slowest_.begin(), slowest_.end(), SlowerFirst);
    slowest_.back() = call;
    std::push_heap(slowest_.begin(), slowest_.end(), SlowerFirst);
  }
}

size_t FunctionStatsBuilder::CloseThread(uint64_t pid, uint64_t tid, uint64_t time_ns) {
  Thread& thread = ThreadOf(pid, tid);
  const size_t open = thread.stack.size();
  while (!thread.stack.empty()) Close(pid, tid, thread, time_ns, std::nullopt);
  return open;
}

FunctionStatsSummary FunctionStatsBuilder::Finish() {
  for (auto& [key, thread] : threads_) {
    while (!thread.stack.empty()) Close(key.first, key.second, thread, thread.last_ns, std::nullopt);
  }
  FunctionStatsSummary summary;
  summary.functions.reserve(functions_.size());
  for (Accumulator& acc : functions_) {
    FunctionStats& f = acc.stats;
    f.has_instructions = f.calls > 0 && !acc.missing_instructions;
    f.has_latency = f.calls > 0;
    if (!f.has_instructions) f.total_instructions = f.self_instructions = 0;
    f.p50_ns = Percentile(acc.buckets, f.calls, 0.50, f.min_ns, f.max_ns);
    f.p90_ns = Percentile(acc.buckets, f.calls, 0.90, f.min_ns, f.max_ns);
    f.p99_ns = Percentile(acc.buckets, f.calls, 0.99, f.min_ns, f.max_ns);
    summary.functions.push_back(std::move(f));
  }
  std::sort(summary.functions.begin(), summary.functions.end(), [](const FunctionStats& a, const FunctionStats& b) {
    return std::tie(b.total_ns, a.name) < std::tie(a.total_ns, b.name);
  });
  summary.slowest_of = options_.slowest_of;
  summary.slowest = slowest_;
  std::sort(summary.slowest.begin(), summary.slowest.end(), SlowerFirst);
  functions_.clear();
  function_index_.clear();
  threads_.clear();
  slowest_.clear();
  return summary;
}

namespace {

// One character per decade, its height the decade's share of the busiest one.
std::string Sparkline(const std::array<uint64_t, kLatencyDecades>& histogram) {
  static const char* const kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const uint64_t most = *std::max_element(histogram.begin(), histogram.end());
  std::string out;
  for (uint64_t count : histogram) {
    if (count == 0 || most == 0) {
      out += "·";
    } else {
      out += kBars[std::min<uint64_t>(7, (count * 8 - 1) / most)];
    }
  }
  return out;
}

std::string Instructions(const FunctionStats& f, uint64_t value) {
  return f.has_instructions ? absl::StrCat(value) : "-";
}

// The name, then where it is defined when known: the last column, so the others stay aligned.
std::string NameWithSource(const FunctionStats& f) {
  return f.source.empty() ? f.name : absl::StrCat(f.name, "  (", f.source, ")");
}

}  // namespace

std::string FormatFunctionStats(const FunctionStatsSummary& summary, size_t top) {
  std::string out;
  absl::StrAppend(&out, "top functions by total time:\n");
  absl::StrAppendFormat(&out, "  %10s %12s %12s %14s %14s %11s %11s %11s %11s  %-8s  %s\n", "calls", "total", "self",
                        "total insns", "self insns", "p50", "p90", "p99", "max", "latency", "name");
  absl::StrAppend(&out, "  (latency: calls per decade <100ns <1us <10us <100us <1ms <10ms <100ms >=100ms; p50/p90/p99 within 3%)\n");
  for (size_t i = 0; i < summary.functions.size() && i < top; ++i) {
    const FunctionStats& f = summary.functions[i];
    absl::StrAppendFormat(&out, "  %10u %12s %12s %14s %14s %11s %11s %11s %11s  %s  %s\n", f.calls,
                          FormatDurationNs(f.total_ns), FormatDurationNs(f.self_ns),
                          Instructions(f, f.total_instructions), Instructions(f, f.self_instructions),
                          FormatDurationNs(f.p50_ns), FormatDurationNs(f.p90_ns), FormatDurationNs(f.p99_ns),
                          FormatDurationNs(f.max_ns), Sparkline(f.histogram), NameWithSource(f));
  }
  std::vector<const FunctionStats*> by_self;
  for (const FunctionStats& f : summary.functions) by_self.push_back(&f);
  std::sort(by_self.begin(), by_self.end(), [](const FunctionStats* a, const FunctionStats* b) {
    return std::tie(b->self_ns, a->name) < std::tie(a->self_ns, b->name);
  });
  absl::StrAppend(&out, "top functions by self time:\n");
  absl::StrAppendFormat(&out, "  %12s %12s %10s  %s\n", "self", "total", "calls", "name");
  for (size_t i = 0; i < by_self.size() && i < top; ++i) {
    absl::StrAppendFormat(&out, "  %12s %12s %10u  %s\n", FormatDurationNs(by_self[i]->self_ns),
                          FormatDurationNs(by_self[i]->total_ns), by_self[i]->calls, by_self[i]->name);
  }
  if (!summary.slowest_of.empty()) {
    if (summary.slowest.empty()) {
      absl::StrAppendFormat(&out, "no calls of %s\n", summary.slowest_of);
    } else {
      auto chosen = std::find_if(summary.functions.begin(), summary.functions.end(),
                                 [&](const FunctionStats& f) { return f.name == summary.slowest_of; });
      absl::StrAppendFormat(&out, "slowest calls of %s:\n",
                            chosen != summary.functions.end() ? NameWithSource(*chosen) : summary.slowest_of);
      absl::StrAppendFormat(&out, "  %12s %20s %8s %8s %14s\n", "duration", "start (ts)", "pid", "tid", "instructions");
      for (const SlowCall& c : summary.slowest) {
        absl::StrAppendFormat(&out, "  %12s %20u %8u %8u %14u\n", FormatDurationNs(c.duration_ns), c.start_ns, c.pid,
                              c.tid, c.instructions);
      }
    }
  }
  return out;
}

nlohmann::ordered_json FunctionStatsObject(const FunctionStats& f) {
  nlohmann::ordered_json j;
  j["name"] = f.name;
  if (!f.source.empty()) j["source"] = f.source;
  j["calls"] = f.calls;
  j["total_ns"] = f.total_ns;
  j["self_ns"] = f.self_ns;
  if (f.has_instructions) {
    j["total_instructions"] = f.total_instructions;
    j["self_instructions"] = f.self_instructions;
  }
  if (f.has_latency) {
    j["min_ns"] = f.min_ns;
    j["p50_ns"] = f.p50_ns;
    j["p90_ns"] = f.p90_ns;
    j["p99_ns"] = f.p99_ns;
    j["max_ns"] = f.max_ns;
    j["histogram"] = f.histogram;
  }
  return j;
}

std::string FunctionStatsJson(const FunctionStatsSummary& summary, size_t top) {
  nlohmann::ordered_json functions = nlohmann::ordered_json::array();
  for (size_t i = 0; i < summary.functions.size() && (top == 0 || i < top); ++i) {
    functions.push_back(FunctionStatsObject(summary.functions[i]));
  }
  nlohmann::ordered_json out;
  out["functions"] = std::move(functions);
  out["histogram_bounds_ns"] = kLatencyDecadeBounds;
  if (!summary.slowest_of.empty()) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const SlowCall& c : summary.slowest) {
      calls.push_back({{"pid", c.pid}, {"tid", c.tid}, {"start_ns", c.start_ns}, {"duration_ns", c.duration_ns},
                       {"instructions", c.instructions}});
    }
    out["slowest"] = {{"function", summary.slowest_of}, {"calls", std::move(calls)}};
  }
  return out.dump(1) + "\n";
}

absl::StatusOr<FunctionStatsSummary> FunctionStatsFromJson(absl::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not JSON");
  if (!j.is_object() || !j.contains("functions") || !j["functions"].is_array()) {
    return absl::InvalidArgumentError("no \"functions\" array (write one with decode --summary --json)");
  }
  FunctionStatsSummary summary;
  for (const nlohmann::json& f : j["functions"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
      return absl::InvalidArgumentError("a function without a \"name\"");
    }
    FunctionStats s;
    s.name = f["name"].get<std::string>();
    if (f.contains("source") && f["source"].is_string()) s.source = f["source"].get<std::string>();
    const auto number = [&](const char* key, uint64_t* out) -> bool {
      if (!f.contains(key)) return false;
      if (!f[key].is_number_unsigned()) return false;
      *out = f[key].get<uint64_t>();
      return true;
    };
    if (!number("calls", &s.calls)) return absl::InvalidArgumentError(absl::StrCat(s.name, ": no \"calls\" count"));
    number("total_ns", &s.total_ns);
    number("self_ns", &s.self_ns);
    s.has_instructions = number("total_instructions", &s.total_instructions);
    number("self_instructions", &s.self_instructions);
    number("min_ns", &s.min_ns);
    s.has_latency = number("p50_ns", &s.p50_ns);
    number("p90_ns", &s.p90_ns);
    number("p99_ns", &s.p99_ns);
    number("max_ns", &s.max_ns);
    if (f.contains("histogram") && f["histogram"].is_array() && f["histogram"].size() == kLatencyDecades) {
      for (size_t i = 0; i < kLatencyDecades; ++i) {
        if (f["histogram"][i].is_number_unsigned()) s.histogram[i] = f["histogram"][i].get<uint64_t>();
      }
    }
    summary.functions.push_back(std::move(s));
  }
  return summary;
}

}  // namespace ptd::ftf
