#pragma once
// A SliceSink that keeps what arrives as text lines, plus checks of slice nesting.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "decoder/output/slice_sink.h"

namespace ptd::decoder::testing {

class RecordingSink : public SliceSink {
 public:
  void Begin(uint64_t time, absl::string_view name) override {
    if (time < last_time_) out_of_order_ = true;
    last_time_ = std::max(last_time_, time);
    open_.push_back(std::string(name));
    max_depth_ = std::max(max_depth_, open_.size());
    lines_.push_back(absl::StrCat("B ", name));
    begin_times_.push_back(time);
  }
  // Source locations kept per slice name ("file:line", call site "file:line" or "").
  void BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) override {
    Begin(time, name);
    std::string& decl = declared_[std::string(name)];
    decl = absl::StrCat(source.decl_file, ":", source.decl_line);
    if (source.inlined) call_sites_[std::string(name)].insert(absl::StrCat(source.call_file, ":", source.call_line));
  }
  const std::map<std::string, std::string>& declared() const { return declared_; }
  const std::map<std::string, std::set<std::string>>& call_sites() const { return call_sites_; }
  void End(uint64_t time, const SliceCounts& counts) override {
    if (open_.empty()) {
      unbalanced_ = true;
      return;
    }
    if (time < begin_times_.back()) out_of_order_ = true;
    lines_.push_back(absl::StrCat("E ", open_.back(), " i=", counts.instructions));
    if (open_.size() == 1) top_level_instructions_ += counts.instructions;
    open_.pop_back();
    begin_times_.pop_back();
  }
  void Instant(uint64_t, absl::string_view name, absl::string_view) override {
    lines_.push_back(absl::StrCat("I ", name));
  }
  // Names only, without instruction counts (for readable expectations).
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const std::string& l : lines_) out.push_back(l.substr(0, l.find(" i=")));
    return out;
  }
  const std::vector<std::string>& lines() const { return lines_; }
  // Instructions inside outermost slices (every instruction of the thread, once).
  uint64_t TopLevelInstructions() const { return top_level_instructions_; }
  size_t open() const { return open_.size(); }
  size_t max_depth() const { return max_depth_; }
  bool unbalanced() const { return unbalanced_; }
  bool out_of_order() const { return out_of_order_; }

 private:
  std::vector<std::string> lines_;
  std::map<std::string, std::string> declared_;
  std::map<std::string, std::set<std::string>> call_sites_;
  std::vector<std::string> open_;
  std::vector<uint64_t> begin_times_;
  uint64_t last_time_ = 0;
  uint64_t top_level_instructions_ = 0;
  size_t max_depth_ = 0;
  bool unbalanced_ = false;
  bool out_of_order_ = false;
};

}  // namespace ptd::decoder::testing
