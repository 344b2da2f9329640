// PacketQuery (decoder/packet_query.h) on hostile PT bytes: where it accepts the stream,
// every call gives what libipt's query decoder gives (tests/decoder/packet_query_lockstep.h);
// the first input byte picks the call sequence. Never a crash, never a difference.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "decoder/packet_query.h"
#include "tests/decoder/packet_query_lockstep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint64_t seed = data[0];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  pt_config config;
  pt_config_init(&config);
  config.errata.bdm70 = (seed & 1) != 0;
  config.begin = reinterpret_cast<uint8_t*>(bytes.data());
  config.end = config.begin + bytes.size();
  if (!ptd::decoder::PacketQuery::Accepts(config)) return 0;
  ptd::decoder::testing::Lockstep run = ptd::decoder::testing::RunLockstep(bytes, config, seed, 100000);
  if (!run.difference.empty()) {
    std::fprintf(stderr, "PacketQuery differs from pt_qry: %s\n", run.difference.c_str());
    std::abort();
  }
  return 0;
}
