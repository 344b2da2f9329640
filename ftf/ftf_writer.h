#pragma once
// Streaming Fuchsia Trace Format writer: what Perfetto (UI and trace_processor) opens.
//
// Timestamps are nanoseconds and are written as ticks at 1e9 ticks/s; rebasing (e.g. to
// the first event) is the caller's business. Strings are interned as indexed string
// records and threads as indexed thread records; when a table fills, its least recently
// used index is redefined (readers use the latest definition), so any number of distinct
// names and threads comes out right. Output is buffered: memory stays bounded and the hot
// path (an event whose names and thread were seen before) allocates nothing.
//
// Errors (disk full, ...) are sticky: the first one is kept in status(), later calls do
// nothing, and Close() returns it. Callers check status() now and then and at Close().
// Not thread-safe: use one writer from one thread (or lock around it).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ftf/byte_sink.h"
#include "ftf/ftf_arg.h"
#include "ftf/ftf_format.h"
#include "ftf/string_handle.h"
#include "ftf/string_table.h"
#include "ftf/thread_table.h"

namespace ptd::ftf {

struct FtfWriterOptions {
  // Used only for ".gz" paths; 1 is fastest, 9 smallest.
  int gzip_level = 1;
  // Bytes collected before a write to the sink. 256 KiB: a 1 MiB buffer cost the mruby
  // decode ~270 more page faults for no measurable gain in write time.
  size_t buffer_bytes = size_t{1} << 18;
  // Table sizes. Smaller than the format's limits only to exercise recycling in tests;
  // the string table is never made smaller than kMinStringTableSize.
  uint16_t string_table_size = kMaxStringIndex;
  uint8_t thread_table_size = kMaxThreadIndex;
  // Written in the provider info metadata record (provider id 0).
  std::string provider_name = "ptrace-direct";
};

// What the writer did, for --stats-json and tests.
struct FtfWriterStats {
  uint64_t bytes = 0;             // bytes handed to the sink (before gzip)
  uint64_t records = 0;           // all records, magic included
  uint64_t events = 0;            // event records
  uint64_t string_records = 0;    // string definitions, redefinitions included
  uint64_t thread_records = 0;    // thread definitions, redefinitions included
  uint64_t strings_truncated = 0; // strings cut to kMaxStringBytes
  uint64_t args_dropped = 0;      // arguments beyond kMaxArgs per record
};

class FtfWriter {
 public:
  // Creates (truncates) `path`; a name ending in ".gz" is gzip-compressed.
  static absl::StatusOr<std::unique_ptr<FtfWriter>> Open(const std::string& path,
                                                         const FtfWriterOptions& options = {});
  // Writes to any sink (tests and fuzzers use MakeStringSink). `name` appears in errors.
  static std::unique_ptr<FtfWriter> ToSink(std::unique_ptr<ByteSink> sink, std::string name,
                                           const FtfWriterOptions& options = {});

  FtfWriter(const FtfWriter&) = delete;
  FtfWriter& operator=(const FtfWriter&) = delete;
  // Closes if Close() was not called, so an early return still leaves a valid file.
  ~FtfWriter();

  // Kernel object record naming process `pid`.
  void WriteProcess(uint64_t pid, absl::string_view name);
  // Kernel object record naming thread `tid` and linking it to process `pid` (the
  // `process` koid argument Perfetto needs to attach the thread to its process).
  void WriteThread(uint64_t pid, uint64_t tid, absl::string_view name);

  void DurationBegin(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
                     absl::string_view name, absl::Span<const Arg> args = {});
  // Perfetto ignores an End's name and merges its args into the innermost open slice.
  void DurationEnd(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
                   absl::string_view name, absl::Span<const Arg> args = {});
  // The same with the category as a handle (string_handle.h), for callers that write
  // millions of slices: a Begin without args, an End without a name.
  void DurationBegin(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category,
                     absl::string_view name);
  void DurationEnd(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category,
                   absl::Span<const Arg> args);
  // A Begin with category, name and args all handles (Arg::String and Arg::Bool take
  // handles too): no string looked up by value.
  void DurationBegin(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category, StringHandle& name,
                     absl::Span<const Arg> args);
  void DurationComplete(uint64_t pid, uint64_t tid, uint64_t ts, uint64_t end_ts,
                        absl::string_view category, absl::string_view name,
                        absl::Span<const Arg> args = {});
  void Instant(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
               absl::string_view name, absl::Span<const Arg> args = {});
  // Each numeric arg is one series of the counter `counter_id`.
  void Counter(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
               absl::string_view name, uint64_t counter_id, absl::Span<const Arg> args = {});

  // Hands buffered bytes to the sink (not a sync to disk).
  absl::Status Flush();
  // Flushes and finishes the file. Returns the first error of the writer's life, if any.
  // Later calls return the same result.
  absl::Status Close();
  // First error so far; once set, writing stops.
  absl::Status status() const { return status_; }
  const FtfWriterStats& stats() const { return stats_; }
  const std::string& name() const { return name_; }

 private:
  FtfWriter(std::unique_ptr<ByteSink> sink, std::string name, const FtfWriterOptions& options);

  void WritePreamble(absl::string_view provider_name);
  // `Category`, `Name`: absl::string_view or StringHandle.
  template <typename Category, typename Name>
  void WriteEvent(EventType type, uint64_t pid, uint64_t tid, uint64_t ts, Category& category,
                  Name& name, absl::Span<const Arg> args, bool has_trailer,
                  uint64_t trailer);
  void WriteKernelObject(uint8_t obj_type, uint64_t koid, absl::string_view name,
                         absl::Span<const Arg> args);
  // The helpers below run once or more per event: defined inline in the .cc.
  // Encodes a record's args into arg_words_ (interning their strings first: that may
  // write string records, which must come before the record) and returns how many words
  // they take.
  size_t EncodeArgs(absl::Span<const Arg> args);
  // Writes the first `arg_words` of arg_words_ at `out` (moved past them).
  void PutArgs(uint8_t*& out, size_t arg_words);
  uint16_t StringRef(absl::string_view s);
  uint16_t StringRef(StringHandle& s);
  // Writes the string record that gives `index` its meaning `s`.
  void DefineString(uint16_t index, absl::string_view s);
  uint8_t ThreadRef(uint64_t pid, uint64_t tid);
  // Writes the thread record that gives `index` its meaning (pid, tid).
  void DefineThread(uint8_t index, uint64_t pid, uint64_t tid);
  // `s` cut to kMaxStringBytes (which it exceeds).
  absl::string_view Truncate(absl::string_view s);

  // Makes room for a record of `words` words and returns where it goes (the caller
  // writes all of them); nullptr once the writer has failed.
  uint8_t* BeginRecord(size_t words);
  void Fail(absl::Status status);

  // Tells writers apart for StringHandle (never 0; unique in the process).
  const uint64_t id_;
  std::unique_ptr<ByteSink> sink_;
  std::string name_;
  std::vector<uint8_t> buffer_;
  size_t used_ = 0;
  StringTable strings_;
  ThreadTable threads_;
  // Per-record scratch: the args' words (header, then the value word if any).
  uint64_t arg_words_[2 * kMaxArgs] = {};
  absl::Status status_;
  bool closed_ = false;
  FtfWriterStats stats_;
};

}  // namespace ptd::ftf
