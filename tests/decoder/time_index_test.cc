// TimeIndex: the fold over PacketQuery's packet index gives what the walk of the bytes
// gives (times and the calibration at each PSB), and TimeCursor answers as the search.
#include "decoder/packets/time_index.h"

#include <cstdint>
#include <random>
#include <vector>

#include "decoder/packets/packet_query.h"
#include "gtest/gtest.h"
#include "tests/decoder/packet_writer.h"

namespace ptd::decoder {
namespace {

// A stream with the timing packets' arithmetic at work: PSB+ with TSC, TMA and CBR, then
// MTC periods with CYCs before TNTs and TIPs, three times.
struct TimedStream {
  testing::PacketWriter w{1 << 14};
  std::vector<uint64_t> psbs;
  pt_config config;
  TimedStream() {
    uint64_t tsc = 1'000'000;
    for (int psb = 0; psb < 3; ++psb) {
      psbs.push_back(w.Psb());
      w.Tsc(tsc);
      w.Tma(static_cast<uint16_t>(0x100 * psb), 3);
      w.Cbr(static_cast<uint8_t>(20 + psb));
      w.PsbEnd();
      for (int period = 1; period <= 40; ++period) {
        w.Mtc(static_cast<uint8_t>(period + 0x10 * psb));
        w.Cyc(static_cast<uint64_t>(25 + period % 7));
        w.Tnt(3, 5);
        w.Cyc(static_cast<uint64_t>(9 + period % 3));
        w.Tip(0x400000 + static_cast<uint64_t>(period) * 16);
      }
      tsc += 50'000;
    }
    pt_config_init(&config);
    config.begin = const_cast<uint8_t*>(w.data());
    config.end = config.begin + w.size();
    config.mtc_freq = 3;
    config.nom_freq = 4;
    config.cpuid_0x15_eax = 1;
    config.cpuid_0x15_ebx = 2;
  }
};

bool SameCalibration(const PacketTime::Calibration& a, const PacketTime::Calibration& b) {
  return a.fcr == b.fcr && a.min_fcr == b.min_fcr && a.max_fcr == b.max_fcr && a.tsc == b.tsc &&
         a.cyc_tsc == b.cyc_tsc && a.cyc_mtc == b.cyc_mtc && a.ctc == b.ctc && a.have_mtc == b.have_mtc &&
         a.check_skl168 == b.check_skl168;
}

TEST(TimeIndexTest, FoldOverThePacketIndexEqualsTheWalkOfTheBytes) {
  TimedStream s;
  const PacketQuery::Scan scan = PacketQuery::ScanBytes(s.config);
  ASSERT_TRUE(scan.supported);
  ASSERT_NE(scan.packets, nullptr);
  const TimeIndex indexed = TimeIndex::Build(s.config, scan.packets.get());
  const TimeIndex walked = TimeIndex::Build(s.config);
  ASSERT_GE(walked.entries().size(), 100u);  // CYC moves the time at most branches
  ASSERT_EQ(indexed.entries().size(), walked.entries().size());
  for (size_t k = 0; k < walked.entries().size(); ++k) {
    EXPECT_EQ(indexed.entries()[k].offset, walked.entries()[k].offset) << "entry " << k;
    EXPECT_EQ(indexed.entries()[k].tsc, walked.entries()[k].tsc) << "entry " << k;
  }
  for (uint64_t psb : s.psbs) {
    const PacketTime::Calibration* a = indexed.CalibrationAt(psb);
    const PacketTime::Calibration* b = walked.CalibrationAt(psb);
    ASSERT_TRUE(a != nullptr && b != nullptr) << "PSB at " << psb;
    EXPECT_TRUE(SameCalibration(*a, *b)) << "PSB at " << psb;
  }
  // The later PSBs carry what the MTCs before them calibrated.
  EXPECT_TRUE(walked.CalibrationAt(s.psbs.back())->HaveFcr());
  EXPECT_EQ(walked.CalibrationAt(s.psbs.front() + 1), nullptr);
  // The scan's shared index is the same fold.
  ASSERT_NE(scan.times, nullptr);
  EXPECT_EQ(scan.times->Get(s.config).entries().size(), walked.entries().size());
}

TEST(TimeIndexTest, CursorAnswersAsTheSearchForwardAndAfterSeeks) {
  TimedStream s;
  const TimeIndex index = TimeIndex::Build(s.config);
  ASSERT_GE(index.entries().size(), 100u);
  const uint64_t end = s.w.size() + 2;
  TimeCursor forward(&index);
  for (uint64_t offset = 0; offset <= end; ++offset) ASSERT_EQ(forward.At(offset), index.At(offset)) << offset;
  // Forward in strides (several entries at once), back to earlier PSBs, and anywhere.
  std::mt19937_64 random(36);
  TimeCursor seeking(&index);
  uint64_t offset = 0;
  for (int k = 0; k < 5000; ++k) {
    switch (k % 4) {
      case 0: offset += random() % 200; break;
      case 1: offset = s.psbs[random() % s.psbs.size()]; break;
      default: offset = random() % end; break;
    }
    ASSERT_EQ(seeking.At(offset), index.At(offset)) << "lookup " << k << " at " << offset;
  }
}

}  // namespace
}  // namespace ptd::decoder
