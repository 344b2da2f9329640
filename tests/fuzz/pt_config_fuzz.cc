// intel_pt config parsing: the first line is a sysfs format field ("config:14-17"), the
// rest a --pt-config string applied to a Skylake-like PMU. Any bytes: a value or an
// error, never a crash; an encoded value decodes back to itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "recorder/pt/pmu_format.h"
#include "recorder/pt/pt_event_config.h"

namespace {

ptd::pt::PtPmuInfo SkylakePmu() {
  ptd::pt::PtPmuInfo pmu;
  pmu.type = 8;
  const char* fields[][2] = {{"pt", "config:0"},         {"cyc", "config:1"},
                             {"mtc", "config:9"},        {"tsc", "config:10"},
                             {"noretcomp", "config:11"}, {"ptw", "config:12"},
                             {"branch", "config:13"},    {"mtc_period", "config:14-17"},
                             {"cyc_thresh", "config:19-22"}, {"psb_period", "config:24-27"}};
  for (auto& f : fields) pmu.format[f[0]] = *ptd::pt::ParsePmuFormatField(f[1], "seed");
  pmu.caps = {{"psb_cyc", "1"}, {"mtc", "1"}, {"ptwrite", "0"}, {"mtc_periods", "249"},
              {"cycle_thresholds", "3fff"}, {"psb_periods", "3f"}};
  return pmu;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  const size_t nl = text.find('\n');
  const std::string field_text = text.substr(0, nl);
  const std::string config_text = nl == std::string::npos ? "" : text.substr(nl + 1);

  auto field = ptd::pt::ParsePmuFormatField(field_text, "fuzz/format");
  if (field.ok()) {
    const int width = field->Width();
    const uint64_t value = width >= 64 ? 0x5a5a5a5a5a5a5a5aull : (0x5a5a5a5a5a5a5a5aull & ((1ull << width) - 1));
    ptd::pt::PmuConfigWords words{};
    if (!field->Encode(value, words).ok() || field->Decode(words) != value) std::abort();
  }
  static const ptd::pt::PtPmuInfo pmu = SkylakePmu();
  auto config = ptd::pt::BuildPtEventConfig(pmu, ptd::TimingPreset::kNormal, config_text, false);
  if (config.ok()) {
    for (const auto& [name, value] : config->fields) {
      if (pmu.format.at(name).Decode(config->words) != value) std::abort();
    }
  }
  return 0;
}
