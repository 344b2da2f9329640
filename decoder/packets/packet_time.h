#pragma once
// The time of a PT packet stream as libipt 2.0.5 keeps it (pt_time.c), for PacketQuery:
// TSC, TMA, MTC and CYC with libipt's calibration (pt_tcal_*: CYC needs a fast-counter:
// cycles ratio from MTCs, TSCs in PSB+ or CBR and nom_freq), so pt_qry_time and every
// event's tsc, lost_mtc and lost_cyc are libipt's. Errors are libipt's too, at the same
// packet. PacketQuery decodes the packets (pt_pkt_next) and hands their payloads here,
// one call a packet; the calls for TSC, TMA, MTC, CYC and the time of an event are inline
// (the query's read-ahead meets a TSC at every re-enable; the rest work as before the
// move, when they were PacketQuery's).

#include <intel-pt.h>

#include <algorithm>
#include <cstdint>

namespace ptd::decoder {

class PacketTime {
 public:
  // libipt shifts 1u by mtc_freq + 8: timing packets under a larger mtc_freq would
  // overflow (PacketQuery::Accepts leaves those buffers to pt_qry).
  static constexpr uint8_t kMaxMtcFreq = 23;

  // libipt's struct pt_time (but the CBR, which no query here reports).
  struct State {
    uint64_t tsc = 0;
    uint64_t base = 0;     // from TSC and MTC
    uint64_t fc = 0;       // the fast counter estimated since base
    uint32_t ctc = 0;      // the last CTC (MTC, TMA)
    uint32_t ctc_cyc = 0;  // the CTC when fc was cleared
    uint32_t lost_mtc = 0;
    uint32_t lost_cyc = 0;
    bool have_tsc = false;
    bool have_tma = false;
    bool have_mtc = false;

    // pt_time_query_tsc.
    int Query(uint64_t* tsc_out, uint32_t* lost_mtc_out, uint32_t* lost_cyc_out) const {
      *tsc_out = tsc;
      if (lost_mtc_out != nullptr) *lost_mtc_out = lost_mtc;
      if (lost_cyc_out != nullptr) *lost_cyc_out = lost_cyc;
      return have_tsc ? 0 : -pte_no_time;
    }
    // An event's time fields, as pt_qry_event_time sets them.
    [[gnu::always_inline]] void Stamp(pt_event* event) const {
      event->tsc = tsc;
      event->lost_mtc = lost_mtc;
      event->lost_cyc = lost_cyc;
      if (have_tsc) event->has_tsc = 1;
    }
  };

  // libipt's struct pt_time_cal: the fast-counter:cycles ratio (fcr, shifted left by 8)
  // that CYC needs, from CYCs counted between two MTCs or two PSB+ TSCs, or a CBR.
  struct Calibration {
    uint64_t fcr = 0;
    uint64_t min_fcr = UINT64_MAX;
    uint64_t max_fcr = 0;
    uint64_t tsc = 0;
    uint64_t cyc_tsc = 0;
    uint64_t cyc_mtc = 0;
    uint32_t ctc = 0;
    bool have_mtc = false;
    bool check_skl168 = false;
    bool HaveFcr() const { return min_fcr <= max_fcr; }
    void SetFcr(uint64_t value) {
      fcr = value;
      min_fcr = std::min(min_fcr, value);
      max_fcr = std::max(max_fcr, value);
    }
  };

  // Takes what the time needs of `config`: mtc_freq, nom_freq, CPUID 0x15, SKL168.
  explicit PacketTime(const pt_config& config)
      : cpuid_0x15_eax_(config.cpuid_0x15_eax),
        cpuid_0x15_ebx_(config.cpuid_0x15_ebx),
        mtc_freq_(config.mtc_freq),
        nom_freq_(config.nom_freq),
        skl168_(config.errata.skl168 != 0) {}

  const State& state() const { return state_; }
  // pt_qry_decode_ovf keeps the time across the reset of everything else.
  void set_state(const State& state) { state_ = state; }
  // The calibration alone: a query that starts at a PSB the single one passes in flight
  // takes the calibration that one has there (PacketQuery::CalibrationsAtPsbs).
  const Calibration& calibration() const { return cal_; }
  void set_calibration(const Calibration& calibration) { cal_ = calibration; }
  // pt_time_init and pt_tcal_init.
  void Reset() {
    state_ = State();
    cal_ = Calibration();
  }

  // The packets, in stream order. Outside PSB+:
  // TSC: pt_time_update_tsc (and the calibration's TSC outside PSB+: no error there).
  void OnTsc(uint64_t tsc) {
    cal_.tsc = tsc;
    cal_.cyc_tsc = 0;
    SetTsc(tsc);
  }
  // PSB (pt_tcal_update_psb): under SKL168 the first MTC after it may not calibrate.
  void OnPsb() {
    if (skl168_) cal_.check_skl168 = true;
  }
  // A CBR outside PSB+ is a frequency change: the calibration starts again.
  int OnCbr(uint8_t ratio);
  // TMA: its CTC bits and fast counter (pt_time_update_tma; the calibration ignores TMA).
  int OnTma(uint32_t ctc, uint64_t fc) {
    if (!state_.have_tsc) return -pte_bad_context;
    if (state_.have_tma) return -pte_bad_context;
    if (state_.have_mtc) return -pte_internal;
    const uint32_t mtc_hi = mtc_freq_ + kMtcBits;
    const uint32_t ctc_mask = (1u << mtc_hi) - 1u;
    state_.have_tma = true;
    state_.base -= fc;
    state_.fc += fc;
    // With all the CTC bits MTC gives, the TMA counts as an MTC; otherwise the next MTC
    // estimates the bits it lacks.
    if (mtc_hi <= kTmaCtcBits) state_.have_mtc = true;
    state_.ctc = state_.ctc_cyc = ctc & ctc_mask;
    return 0;
  }
  // MTC: its 8 CTC bits.
  int OnMtc(uint8_t ctc_bits) {
    const uint32_t ctc = uint32_t{ctc_bits} << mtc_freq_;
    int status = Applied(CalibrateMtc(ctc));
    if (status < 0) return status;
    return Applied(UpdateMtc(ctc));
  }
  // CYC: its cycles (pt_tcal_update_cyc, then pt_time_update_cyc with the ratio so far;
  // none: a lost CYC).
  int OnCyc(uint64_t cyc) {
    cal_.cyc_mtc += cyc;
    cal_.cyc_tsc += cyc;
    return Applied(UpdateCyc(cyc));
  }
  // In PSB+ (TMA, MTC and CYC as outside it):
  int OnHeaderTsc(uint64_t tsc);
  int OnHeaderCbr(uint8_t ratio);

 private:
  static constexpr uint32_t kMtcBits = 8;      // pt_pl_mtc_bit_size
  static constexpr uint32_t kTmaCtcBits = 16;  // pt_pl_tma_ctc_bit_size
  static constexpr uint32_t kTmaCtcMask = (1u << kTmaCtcBits) - 1;
  static constexpr uint32_t kFcrShift = 8;  // pt_tcal_fcr_shr

  void SetTsc(uint64_t tsc) {
    state_.have_tsc = true;
    state_.have_tma = false;
    state_.have_mtc = false;
    state_.tsc = state_.base = tsc;
    state_.ctc = 0;
    state_.fc = 0;
    state_.lost_mtc = 0;
    state_.lost_cyc = 0;
  }
  // libipt's pt_qry_apply_*: a configuration error only makes time imprecise.
  static int Applied(int status) { return status < 0 && status != -pte_bad_config ? status : 0; }
  int CtcDelta(uint32_t* delta, uint32_t ctc, uint32_t last_ctc) const;
  int CtcToFc(uint64_t* fc, uint64_t ctc) const;
  int CalibrateCbr(uint8_t ratio);
  int CalibrateMtc(uint32_t ctc);
  int UpdateMtc(uint32_t ctc);
  int UpdateCyc(uint64_t cyc);

  uint32_t cpuid_0x15_eax_;
  uint32_t cpuid_0x15_ebx_;
  uint8_t mtc_freq_;
  uint8_t nom_freq_;
  bool skl168_;
  State state_;
  Calibration cal_;
};

}  // namespace ptd::decoder
