#include "image/symbol_table.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

#include "image/demangle.h"

namespace ptd::image {

namespace {
// A zero-sized symbol (hand-written assembly often has no .size) extends to the next
// symbol, but never beyond this, so one stray label cannot swallow a whole module.
constexpr uint64_t kMaxImpliedSymbolSize = 1 << 20;

// The name of the function `name` was split off from by GCC's hot/cold partitioning
// (main.cold, foo.cold.3; demangled C++: "foo(int) [clone .cold]", "... [clone .cold.3]"),
// or empty.
absl::string_view ParentOfSplitPart(absl::string_view name) {
  const bool cxx = absl::ConsumeSuffix(&name, "]");
  // Drop a ".N" number, then expect ".cold".
  absl::string_view head = name;
  const size_t dot = head.rfind('.');
  if (dot != absl::string_view::npos && dot + 1 < head.size() &&
      std::all_of(head.begin() + dot + 1, head.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    head = head.substr(0, dot);
  }
  if (!absl::ConsumeSuffix(&head, ".cold")) return {};
  if (cxx && !absl::ConsumeSuffix(&head, " [clone ")) return {};
  return head;
}
}  // namespace

void SymbolTable::Add(uint64_t start, uint64_t size, absl::string_view name, bool plt, bool local) {
  std::string readable = Demangle(name);
  Symbol symbol;
  symbol.start = start;
  symbol.end = size == 0 ? start : start + size;
  symbol.name_offset = static_cast<uint32_t>(names_.size());
  symbol.name_size = static_cast<uint32_t>(readable.size());
  symbol.plt = plt;
  symbol.local = local;
  names_ += readable;
  symbols_.push_back(symbol);
}

void SymbolTable::Finish() {
  // Sized symbols first among equal starts so an alias without size loses to the real one.
  // Of aliases, the name a user calls (as perf picks): global before local (fib before
  // fib.localalias), fewer leading underscores (printf before _IO_printf), then the shorter
  // name and the first in order, so a file always gets the same names.
  std::sort(symbols_.begin(), symbols_.end(), [this](const Symbol& a, const Symbol& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end - a.start != b.end - b.start) return (a.end - a.start) > (b.end - b.start);
    if (a.local != b.local) return b.local;
    const absl::string_view name_a = name(a), name_b = name(b);
    const size_t underscores_a = name_a.find_first_not_of('_'), underscores_b = name_b.find_first_not_of('_');
    if (underscores_a != underscores_b) return underscores_a < underscores_b;
    if (name_a.size() != name_b.size()) return name_a.size() < name_b.size();
    return name_a < name_b;
  });
  symbols_.erase(std::unique(symbols_.begin(), symbols_.end(),
                             [](const Symbol& a, const Symbol& b) { return a.start == b.start; }),
                 symbols_.end());
  // A zero-sized symbol (an assembly label: _start, _dl_start_user) covers the code up to
  // the next symbol, but only where no sized symbol covers it: a label inside a sized
  // function is dropped, so it never takes the function's tail.
  uint64_t covered_to = 0;  // end of the sized symbols seen so far
  size_t kept = 0;
  for (size_t i = 0; i < symbols_.size(); ++i) {
    Symbol s = symbols_[i];
    if (s.end > s.start) {
      covered_to = std::max(covered_to, s.end);
    } else {
      if (s.start < covered_to) continue;
      uint64_t next = i + 1 < symbols_.size() ? symbols_[i + 1].start : s.start + 1;
      s.end = std::min(next, s.start + kMaxImpliedSymbolSize);
      if (s.end <= s.start) s.end = s.start + 1;
    }
    symbols_[kept++] = s;
  }
  symbols_.resize(kept);
  LinkSplitParts();
}

void SymbolTable::LinkSplitParts() {
  absl::flat_hash_map<absl::string_view, uint64_t> start_of;
  for (const Symbol& s : symbols_) {
    if (!ParentOfSplitPart(name(s)).empty()) {
      if (start_of.empty()) {
        for (const Symbol& whole : symbols_) start_of.emplace(name(whole), whole.start);
      }
      break;
    }
  }
  if (start_of.empty()) return;
  for (Symbol& s : symbols_) {
    const absl::string_view parent = ParentOfSplitPart(name(s));
    if (parent.empty()) continue;
    auto it = start_of.find(parent);
    if (it != start_of.end()) s.parent_start = it->second;
  }
}

const Symbol* SymbolTable::Find(uint64_t address) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                             [](uint64_t a, const Symbol& s) { return a < s.start; });
  // Walk back a little: a large symbol may contain a smaller one that ended before
  // `address` (nested local labels).
  for (int steps = 0; it != symbols_.begin() && steps < 4; ++steps) {
    --it;
    if (address < it->end) return &*it;
  }
  return nullptr;
}

}  // namespace ptd::image
