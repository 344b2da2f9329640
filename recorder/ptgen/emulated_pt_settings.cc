#include "recorder/ptgen/emulated_pt_settings.h"

namespace ptd {

PtStreamSetOptions EmulatedStreamOptions(const RecordOptions& options) {
  PtStreamSetOptions s;
  s.generator.psb_period = options.psb_period;
  s.generator.noretcomp = options.noretcomp || options.timing == TimingPreset::kHigh;
  const bool timed = options.timing != TimingPreset::kLow;
  s.generator.tsc_interval = 0;
  s.generator.mtc = timed;
  s.generator.cyc = timed;
  s.virtual_cpus = options.virtual_cpus;
  s.snapshot = options.snapshot;
  s.snapshot_size = options.snapshot_size;
  s.overflow_every_bytes = options.emulate_overflow_every;
  return s;
}

void DescribeEmulatedPt(const RecordOptions& options, const PtStreamSetOptions& streams, TraceMeta* meta) {
  meta->mode = TraceMode::kEmulated;
  meta->per = options.virtual_cpus > 0 ? "cpu" : "thread";
  meta->pt.pmu_type = -1;
  meta->pt.timing = options.timing == TimingPreset::kLow    ? "low"
                    : options.timing == TimingPreset::kHigh ? "high"
                                                            : "normal";
  meta->pt.user_only = true;
  meta->pt.fields["tsc"] = 1;
  meta->pt.fields["noretcomp"] = streams.generator.noretcomp ? 1 : 0;
  const PacketGeneratorOptions& g = streams.generator;
  if (g.mtc) {
    // What a decoder needs to turn MTC and CYC into time (libipt: cpuid_0x15_eax/ebx,
    // mtc_freq, nom_freq), consistent with the packets PacketGenerator wrote.
    meta->pt.fields["mtc"] = 1;
    meta->pt.fields["mtc_period"] = g.mtc_freq;
    meta->pt.fields["cyc"] = g.cyc ? 1 : 0;
    meta->pt.fields["cyc_thresh"] = 1;
    meta->pt.mtc_freq = g.mtc_freq;
    meta->pt.cpuid_0x15_eax = 1;
    meta->pt.cpuid_0x15_ebx = g.art_ratio;
    meta->pt.tsc_art_ratio_num = g.art_ratio;
    meta->pt.tsc_art_ratio_den = 1;
    meta->pt.nom_freq = g.core_ratio;
  }
  meta->pt.psb_period_bytes = options.psb_period;
  meta->time = TimeConversion{};  // identity: TSC packets carry the emulator's ns
  meta->time.cap_user_time_zero = true;
}

}  // namespace ptd
