#include "decoder/flow/pt_stream_sync.h"

#include <algorithm>
#include <cstring>

namespace ptd::decoder {

pt_config MakeConfig(const PtDecodeConfig& config, const uint8_t* begin, size_t size, bool* errata_ok) {
  pt_config c;
  pt_config_init(&c);
  c.begin = const_cast<uint8_t*>(begin);
  c.end = c.begin + size;
  if (config.cpu.vendor == "intel") {
    c.cpu.vendor = pcv_intel;
    c.cpu.family = static_cast<uint16_t>(config.cpu.family);
    c.cpu.model = static_cast<uint8_t>(config.cpu.model);
    c.cpu.stepping = static_cast<uint8_t>(config.cpu.stepping);
    if (pt_cpu_errata(&c.errata, &c.cpu) < 0) {
      // 2.0.5 does not know newer models: decode without errata.
      std::memset(&c.errata, 0, sizeof c.errata);
      *errata_ok = false;
    }
  }
  c.cpuid_0x15_eax = config.pt.cpuid_0x15_eax;
  c.cpuid_0x15_ebx = config.pt.cpuid_0x15_ebx;
  c.nom_freq = static_cast<uint8_t>(config.pt.nom_freq);
  c.mtc_freq = static_cast<uint8_t>(config.pt.mtc_freq);
  // A union: these bits mean other things (tick events) to the instruction decoder.
  if (config.kind != DecoderKind::kInsn) {
    c.flags.variant.block.end_on_call = 1;
    c.flags.variant.block.end_on_jump = 1;
  }
  return c;
}

bool NextSyncPoint(const std::vector<uint64_t>& psbs, uint64_t previous_call, uint64_t last_sync,
                   bool synced_once, uint64_t* out) {
  uint64_t from = previous_call;
  if (synced_once && from <= last_sync) from = last_sync + 1;
  auto it = std::lower_bound(psbs.begin(), psbs.end(), from);
  if (it == psbs.end()) return false;
  *out = *it;
  return true;
}

bool IsPsbAnchor(const pt_event& event) {
  if (!event.status_update) return false;
  switch (event.type) {
    case ptev_exec_mode:
    case ptev_async_paging:
    case ptev_async_vmcs:
      return true;
    case ptev_tsx:
      return !event.ip_suppressed;
    default:
      return false;
  }
}

}  // namespace ptd::decoder
