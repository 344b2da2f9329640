#pragma once
// A one-line progress bar for long decodes and imports, redrawn in place on a terminal:
//   decoding [#########...........]  45%  12.3 MB/s  0:07 left
// Drawn only when enabled (callers pass "stderr is a terminal" or a --progress flag), at
// most ten times a second, so callers may update it as often as they like.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ptd {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled, std::FILE* out = stderr);
  ~ProgressBar() { Finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done_bytes` of the total are done.
  void Update(uint64_t done_bytes);
  // Ends the line (once): "done" after the label when `completed`, else left as is.
  void Finish(bool completed = true);

  // The line for `done` bytes after `seconds` (tests).
  static std::string Line(const std::string& label, uint64_t done, uint64_t total, double seconds);

  // True when stderr is a terminal.
  static bool StderrIsTerminal();

 private:
  std::string label_;
  uint64_t total_;
  bool enabled_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  size_t last_width_ = 0;
  bool finished_ = false;
};

}  // namespace ptd
