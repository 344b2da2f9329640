#pragma once
// Streaming Fuchsia Trace Format reader: one record at a time, with string and thread
// references resolved as the format says (an index means its latest definition).
// Reads everything FtfWriter writes, plus inline strings and threads, other providers,
// and skips record types it does not interpret (blob, log, scheduling, userspace object,
// large records) by their size. Malformed input is an error naming the file, the byte
// offset of the record and what is wrong; reading stops there.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ftf/byte_source.h"
#include "ftf/ftf_record.h"

namespace ptd::ftf {

struct FtfReaderStats {
  uint64_t records = 0;          // records returned, magic included
  uint64_t skipped_records = 0;  // records of types read only by size
};

class FtfReader {
 public:
  // Plain or gzip-compressed (detected by content, not by name).
  static absl::StatusOr<std::unique_ptr<FtfReader>> Open(const std::string& path);
  // `name` is used in error messages.
  static std::unique_ptr<FtfReader> FromSource(std::unique_ptr<ByteSource> source,
                                               std::string name);

  FtfReader(const FtfReader&) = delete;
  FtfReader& operator=(const FtfReader&) = delete;

  // Reads the next record into *record, reusing its storage. Returns false at the end of
  // the input (which must fall on a record boundary).
  absl::StatusOr<bool> Next(FtfRecord* record);

  // Byte offset of the next record in the uncompressed stream.
  uint64_t offset() const { return offset_; }
  const FtfReaderStats& stats() const { return stats_; }
  const std::string& name() const { return name_; }

 private:
  // One provider's string and thread tables (providers each have their own).
  struct ProviderTables {
    // A map, not a 32768-entry array: fresh tables at every provider info record stay
    // cheap even for hostile input.
    absl::flat_hash_map<uint16_t, std::string> strings;
    ThreadKoids threads[kMaxThreadIndex + 1] = {};
    bool thread_defined[kMaxThreadIndex + 1] = {};
    uint64_t ticks_per_second = 0;
  };

  // Reads words of the current record; fails rather than leaving it.
  class WordCursor;

  FtfReader(std::unique_ptr<ByteSource> source, std::string name);

  // Makes `bytes` bytes available at window_pos_; returns how many are (fewer at EOF).
  absl::StatusOr<size_t> Fill(size_t bytes);
  absl::Status SkipBytes(uint64_t bytes);
  absl::Status ParseRecord(absl::Span<const uint64_t> words, FtfRecord* record);
  absl::Status ParseMetadata(uint64_t header, WordCursor& cursor, FtfRecord* record);
  absl::Status ParseEvent(uint64_t header, WordCursor& cursor, FtfRecord* record);
  absl::Status ParseKernelObject(uint64_t header, WordCursor& cursor, FtfRecord* record);
  absl::Status ParseArgs(size_t count, WordCursor& cursor, std::vector<ArgValue>* args);
  absl::Status ReadStringRef(uint16_t ref, WordCursor& cursor, absl::string_view field,
                             std::string* out);
  ProviderTables& Provider(uint32_t id);
  absl::Status Error(absl::string_view what) const;

  std::unique_ptr<ByteSource> source_;
  std::string name_;
  std::vector<uint8_t> window_;
  size_t window_pos_ = 0;
  size_t window_end_ = 0;
  bool source_done_ = false;
  uint64_t offset_ = 0;
  // Offset and type of the record being parsed, for error messages.
  uint64_t record_offset_ = 0;
  uint8_t record_type_ = 0;
  bool saw_magic_ = false;
  std::vector<uint64_t> record_words_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<ProviderTables>> providers_;
  ProviderTables* current_ = nullptr;
  FtfReaderStats stats_;
};

// Passes each record of `reader` to `visit` until the end of the stream; returns the
// first read error (the records before it have been visited).
absl::Status ForEachRecord(FtfReader& reader, const std::function<void(const FtfRecord&)>& visit);

// Name of a record type / event type / argument type, for text output and errors.
absl::string_view RecordTypeName(uint8_t type);
absl::string_view EventTypeName(EventType type);
absl::string_view ArgTypeName(ArgType type);

}  // namespace ptd::ftf
