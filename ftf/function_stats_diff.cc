#include "ftf/function_stats_diff.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/units.h"
#include "ftf/function_stats_json.h"

namespace ptd::ftf {
namespace {

struct FieldInfo {
  DiffField field;
  const char* name;
  bool time;     // ns: limits take units, values print as durations
  bool latency;  // per call: FunctionStats::has_latency
};

constexpr FieldInfo kFields[] = {
    {DiffField::kCalls, "calls", false, false},
    {DiffField::kInstructions, "instructions", false, false},
    {DiffField::kSelfInstructions, "self_instructions", false, false},
    {DiffField::kTime, "time", true, false},
    {DiffField::kSelfTime, "self_time", true, false},
    {DiffField::kP50, "p50", true, true},
    {DiffField::kP99, "p99", true, true},
};

const FieldInfo& InfoOf(DiffField field) {
  for (const FieldInfo& f : kFields) {
    if (f.field == field) return f;
  }
  return kFields[0];
}

uint64_t ValueOf(const FunctionStats& s, DiffField field) {
  switch (field) {
    case DiffField::kCalls: return s.calls;
    case DiffField::kInstructions: return s.total_instructions;
    case DiffField::kSelfInstructions: return s.self_instructions;
    case DiffField::kTime: return s.total_ns;
    case DiffField::kSelfTime: return s.self_ns;
    case DiffField::kP50: return s.p50_ns;
    case DiffField::kP99: return s.p99_ns;
  }
  return 0;
}

std::string FormatValue(uint64_t value, DiffField field) {
  return InfoOf(field).time ? FormatDurationNs(value) : absl::StrCat(value);
}

int64_t Change(const std::optional<FunctionStats>& a, const std::optional<FunctionStats>& b, DiffField field) {
  return static_cast<int64_t>(b ? ValueOf(*b, field) : 0) - static_cast<int64_t>(a ? ValueOf(*a, field) : 0);
}

FunctionStats Totals(const FunctionStatsSummary& summary) {
  FunctionStats total;
  total.name = "total";
  for (const FunctionStats& f : summary.functions) {
    total.calls += f.calls;
    total.self_instructions += f.self_instructions;
    total.self_ns += f.self_ns;
    total.has_instructions = total.has_instructions || f.has_instructions;
  }
  total.total_instructions = total.self_instructions;
  total.total_ns = total.self_ns;
  return total;
}

std::string Signed(int64_t change, DiffField field) {
  if (change == 0) return "0";
  const std::string magnitude = FormatValue(static_cast<uint64_t>(std::llabs(change)), field);
  return absl::StrCat(change > 0 ? "+" : "-", magnitude);
}

std::string Percent(uint64_t a, uint64_t b) {
  if (a == 0) return b == 0 ? "" : "new";
  return absl::StrFormat("%+.1f%%", 100.0 * (static_cast<double>(b) - static_cast<double>(a)) / static_cast<double>(a));
}

}  // namespace

FunctionStatsDiff DiffFunctionStats(const FunctionStatsSummary& a, const FunctionStatsSummary& b) {
  std::map<std::string, FunctionChange> by_name;
  for (const FunctionStats& f : a.functions) {
    FunctionChange& c = by_name[f.name];
    c.name = f.name;
    c.a = f;
  }
  for (const FunctionStats& f : b.functions) {
    FunctionChange& c = by_name[f.name];
    c.name = f.name;
    c.b = f;
  }
  FunctionStatsDiff diff;
  for (auto& [name, change] : by_name) diff.functions.push_back(std::move(change));
  std::stable_sort(diff.functions.begin(), diff.functions.end(), [](const FunctionChange& x, const FunctionChange& y) {
    // Own work first: where the change is, not every caller above it.
    const int64_t xs = std::llabs(Change(x.a, x.b, DiffField::kSelfInstructions));
    const int64_t ys = std::llabs(Change(y.a, y.b, DiffField::kSelfInstructions));
    if (xs != ys) return xs > ys;
    const int64_t xi = std::llabs(Change(x.a, x.b, DiffField::kInstructions));
    const int64_t yi = std::llabs(Change(y.a, y.b, DiffField::kInstructions));
    if (xi != yi) return xi > yi;
    return std::llabs(Change(x.a, x.b, DiffField::kTime)) > std::llabs(Change(y.a, y.b, DiffField::kTime));
  });
  diff.total_a = Totals(a);
  diff.total_b = Totals(b);
  return diff;
}

absl::StatusOr<DiffGate> ParseDiffGate(absl::string_view text) {
  DiffGate gate;
  gate.text = std::string(text);
  absl::string_view rest = text;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "regression gate '", text, "': ", why,
        " (form: [FUNCTION:|total:]FIELD>+LIMIT, FIELD one of calls, instructions, self_instructions, time, "
        "self_time, p50, p99; LIMIT like +2% or +1000 or +1ms)"));
  };
  const size_t gt = rest.rfind('>');
  if (gt == absl::string_view::npos) return bad("no '>'");
  absl::string_view left = rest.substr(0, gt);
  absl::string_view limit = absl::StripAsciiWhitespace(rest.substr(gt + 1));
  // The scope is what precedes the last ':' (C++ names hold "::").
  const size_t colon = left.rfind(':');
  absl::string_view field = left;
  if (colon != absl::string_view::npos) {
    gate.scope = std::string(absl::StripAsciiWhitespace(left.substr(0, colon)));
    field = left.substr(colon + 1);
    if (gate.scope.empty()) return bad("empty function name before ':'");
  }
  field = absl::StripAsciiWhitespace(field);
  const FieldInfo* info = nullptr;
  for (const FieldInfo& f : kFields) {
    if (field == f.name) info = &f;
  }
  if (info == nullptr) return bad(absl::StrCat("unknown field '", field, "'"));
  gate.field = info->field;
  if (!absl::ConsumePrefix(&limit, "+")) return bad("the limit is a growth: it starts with '+'");
  if (absl::ConsumeSuffix(&limit, "%")) {
    gate.relative = true;
    if (!absl::SimpleAtod(limit, &gate.limit) || gate.limit < 0) return bad("not a percentage");
  } else if (info->time) {
    absl::StatusOr<uint64_t> ns = ParseDurationNs(limit);
    if (!ns.ok()) return bad(ns.status().message());
    gate.limit = static_cast<double>(*ns);
  } else {
    uint64_t count = 0;
    if (!absl::SimpleAtoi(limit, &count)) return bad("not a count");
    gate.limit = static_cast<double>(count);
  }
  return gate;
}

std::vector<std::string> CheckDiffGates(const FunctionStatsDiff& diff, const std::vector<DiffGate>& gates) {
  std::vector<std::string> broken;
  for (const DiffGate& gate : gates) {
    const auto check = [&](const std::string& name, const std::optional<FunctionStats>& a,
                           const std::optional<FunctionStats>& b) {
      if (!b) return;                  // vanished: no regression
      if (!a && gate.relative) return;  // new: no base to grow from
      if (InfoOf(gate.field).latency && !(b->has_latency && (!a || a->has_latency))) {
        broken.push_back(absl::StrCat(name, ": ", InfoOf(gate.field).name, " unknown in run ", b->has_latency ? "A" : "B",
                                      " (a summary without per-call latency), gate '", gate.text, "'"));
        return;
      }
      const uint64_t before = a ? ValueOf(*a, gate.field) : 0;
      const uint64_t after = ValueOf(*b, gate.field);
      if (after <= before) return;
      const double grew = static_cast<double>(after - before);
      const double measure = gate.relative ? (before == 0 ? INFINITY : 100.0 * grew / static_cast<double>(before)) : grew;
      if (measure <= gate.limit) return;
      const DiffField f = gate.field;
      broken.push_back(absl::StrCat(
          name, ": ", InfoOf(f).name, " ", gate.relative ? Percent(before, after) : Signed(static_cast<int64_t>(grew), f),
          " (", FormatValue(before, f), " -> ", FormatValue(after, f), "), over '", gate.text, "'"));
    };
    if (gate.scope == "total") {
      check("total", diff.total_a, diff.total_b);
      continue;
    }
    bool found = gate.scope.empty();
    for (const FunctionChange& c : diff.functions) {
      if (!gate.scope.empty() && c.name != gate.scope) continue;
      found = true;
      check(c.name, c.a, c.b);
    }
    if (!found) broken.push_back(absl::StrCat(gate.scope, ": in neither run (gate '", gate.text, "')"));
  }
  return broken;
}

std::string FormatFunctionStatsDiff(const FunctionStatsDiff& diff, size_t top) {
  std::string out;
  const auto row = [&](const std::string& name, const std::optional<FunctionStats>& a,
                       const std::optional<FunctionStats>& b) {
    const auto v = [](const std::optional<FunctionStats>& s, DiffField f) { return s ? ValueOf(*s, f) : 0; };
    const char* mark = !a ? "  (new)" : !b ? "  (gone)" : "";
    absl::StrAppendFormat(&out, "%14s %14s %12s %8s  %9s %9s  %11s %11s %8s  %10s %10s  %s%s\n",
                          absl::StrCat(v(a, DiffField::kInstructions)), absl::StrCat(v(b, DiffField::kInstructions)),
                          Signed(Change(a, b, DiffField::kInstructions), DiffField::kInstructions),
                          Percent(v(a, DiffField::kInstructions), v(b, DiffField::kInstructions)),
                          absl::StrCat(v(a, DiffField::kCalls)), absl::StrCat(v(b, DiffField::kCalls)),
                          FormatDurationNs(v(a, DiffField::kTime)), FormatDurationNs(v(b, DiffField::kTime)),
                          Percent(v(a, DiffField::kTime), v(b, DiffField::kTime)),
                          FormatDurationNs(v(a, DiffField::kP99)), FormatDurationNs(v(b, DiffField::kP99)), name, mark);
  };
  absl::StrAppendFormat(&out, "%14s %14s %12s %8s  %9s %9s  %11s %11s %8s  %10s %10s  %s\n", "insns A", "insns B",
                        "change", "", "calls A", "calls B", "time A", "time B", "", "p99 A", "p99 B", "function");
  row("(total: self summed)", diff.total_a, diff.total_b);
  size_t shown = 0;
  size_t changed = 0;
  for (const FunctionChange& c : diff.functions) {
    const bool same = c.a && c.b && ValueOf(*c.a, DiffField::kInstructions) == ValueOf(*c.b, DiffField::kInstructions) &&
                      c.a->calls == c.b->calls;
    if (!same) ++changed;
    if (top != 0 && shown >= top) continue;
    row(c.name, c.a, c.b);
    ++shown;
  }
  absl::StrAppendFormat(&out, "%d functions, %d with other instructions or calls in B%s\n", diff.functions.size(),
                        changed, shown < diff.functions.size() ? absl::StrFormat(" (%d shown)", shown) : "");
  return out;
}

std::string FunctionStatsDiffJson(const FunctionStatsDiff& diff) {
  nlohmann::ordered_json out;
  out["total"] = {{"a", FunctionStatsObject(diff.total_a)}, {"b", FunctionStatsObject(diff.total_b)}};
  nlohmann::ordered_json functions = nlohmann::ordered_json::array();
  for (const FunctionChange& c : diff.functions) {
    nlohmann::ordered_json j;
    j["name"] = c.name;
    j["a"] = c.a ? FunctionStatsObject(*c.a) : nlohmann::ordered_json(nullptr);
    j["b"] = c.b ? FunctionStatsObject(*c.b) : nlohmann::ordered_json(nullptr);
    functions.push_back(std::move(j));
  }
  out["functions"] = std::move(functions);
  return out.dump(1) + "\n";
}

}  // namespace ptd::ftf
