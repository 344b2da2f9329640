#pragma once
// The one-line progress display on stderr while recording: time, bytes captured,
// snapshots, lost chunks. Redrawn in place with '\r'; silent unless stderr is a terminal.

#include <cstdint>
#include <cstdio>
#include <string>

namespace ptd::pt {

struct RecordCounters {
  uint64_t bytes = 0;       // PT bytes written to disk
  uint64_t snapshots = 0;   // snapshot chunks taken
  uint64_t lost = 0;        // chunks with truncation, collision or a gap before them
};

std::string FormatStatusLine(double seconds, const RecordCounters& counters);

class StatusLine {
 public:
  // Enabled when `out` is a terminal and not `quiet`.
  StatusLine(std::FILE* out, bool quiet);
  bool enabled() const { return enabled_; }
  void Update(double seconds, const RecordCounters& counters);
  // Ends the line so later messages start on their own.
  void Finish();

 private:
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace ptd::pt
