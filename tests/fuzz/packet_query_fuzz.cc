// PacketQuery (decoder/packets/packet_query.h) on hostile PT bytes: where it accepts the stream,
// every call gives what libipt's query decoder gives (tests/decoder/packet_query_lockstep.h);
// the first input byte picks the call sequence and the config. Never a crash, never a difference.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "decoder/packets/packet_query.h"
#include "tests/decoder/packet_query_lockstep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint64_t seed = data[0];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  pt_config config;
  pt_config_init(&config);
  config.errata.bdm70 = (seed & 1) != 0;
  // Timing configs (TMA/MTC/CYC): libipt's time and calibration take other paths with
  // each, and the Skylake errata (SKL168, SKD007) with bit 4.
  static constexpr uint8_t kMtcFreqs[] = {0, 3, 8, 23};
  config.mtc_freq = kMtcFreqs[(seed >> 1) & 3];
  config.nom_freq = (seed & 8) != 0 ? 12 : 0;
  config.cpuid_0x15_eax = (seed & 32) != 0 ? 2 : 0;
  config.cpuid_0x15_ebx = (seed & 32) != 0 ? 100 : 0;
  config.errata.skl168 = (seed & 16) != 0;
  config.errata.skd007 = (seed & 16) != 0;
  config.begin = reinterpret_cast<uint8_t*>(bytes.data());
  config.end = config.begin + bytes.size();
  if (!ptd::decoder::PacketQuery::Accepts(config)) return 0;
  // Bit 6: index chunks of 3 packets, so reads cross chunk boundaries everywhere.
  const uint64_t chunk_packets = (seed & 64) != 0 ? 3 : ptd::decoder::PacketQuery::kIndexChunkPackets;
  ptd::decoder::testing::Lockstep run =
      ptd::decoder::testing::RunLockstep(bytes, config, seed, 100000, 1, chunk_packets);
  if (!run.difference.empty()) {
    std::fprintf(stderr, "PacketQuery differs from pt_qry: %s\n", run.difference.c_str());
    std::abort();
  }
  return 0;
}
