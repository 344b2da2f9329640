#pragma once
// Facts about the machine a trace is recorded on: the decoder needs the CPU identity to
// choose libipt errata, and users need the kernel release to interpret sideband.

#include <cstdint>
#include <string>

namespace ptd {

struct CpuId {
  std::string vendor;  // "intel", "amd" or "unknown"
  uint32_t family = 0;
  uint32_t model = 0;
  uint32_t stepping = 0;
  bool operator==(const CpuId&) const = default;
};

struct HostInfo {
  CpuId cpu;
  std::string kernel_release;
  std::string hostname;
  bool operator==(const HostInfo&) const = default;
};

// Reads cpuid (leaf 0 and 1, with the extended family/model rules) and uname.
HostInfo ReadHostInfo();

// cpuid leaf 0x15 (TSC / core crystal clock ratio); zeros when the leaf is absent.
struct Cpuid15 {
  uint32_t eax = 0;  // denominator
  uint32_t ebx = 0;  // numerator
  uint32_t ecx = 0;  // crystal clock in Hz, 0 when not enumerated
};
Cpuid15 ReadCpuid15();

}  // namespace ptd
