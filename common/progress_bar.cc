#include "common/progress_bar.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/units.h"

namespace ptd {

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool enabled, std::FILE* out)
    : label_(std::move(label)),
      total_(total_bytes),
      enabled_(enabled),
      out_(out),
      start_(std::chrono::steady_clock::now()) {}

bool ProgressBar::StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

std::string ProgressBar::Line(const std::string& label, uint64_t done, uint64_t total, double seconds) {
  constexpr int kWidth = 20;
  done = std::min(done, total);
  const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::string line = absl::StrFormat("%s [%s] %3d%%", label, bar, static_cast<int>(fraction * 100));
  if (seconds > 0.2 && done > 0) {
    const double rate = static_cast<double>(done) / seconds;
    const auto left = static_cast<uint64_t>(static_cast<double>(total - done) / rate + 0.5);
    absl::StrAppendFormat(&line, "  %s/s  %d:%02d left", FormatByteSize(static_cast<uint64_t>(rate)), left / 60,
                          left % 60);
  }
  return line;
}

void ProgressBar::Update(uint64_t done_bytes) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const std::string line = Line(label_, done_bytes, total_, std::chrono::duration<double>(now - start_).count());
  // Spaces over what a longer previous line left.
  const size_t pad = last_width_ > line.size() ? last_width_ - line.size() : 0;
  std::fprintf(out_, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
  std::fflush(out_);
  last_width_ = line.size();
}

void ProgressBar::Finish(bool completed) {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (last_width_ == 0) return;  // never drawn: nothing to end
  if (completed) {
    const std::string line = absl::StrFormat("%s: done", label_);
    const size_t pad = last_width_ > line.size() ? last_width_ - line.size() : 0;
    std::fprintf(out_, "\r%s%*s\n", line.c_str(), static_cast<int>(pad), "");
  } else {
    std::fprintf(out_, "\n");
  }
  std::fflush(out_);
}

}  // namespace ptd
