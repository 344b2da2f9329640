// PMU discovery and event configuration against fake sysfs trees shaped like real ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "recorder/pt/pmu_format.h"
#include "recorder/pt/pt_event_config.h"
#include "recorder/pt/pt_pmu.h"
#include "tests/recorder_pt/fake_sysfs.h"
#include "tests/testing/test_util.h"

namespace ptd::pt {
namespace {

using ::testing::HasSubstr;
using testing::FakePtSysfs;

TEST(PmuFormatTest, ParsesSingleBitRangeAndSplitFields) {
  auto one = ParsePmuFormatField("config:10\n", "f");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->word, 0);
  EXPECT_EQ(one->Width(), 1);
  auto range = ParsePmuFormatField("config1:14-17", "f");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->word, 1);
  EXPECT_EQ(range->Width(), 4);
  auto split = ParsePmuFormatField("config:0-1,60-61", "f");
  ASSERT_TRUE(split.ok());
  PmuConfigWords words{};
  ASSERT_TRUE(split->Encode(0b1110, words).ok());
  // Low two bits of the value go to bits 0-1, the next two to 60-61.
  EXPECT_EQ(words[0], (0b10ull) | (0b11ull << 60));
  EXPECT_EQ(split->Decode(words), 0b1110u);
}

TEST(PmuFormatTest, RejectsMalformedFieldsNamingTheFile) {
  for (const char* bad : {"", "config", "cfg:1", "config:64", "config:5-3", "config:a",
                          "config:1-2-3", "config:0-63,1"}) {
    auto field = ParsePmuFormatField(bad, "/sys/x/format/tsc");
    EXPECT_FALSE(field.ok()) << bad;
    if (!field.ok()) {
      EXPECT_THAT(std::string(field.status().message()), HasSubstr("format/tsc"));
    }
  }
}

TEST(PmuFormatTest, EncodeRefusesValuesWiderThanTheField) {
  auto field = ParsePmuFormatField("config:14-17", "f");
  ASSERT_TRUE(field.ok());
  PmuConfigWords words{};
  EXPECT_TRUE(field->Encode(15, words).ok());
  EXPECT_FALSE(field->Encode(16, words).ok());
}

TEST(PtPmuTest, MissingPmuGivesTheExactMessage) {
  ptd::testing::TempDir root;
  auto pmu = DiscoverPtPmu(root.path());
  ASSERT_FALSE(pmu.ok());
  EXPECT_EQ(pmu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(pmu.status().message()),
            "no intel_pt PMU on this machine (AMD, VM, or old kernel); use --emulate");
}

TEST(PtPmuTest, ReadsTypeFormatCapsAndRatios) {
  ptd::testing::TempDir root;
  FakePtSysfs sysfs;
  sysfs.WriteTo(root.path());
  auto pmu = DiscoverPtPmu(root.path());
  ASSERT_TRUE(pmu.ok()) << pmu.status();
  EXPECT_EQ(pmu->type, 8);
  EXPECT_EQ(pmu->format.size(), sysfs.format.size());
  EXPECT_EQ(pmu->caps.size(), sysfs.caps.size());
  // pt_cap_show prints every cap with "%x": Skylake's "249" is 0x249.
  EXPECT_EQ(pmu->Cap("mtc_periods"), 0x249u);
  EXPECT_EQ(pmu->Cap("cycle_thresholds"), 0x3fffu);
  EXPECT_EQ(pmu->max_nonturbo_ratio, 24u);
  EXPECT_EQ(pmu->tsc_art_ratio_num, 188u);
  EXPECT_EQ(pmu->tsc_art_ratio_den, 2u);
}

TEST(PtPmuTest, BadFilesAreErrorsNamingThem) {
  ptd::testing::TempDir root;
  FakePtSysfs sysfs;
  sysfs.tsc_art_ratio = "188";
  sysfs.WriteTo(root.path());
  auto pmu = DiscoverPtPmu(root.path());
  ASSERT_FALSE(pmu.ok());
  EXPECT_THAT(std::string(pmu.status().message()), HasSubstr("tsc_art_ratio"));
  FakePtSysfs bad_format;
  bad_format.format["tsc"] = "config:x";
  ptd::testing::TempDir root2;
  bad_format.WriteTo(root2.path());
  pmu = DiscoverPtPmu(root2.path());
  ASSERT_FALSE(pmu.ok());
  EXPECT_THAT(std::string(pmu.status().message()), HasSubstr("format/tsc"));
}

// Expected config words are computed from the bit positions the fake tree declares, so a
// moved field (below) moves the expectation with it.
uint64_t Bits(const FakePtSysfs& sysfs, const std::map<std::string, uint64_t>& values) {
  uint64_t config = 0;
  for (const auto& [name, value] : values) {
    const std::string& spec = sysfs.format.at(name);
    const std::string bits = spec.substr(spec.find(':') + 1);
    const int low = std::stoi(bits.substr(0, bits.find('-')));
    config |= value << low;
  }
  return config;
}

absl::StatusOr<PtEventConfig> ConfigFor(const FakePtSysfs& sysfs, TimingPreset timing,
                                        const std::string& expert = "") {
  ptd::testing::TempDir root;
  sysfs.WriteTo(root.path());
  auto pmu = DiscoverPtPmu(root.path());
  if (!pmu.ok()) return pmu.status();
  return BuildPtEventConfig(*pmu, timing, expert, /*kernel=*/false);
}

TEST(PtEventConfigTest, TimingPresets) {
  FakePtSysfs sysfs;
  // MTC in every preset (time between PSBs), psb_period=3 (a PSB every 16 KiB, not 2),
  // as fine as magic-trace's.
  auto low = ConfigFor(sysfs, TimingPreset::kLow);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->words[0], Bits(sysfs, {{"pt", 1}, {"branch", 1}, {"tsc", 1}, {"mtc", 1},
                                        {"mtc_period", 3}}));
  EXPECT_EQ(low->timing, "low");
  EXPECT_TRUE(low->user_only);
  EXPECT_TRUE(low->notes.empty());
  auto normal = ConfigFor(sysfs, TimingPreset::kNormal);
  ASSERT_TRUE(normal.ok());
  EXPECT_EQ(normal->words[0],
            Bits(sysfs, {{"pt", 1}, {"branch", 1}, {"tsc", 1}, {"mtc", 1}, {"mtc_period", 3},
                         {"cyc", 1}, {"cyc_thresh", 1}, {"psb_period", 3}}));
  EXPECT_EQ(normal->fields.at("psb_period"), 3u);
  EXPECT_TRUE(normal->notes.empty());
  auto high = ConfigFor(sysfs, TimingPreset::kHigh);
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(high->words[0],
            Bits(sysfs, {{"pt", 1}, {"branch", 1}, {"tsc", 1}, {"mtc", 1}, {"mtc_period", 0},
                         {"cyc", 1}, {"cyc_thresh", 1}, {"psb_period", 3}, {"noretcomp", 1}}));
  EXPECT_EQ(high->fields.at("noretcomp"), 1u);
}

TEST(PtEventConfigTest, PresetLeavesOutWhatTheCapsRuleOutAndSaysSo) {
  FakePtSysfs sysfs;
  sysfs.caps["mtc_periods"] = "1";    // period 0 only
  sysfs.caps["psb_periods"] = "1";    // only the default
  auto normal = ConfigFor(sysfs, TimingPreset::kNormal);
  ASSERT_TRUE(normal.ok()) << normal.status();
  EXPECT_EQ(normal->fields.count("mtc_period"), 0u);
  EXPECT_EQ(normal->fields.count("psb_period"), 0u);
  EXPECT_EQ(normal->fields.at("cyc"), 1u);
  EXPECT_EQ(normal->notes.size(), 2u);
}

TEST(PtEventConfigTest, NormalWithoutPsbCycFallsBackToTscAndSaysSo) {
  FakePtSysfs sysfs;
  sysfs.caps["psb_cyc"] = "0";
  auto normal = ConfigFor(sysfs, TimingPreset::kNormal);
  ASSERT_TRUE(normal.ok());
  EXPECT_EQ(normal->words[0], Bits(sysfs, {{"pt", 1}, {"branch", 1}, {"tsc", 1}, {"mtc", 1},
                                           {"mtc_period", 3}}));
  EXPECT_FALSE(normal->notes.empty());
}

TEST(PtEventConfigTest, BitPositionsComeFromSysfsNotFromTheCode) {
  FakePtSysfs moved;
  moved.format["tsc"] = "config:40";
  moved.format["noretcomp"] = "config:41";
  auto high = ConfigFor(moved, TimingPreset::kHigh);
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(high->words[0] & (1ull << 40), 1ull << 40);
  EXPECT_EQ(high->words[0] & (1ull << 10), 0u);
  EXPECT_EQ(high->words[0] & (1ull << 41), 1ull << 41);
}

TEST(PtEventConfigTest, ExpertKeysOverrideAndAreChecked) {
  FakePtSysfs sysfs;
  auto custom = ConfigFor(sysfs, TimingPreset::kLow, "mtc,mtc_period=3,psb_period=0x2");
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(custom->timing, "custom");
  EXPECT_EQ(custom->words[0], Bits(sysfs, {{"pt", 1}, {"branch", 1}, {"tsc", 1}, {"mtc", 1},
                                           {"mtc_period", 3}, {"psb_period", 2}}));
  auto off = ConfigFor(sysfs, TimingPreset::kLow, "tsc=0,mtc=0");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->words[0], Bits(sysfs, {{"pt", 1}, {"branch", 1}, {"mtc_period", 3}}));

  auto unknown = ConfigFor(sysfs, TimingPreset::kLow, "frobnicate=1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("frobnicate"));
  // mtc_periods "249" is hex: periods 0, 3, 6 and 9 (read as decimal it would offer 4
  // and refuse 9, and the kernel would then refuse the event with EINVAL).
  auto period = ConfigFor(sysfs, TimingPreset::kLow, "mtc_period=1");
  ASSERT_FALSE(period.ok());
  EXPECT_THAT(std::string(period.status().message()), HasSubstr("mtc_periods"));
  auto nine = ConfigFor(sysfs, TimingPreset::kLow, "mtc_period=9");
  EXPECT_TRUE(nine.ok()) << nine.status();
  auto four = ConfigFor(sysfs, TimingPreset::kLow, "mtc_period=4");
  EXPECT_FALSE(four.ok());
  // psb_periods "3f": 5 is offered; 0 always is (pt_event_valid).
  EXPECT_TRUE(ConfigFor(sysfs, TimingPreset::kLow, "psb_period=5").ok());
  sysfs.caps["psb_periods"] = "2";
  EXPECT_TRUE(ConfigFor(sysfs, TimingPreset::kLow, "psb_period=0").ok());
  auto ptw = ConfigFor(sysfs, TimingPreset::kLow, "ptw=1");
  ASSERT_FALSE(ptw.ok());  // caps/ptwrite is 0
  auto wide = ConfigFor(sysfs, TimingPreset::kLow, "psb_period=16");
  ASSERT_FALSE(wide.ok());
  auto garbage = ConfigFor(sysfs, TimingPreset::kLow, "tsc=-1");
  ASSERT_FALSE(garbage.ok());
}

}  // namespace
}  // namespace ptd::pt
