#include "common/host_info.h"

#include <cpuid.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>

namespace ptd {

HostInfo ReadHostInfo() {
  HostInfo info;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  info.cpu.vendor = "unknown";
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    if (std::strcmp(vendor, "GenuineIntel") == 0) info.cpu.vendor = "intel";
    if (std::strcmp(vendor, "AuthenticAMD") == 0) info.cpu.vendor = "amd";
  }
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    uint32_t family = (eax >> 8) & 0xf;
    uint32_t model = (eax >> 4) & 0xf;
    // Intel SDM: the extended fields apply for family 0xf, and model also for family 6.
    if (family == 0xf) family += (eax >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf) model += ((eax >> 16) & 0xf) << 4;
    info.cpu.family = family;
    info.cpu.model = model;
    info.cpu.stepping = eax & 0xf;
  }
  struct utsname u {};
  if (uname(&u) == 0) {
    info.kernel_release = u.release;
    info.hostname = u.nodename;
  }
  return info;
}

Cpuid15 ReadCpuid15() {
  Cpuid15 r;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 0x15) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(0x15, 0, a, b, c, d);
    r.eax = a;
    r.ebx = b;
    r.ecx = c;
  }
  return r;
}

}  // namespace ptd
