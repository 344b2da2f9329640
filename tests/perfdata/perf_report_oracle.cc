#include "tests/perfdata/perf_report_oracle.h"

#include <zlib.h>

#include <regex>
#include <sstream>

namespace ptd::testing {

std::string ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  gzclose(f);
  return out;
}

PerfReportDump ParsePerfReportDump(const std::string& text) {
  static const std::regex kRecord(R"(^0x([0-9a-f]+)@\S+ \[0x([0-9a-f]+)\]: event: (\d+))");
  static const std::regex kAux(
      R"(PERF_RECORD_AUXTRACE size: 0x([0-9a-f]+)\s+offset: (0x[0-9a-f]+|0)\s+ref: 0x([0-9a-f]+)\s+idx: (\d+)\s+tid: (-?\d+)\s+cpu: (-?\d+))");
  static const std::regex kInfo(R"(^  (\S.*?) +(\S*) *$)");
  static const std::regex kPacket(R"(^\.  ([0-9a-f]{8}):  (?:[0-9a-f]{2} )+\s*(\S+) ?(.*)$)");
  PerfReportDump dump;
  std::istringstream in(text);
  std::string line;
  bool in_info = false;
  bool in_packets = false;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kRecord)) {
      dump.records.push_back({std::stoull(m[1], nullptr, 16), std::stoull(m[2], nullptr, 16),
                              static_cast<uint32_t>(std::stoul(m[3]))});
      in_packets = false;
      continue;
    }
    if (line.find("PERF_RECORD_AUXTRACE_INFO") != std::string::npos) {
      in_info = true;
      continue;
    }
    if (in_info) {
      if (std::regex_match(line, m, kInfo)) {
        dump.auxtrace_info[m[1]] = m[2];
        continue;
      }
      in_info = false;
    }
    if (std::regex_search(line, m, kAux)) {
      dump.auxtrace.push_back({std::stoull(m[1], nullptr, 16), std::stoull(m[2], nullptr, 0),
                               std::stoull(m[3], nullptr, 16), static_cast<uint32_t>(std::stoul(m[4])),
                               std::stoi(m[5]), std::stoi(m[6])});
      continue;
    }
    if (line.find("Intel Processor Trace data: size") != std::string::npos) {
      dump.packets.emplace_back();
      in_packets = true;
      continue;
    }
    if (in_packets && std::regex_match(line, m, kPacket)) {
      if (m[2] != "PAD") dump.packets.back().push_back({std::stoull(m[1], nullptr, 16), m[2], m[3]});
    }
  }
  return dump;
}

}  // namespace ptd::testing
