#pragma once
// Encodes PerfRecords into the kernel's byte layout (the inverse of RecordReader): the
// recorder synthesizes MMAP2/COMM from /proc with it, the emulator writes SWITCH_CPU_WIDE,
// ITRACE_START and AUX records for its virtual CPUs, tests build streams with it.

#include <cstdint>
#include <vector>

#include "sideband/perf_record.h"
#include "sideband/record_reader.h"

namespace ptd {

class RecordBuilder {
 public:
  explicit RecordBuilder(RecordFormat format = {});

  // Appends `record`. The header type comes from the body (for OtherRecord, from
  // record.type); misc is record.misc with the body's flags (exec, switch out/preempt,
  // mmap data, build-id) set or cleared to match the body. Only the sample_id fields
  // the format asks for are written; the has_* flags of record.sample_id are ignored.
  // Strings are NUL-terminated and padded to 8 bytes as the kernel does.
  void Append(const PerfRecord& record);

  // Shorthand: record with this body and trailer, misc cpumode user.
  void Append(PerfRecordBody body, const SampleId& sample_id = {});

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> Take() { return std::move(bytes_); }
  void Clear() { bytes_.clear(); }
  const RecordFormat& format() const { return format_; }

 private:
  RecordFormat format_;
  std::vector<uint8_t> bytes_;
};

// Encodes one record on its own.
std::vector<uint8_t> EncodeRecord(const PerfRecord& record, RecordFormat format);

// header.type for a body (OtherRecord: 0, the caller's record.type is used).
uint32_t RecordTypeOf(const PerfRecordBody& body);

}  // namespace ptd
