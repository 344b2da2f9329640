#pragma once
// Parses what `perf report -D` prints (the oracle outputs in ../shared/samples, or a
// live run of perf) into plain lists, so tests compare our reader with perf's.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ptd::testing {

struct OracleRecord {
  uint64_t offset = 0, size = 0;
  uint32_t type = 0;
};

struct OracleAuxtrace {
  uint64_t size = 0, offset = 0, reference = 0;
  uint32_t idx = 0;
  int32_t tid = -1, cpu = -1;
};

// One line of the packet dump: offset in the buffer, packet name ("TIP", "TNT" ...)
// and the rest of the line ("0xd794", "TTNTTT (6)").
struct OraclePacket {
  uint64_t offset = 0;
  std::string name;
  std::string detail;
};

struct PerfReportDump {
  std::vector<OracleRecord> records;                  // "0x3a0@file [0x60]: event: 1"
  std::vector<OracleAuxtrace> auxtrace;               // PERF_RECORD_AUXTRACE lines
  std::map<std::string, std::string> auxtrace_info;   // "PMU Type" -> "6"
  std::vector<std::vector<OraclePacket>> packets;     // per AUXTRACE buffer, PAD lines dropped
};

// `text` is the whole output of `perf report -D`.
PerfReportDump ParsePerfReportDump(const std::string& text);

// Reads a .gz (or plain) text file; empty on failure.
std::string ReadMaybeGzip(const std::string& path);

}  // namespace ptd::testing
