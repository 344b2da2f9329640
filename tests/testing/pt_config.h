#pragma once
// libipt's configuration for a test's own decoder over a trace directory's bytes: the
// buffer and the timing settings meta.json records (no errata: the recording CPUs here
// are emulated).

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>

#include "common/trace_meta.h"

namespace ptd::testing {

inline pt_config TracePtConfig(const TraceMeta& meta, uint8_t* begin, size_t size) {
  pt_config config;
  pt_config_init(&config);
  config.begin = begin;
  config.end = begin + size;
  config.cpuid_0x15_eax = meta.pt.cpuid_0x15_eax;
  config.cpuid_0x15_ebx = meta.pt.cpuid_0x15_ebx;
  config.mtc_freq = static_cast<uint8_t>(meta.pt.mtc_freq);
  config.nom_freq = static_cast<uint8_t>(meta.pt.nom_freq);
  return config;
}

}  // namespace ptd::testing
