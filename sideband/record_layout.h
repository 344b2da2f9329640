#pragma once
// The fixed-size fields that start each record body, in the order the kernel writes them
// (struct perf_event_* in include/uapi/linux/perf_event.h): the one list RecordReader
// reads and RecordBuilder writes. What follows them (strings, MMAP2's build-id or inode,
// counted arrays) and the flags in the header's misc bits each side handles per type.

#include <tuple>

#include "sideband/perf_record.h"

namespace ptd {

constexpr auto FixedFields(const MmapRecord&) {
  using R = MmapRecord;
  return std::tuple(&R::pid, &R::tid, &R::addr, &R::len, &R::pgoff);
}
// Then either the build-id or the inode fields, then prot and flags.
constexpr auto FixedFields(const Mmap2Record&) {
  using R = Mmap2Record;
  return std::tuple(&R::pid, &R::tid, &R::addr, &R::len, &R::pgoff);
}
constexpr auto FixedFields(const CommRecord&) {
  return std::tuple(&CommRecord::pid, &CommRecord::tid);
}
constexpr auto FixedFields(const ForkRecord&) {
  using R = ForkRecord;
  return std::tuple(&R::pid, &R::ppid, &R::tid, &R::ptid, &R::time);
}
constexpr auto FixedFields(const ExitRecord&) {
  using R = ExitRecord;
  return std::tuple(&R::pid, &R::ppid, &R::tid, &R::ptid, &R::time);
}
constexpr auto FixedFields(const SwitchRecord&) { return std::tuple(); }  // misc bits only
constexpr auto FixedFields(const SwitchCpuWideRecord&) {
  return std::tuple(&SwitchCpuWideRecord::next_prev_pid, &SwitchCpuWideRecord::next_prev_tid);
}
constexpr auto FixedFields(const ItraceStartRecord&) {
  return std::tuple(&ItraceStartRecord::pid, &ItraceStartRecord::tid);
}
constexpr auto FixedFields(const AuxRecord&) {
  return std::tuple(&AuxRecord::aux_offset, &AuxRecord::aux_size, &AuxRecord::flags);
}
constexpr auto FixedFields(const LostRecord&) {
  return std::tuple(&LostRecord::id, &LostRecord::lost);
}
constexpr auto FixedFields(const LostSamplesRecord&) {
  return std::tuple(&LostSamplesRecord::lost);
}
constexpr auto FixedFields(const ThrottleRecord&) {
  return std::tuple(&ThrottleRecord::time, &ThrottleRecord::id, &ThrottleRecord::stream_id);
}
// Then nr_namespaces and the {dev, inode} pairs.
constexpr auto FixedFields(const NamespacesRecord&) {
  return std::tuple(&NamespacesRecord::pid, &NamespacesRecord::tid);
}
constexpr auto FixedFields(const KsymbolRecord&) {
  using R = KsymbolRecord;
  return std::tuple(&R::addr, &R::len, &R::ksym_type, &R::flags);
}
constexpr auto FixedFields(const BpfEventRecord&) {
  using R = BpfEventRecord;
  return std::tuple(&R::type, &R::flags, &R::id, &R::tag);
}
constexpr auto FixedFields(const CgroupRecord&) { return std::tuple(&CgroupRecord::id); }
// Then old_len, new_len and the bytes.
constexpr auto FixedFields(const TextPokeRecord&) { return std::tuple(&TextPokeRecord::addr); }
constexpr auto FixedFields(const AuxOutputHwIdRecord&) {
  return std::tuple(&AuxOutputHwIdRecord::hw_id);
}
constexpr auto FixedFields(const OtherRecord&) { return std::tuple(); }  // payload only

// Calls visit(field) for each fixed field of `record` in order while it returns true;
// false when one returned false.
template <typename Record, typename Visit>
bool ForEachFixedField(Record& record, Visit visit) {
  return std::apply([&](auto... member) { return (visit(record.*member) && ...); },
                    FixedFields(record));
}

}  // namespace ptd
