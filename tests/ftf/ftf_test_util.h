#pragma once
// FTF in tests: files written in one call, whole streams read back into vectors of records.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ftf/byte_source.h"
#include "ftf/ftf_reader.h"
#include "ftf/ftf_writer.h"
#include "ftf/ftf_record.h"

namespace ptd::ftf::testing {

// Writes the file `path` (gzip when it ends in .gz): `fill` adds the records, then Close.
inline absl::Status WriteFtfFile(const std::string& path, const std::function<void(FtfWriter&)>& fill) {
  absl::StatusOr<std::unique_ptr<FtfWriter>> writer = FtfWriter::Open(path);
  if (!writer.ok()) return writer.status();
  fill(**writer);
  return (*writer)->Close();
}

inline absl::StatusOr<std::vector<FtfRecord>> ReadAll(FtfReader& reader) {
  std::vector<FtfRecord> records;
  absl::Status read = ForEachRecord(reader, [&](const FtfRecord& record) { records.push_back(record); });
  if (!read.ok()) return read;
  return records;
}

// A reader of `bytes`, which messages call `name`.
inline std::unique_ptr<FtfReader> ReaderOfBytes(const std::string& bytes,
                                                const std::string& name = "memory.ftf") {
  return FtfReader::FromSource(
      MakeMemorySource(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()),
                                           bytes.size())),
      name);
}

inline absl::StatusOr<std::vector<FtfRecord>> ReadAllBytes(const std::string& bytes) {
  return ReadAll(*ReaderOfBytes(bytes));
}

inline absl::StatusOr<std::vector<FtfRecord>> ReadAllFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<FtfReader>> reader = FtfReader::Open(path);
  if (!reader.ok()) return reader.status();
  return ReadAll(**reader);
}

inline std::vector<EventRecord> EventsOf(const std::vector<FtfRecord>& records) {
  std::vector<EventRecord> events;
  for (const FtfRecord& r : records) {
    if (r.type == RecordType::kEvent && !r.skipped) events.push_back(r.event);
  }
  return events;
}

inline std::vector<KernelObjectRecord> ObjectsOf(const std::vector<FtfRecord>& records) {
  std::vector<KernelObjectRecord> objects;
  for (const FtfRecord& r : records) {
    if (r.type == RecordType::kKernelObject && !r.skipped) objects.push_back(r.object);
  }
  return objects;
}

// Little-endian words, for hand-made records.
inline void PutWord(std::string& out, uint64_t word) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(word >> (8 * i)));
}

inline uint64_t WordAt(const std::string& bytes, size_t offset) {
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = (word << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return word;
}

}  // namespace ptd::ftf::testing
