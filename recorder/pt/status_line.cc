#include "recorder/pt/status_line.h"

#include <unistd.h>

#include "absl/strings/str_format.h"

namespace ptd::pt {

std::string FormatStatusLine(double seconds, const RecordCounters& counters) {
  return absl::StrFormat("recording %7.1fs  %9.2f MiB  %llu snapshot%s  %llu lost", seconds,
                         static_cast<double>(counters.bytes) / (1 << 20),
                         static_cast<unsigned long long>(counters.snapshots),
                         counters.snapshots == 1 ? "" : "s",
                         static_cast<unsigned long long>(counters.lost));
}

StatusLine::StatusLine(std::FILE* out, bool quiet)
    : out_(out), enabled_(!quiet && isatty(fileno(out)) == 1) {}

void StatusLine::Update(double seconds, const RecordCounters& counters) {
  if (!enabled_) return;
  std::fprintf(out_, "\r%s\033[K", FormatStatusLine(seconds, counters).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void StatusLine::Finish() {
  if (drawn_) std::fputc('\n', out_);
  drawn_ = false;
}

}  // namespace ptd::pt
