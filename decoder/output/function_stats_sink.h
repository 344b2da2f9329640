#pragma once
// A SliceSink that feeds every slice of one thread to an ftf::FunctionStatsBuilder (the
// latency views of `decode --summary`) and passes it on unchanged.

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"

#include "decoder/output/slice_sink.h"
#include "ftf/function_stats.h"

namespace ptd::decoder {

class FunctionStatsSink : public SliceSink {
 public:
  FunctionStatsSink(ftf::FunctionStatsBuilder* stats, uint64_t pid, uint64_t tid, SliceSink* next)
      : stats_(stats), pid_(pid), tid_(tid), next_(next) {}

  void Begin(uint64_t time, absl::string_view name) override {
    stats_->Begin(pid_, tid_, time, name);
    next_->Begin(time, name);
  }
  void BeginWithSource(uint64_t time, absl::string_view name, const image::SourceFrame& source) override {
    auto [it, inserted] = locations_.try_emplace(&source);
    if (inserted) it->second = image::DefinitionLocation(source);
    stats_->Begin(pid_, tid_, time, name, it->second);
    next_->BeginWithSource(time, name, source);
  }
  void End(uint64_t time, const SliceCounts& counts) override {
    stats_->End(pid_, tid_, time, counts.instructions);
    next_->End(time, counts);
  }
  void Instant(uint64_t time, absl::string_view name, absl::string_view detail) override {
    next_->Instant(time, name, detail);
  }

 private:
  ftf::FunctionStatsBuilder* stats_;
  uint64_t pid_;
  uint64_t tid_;
  SliceSink* next_;
  absl::flat_hash_map<const image::SourceFrame*, std::string> locations_;  // DefinitionLocation's, by frame
};

}  // namespace ptd::decoder
