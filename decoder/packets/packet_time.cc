#include "decoder/packets/packet_time.h"

namespace ptd::decoder {

// pt_time_ctc_delta: from last_ctc to ctc, over one wrap of the CTC bits MTC gives.
int PacketTime::CtcDelta(uint32_t* delta, uint32_t ctc, uint32_t last_ctc) const {
  if (ctc < last_ctc) {
    ctc += 1u << (mtc_freq_ + kMtcBits);
    if (ctc < last_ctc) return -pte_bad_packet;
  }
  *delta = ctc - last_ctc;
  return 0;
}

// pt_time_ctc_fc: CTC ticks in fast counter ticks (CPUID 0x15's TSC:crystal ratio).
int PacketTime::CtcToFc(uint64_t* fc, uint64_t ctc) const {
  if (cpuid_0x15_eax_ == 0 || cpuid_0x15_ebx_ == 0) return -pte_bad_config;
  *fc = (ctc * cpuid_0x15_ebx_) / cpuid_0x15_eax_;
  return 0;
}

// libipt's time and calibration both refuse a zero ratio.
int PacketTime::OnCbr(uint8_t ratio) {
  cal_ = Calibration();
  return OnHeaderCbr(ratio);
}

int PacketTime::OnHeaderCbr(uint8_t ratio) {
  int status = CalibrateCbr(ratio);
  if (status < 0) return status;
  return ratio == 0 ? -pte_bad_packet : 0;
}

// pt_tcal_header_cbr: with the nominal frequency, a CBR gives the ratio.
int PacketTime::CalibrateCbr(uint8_t ratio) {
  if (nom_freq_ == 0) return 0;
  if (ratio == 0) return -pte_bad_packet;
  cal_.SetFcr((uint64_t{nom_freq_} << kFcrShift) / ratio);
  return 0;
}

// A TSC in PSB+: pt_tcal_header_tsc calibrates from the CYCs since the last TSC (unless
// MTCs do), then the time as OnTsc.
int PacketTime::OnHeaderTsc(uint64_t tsc) {
  const uint64_t last_tsc = cal_.tsc;
  const uint64_t cyc = cal_.cyc_tsc;
  const uint64_t packet_tsc = tsc;
  cal_.tsc = tsc;
  cal_.cyc_tsc = 0;
  if (last_tsc != 0 && cyc != 0 && !cal_.have_mtc) {
    if (tsc < last_tsc) {
      tsc += uint64_t{1} << 56;  // pt_pl_tsc_bit_size
      if (tsc < last_tsc) return -pte_bad_packet;
    }
    const uint64_t delta = tsc - last_tsc;
    if (delta & ~(~uint64_t{0} >> kFcrShift)) return -pte_internal;
    cal_.SetFcr((delta << kFcrShift) / cyc);
  }
  SetTsc(packet_tsc);
  return 0;
}

// pt_tcal_update_mtc: the ratio from the CYCs counted since the last MTC.
int PacketTime::CalibrateMtc(uint32_t ctc) {
  const uint32_t last_ctc = cal_.ctc;
  const uint64_t cyc = cal_.cyc_mtc;
  const bool check_skl168 = cal_.check_skl168;
  cal_.check_skl168 = false;
  if (!cal_.have_mtc) {
    cal_.cyc_mtc = 0;
    cal_.ctc = ctc;
    cal_.have_mtc = true;
    return 0;
  }
  if (cyc == 0) return 0;  // no cycles yet: the next MTC spans both periods
  cal_.cyc_mtc = 0;
  cal_.ctc = ctc;
  uint32_t ctc_delta = 0;
  int status = CtcDelta(&ctc_delta, ctc, last_ctc);
  if (status < 0) return status;
  uint64_t fc = 0;
  status = CtcToFc(&fc, ctc_delta);
  if (status < 0) return status;
  if (fc & ~(~uint64_t{0} >> kFcrShift)) return -pte_internal;
  const uint64_t fcr = (fc << kFcrShift) / cyc;
  // SKL168: CYCs may be dropped just before a PSB. The first MTC after one is skipped if
  // MTCs were lost or a wrap CYC looks lost.
  if (check_skl168) {
    if ((1u << mtc_freq_) < ctc_delta) return 0;
    if (mtc_freq_ < 10 && cal_.HaveFcr()) {
      const uint64_t expected = (cal_.fcr * (cyc + 0xf00)) >> kFcrShift;
      if (expected < fc) return 0;
    }
  }
  cal_.SetFcr(fcr);
  return 0;
}

// pt_time_update_mtc.
int PacketTime::UpdateMtc(uint32_t ctc) {
  const bool have_tsc = state_.have_tsc;
  const bool have_tma = state_.have_tma;
  const bool have_mtc = state_.have_mtc;
  // MTCs between a TSC and its TMA are ignored.
  if (have_tsc && !have_tma) return 0;
  uint64_t base = state_.base;
  uint32_t last_ctc = state_.ctc;
  if (state_.fc != 0 || state_.lost_cyc != 0 || !have_mtc) state_.ctc_cyc = ctc;
  state_.have_mtc = true;
  state_.fc = 0;
  state_.ctc = ctc;
  state_.lost_cyc = 0;
  if (!have_mtc) {
    // The first MTC: without a TMA it only starts the count; after one it completes the
    // TMA's CTC bits (one period back if its low bits are behind the TMA's).
    if (!have_tma) return 0;
    if (last_ctc & ~kTmaCtcMask) return -pte_internal;
    const uint32_t ctc_lo = ctc & kTmaCtcMask;
    uint32_t ctc_hi = ctc & ~kTmaCtcMask;
    if (ctc_lo < last_ctc) {
      ctc_hi -= 1u << kTmaCtcBits;
      ctc_hi &= 0xffu << mtc_freq_;
    }
    last_ctc |= ctc_hi;
  }
  uint32_t ctc_delta = 0;
  int status = CtcDelta(&ctc_delta, ctc, last_ctc);
  if (status < 0) {
    state_.lost_mtc += 1;
    return status;
  }
  uint64_t fc = 0;
  status = CtcToFc(&fc, ctc_delta);
  if (status < 0) return status;
  base += fc;
  state_.tsc = state_.base = base;
  return 0;
}

int PacketTime::UpdateCyc(uint64_t cyc) {
  const uint64_t fcr = cal_.HaveFcr() ? cal_.fcr : 0;
  if (fcr == 0) {
    state_.lost_cyc += 1;
    return 0;
  }
  uint64_t fc = state_.fc;
  if (fc == 0 && state_.ctc != state_.ctc_cyc) {
    // pt_time_adjust_cyc: a CYC spanning MTC periods; the cycles of the earlier periods
    // (estimated with the ratio) are not this period's.
    uint32_t ctc_delta = 0;
    int status = CtcDelta(&ctc_delta, state_.ctc, state_.ctc_cyc);
    if (status < 0) return status;
    uint64_t old_fc = 0;
    status = CtcToFc(&old_fc, ctc_delta);
    if (status < 0) return status;
    const uint64_t old_cyc = (old_fc << kFcrShift) / fcr;
    cyc = std::max(cyc, old_cyc) - old_cyc;
  }
  fc += (cyc * fcr) >> kFcrShift;
  state_.fc = fc;
  state_.tsc = state_.base + fc;
  return 0;
}

}  // namespace ptd::decoder
