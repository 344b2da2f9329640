#include "ftf/ftf_writer.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ptd::ftf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "FTF is little-endian; the writer copies words as they are in memory");

constexpr uint64_t kTicksPerSecond = 1'000'000'000;
std::atomic<uint64_t> next_writer_id{0};
// Room for the largest record, so BeginRecord() never has to split one.
constexpr size_t kMinBufferBytes = 64 * 1024;

constexpr uint64_t RecordHeader(RecordType type, size_t words) {
  return static_cast<uint64_t>(type) | (static_cast<uint64_t>(words) << 4);
}

// Record words go through a local cursor (not a member), so the compiler keeps it in a
// register across the stores instead of reloading it after each one.
inline void PutWord(uint8_t*& out, uint64_t word) {
  std::memcpy(out, &word, 8);
  out += 8;
}

void PutBytesPadded(uint8_t*& out, absl::string_view bytes) {
  size_t padded = WordsForBytes(bytes.size()) * 8;
  if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
  std::memset(out + bytes.size(), 0, padded - bytes.size());
  out += padded;
}

// An argument's header word without the type-specific bits 32-63.
constexpr uint64_t ArgHeader(ArgType type, size_t words, uint16_t name_ref) {
  return static_cast<uint64_t>(type) | (static_cast<uint64_t>(words) << 4) | (uint64_t{name_ref} << 16);
}

size_t ArgValueWords(ArgType type) {
  switch (type) {
    case ArgType::kInt64:
    case ArgType::kUint64:
    case ArgType::kDouble:
    case ArgType::kPointer:
    case ArgType::kKoid:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<FtfWriter>> FtfWriter::Open(const std::string& path,
                                                           const FtfWriterOptions& options) {
  absl::StatusOr<std::unique_ptr<ByteSink>> sink = OpenFileSink(path, options.gzip_level);
  if (!sink.ok()) return sink.status();
  return ToSink(*std::move(sink), path, options);
}

std::unique_ptr<FtfWriter> FtfWriter::ToSink(std::unique_ptr<ByteSink> sink, std::string name,
                                             const FtfWriterOptions& options) {
  return std::unique_ptr<FtfWriter>(new FtfWriter(std::move(sink), std::move(name), options));
}

FtfWriter::FtfWriter(std::unique_ptr<ByteSink> sink, std::string name,
                     const FtfWriterOptions& options)
    : id_(next_writer_id.fetch_add(1) + 1),
      sink_(std::move(sink)),
      name_(std::move(name)),
      buffer_(std::max(options.buffer_bytes, kMinBufferBytes)),
      strings_(options.string_table_size),
      threads_(options.thread_table_size) {
  WritePreamble(options.provider_name);
}

FtfWriter::~FtfWriter() { Close().IgnoreError(); }

void FtfWriter::WritePreamble(absl::string_view provider_name) {
  if (uint8_t* out = BeginRecord(1)) PutWord(out, kMagicWord);
  // Provider info and section for provider 0. Perfetto starts a fresh provider (with
  // empty tables and default ticks) at a provider info record, so these come before
  // the initialization record and every string and thread.
  provider_name = provider_name.substr(0, 0xff);
  size_t name_words = WordsForBytes(provider_name.size());
  if (uint8_t* out = BeginRecord(1 + name_words)) {
    PutWord(out, RecordHeader(RecordType::kMetadata, 1 + name_words) |
            (uint64_t{static_cast<uint8_t>(MetadataType::kProviderInfo)} << 16) |
            (uint64_t{0} << 20) | (static_cast<uint64_t>(provider_name.size()) << 52));
    PutBytesPadded(out, provider_name);
  }
  if (uint8_t* out = BeginRecord(1)) {
    PutWord(out, RecordHeader(RecordType::kMetadata, 1) |
            (uint64_t{static_cast<uint8_t>(MetadataType::kProviderSection)} << 16));
  }
  if (uint8_t* out = BeginRecord(2)) {
    PutWord(out, RecordHeader(RecordType::kInitialization, 2));
    PutWord(out, kTicksPerSecond);
  }
}

void FtfWriter::WriteProcess(uint64_t pid, absl::string_view name) {
  WriteKernelObject(kObjTypeProcess, pid, name, {});
}

void FtfWriter::WriteThread(uint64_t pid, uint64_t tid, absl::string_view name) {
  const Arg process = Arg::Koid("process", pid);
  WriteKernelObject(kObjTypeThread, tid, name, absl::MakeConstSpan(&process, 1));
}

// Inline into each public method: their constants (type, trailer) fold away.
template <typename Category, typename Name>
[[gnu::always_inline]] inline void FtfWriter::WriteEvent(EventType type, uint64_t pid, uint64_t tid, uint64_t ts, Category& category,
                           Name& name, absl::Span<const Arg> args, bool has_trailer,
                           uint64_t trailer) {
  if (!status_.ok() || closed_) return;
  strings_.NextRecord();
  threads_.NextRecord();
  uint16_t category_ref = StringRef(category);
  uint16_t name_ref = StringRef(name);
  if (args.size() > kMaxArgs) [[unlikely]] {
    stats_.args_dropped += args.size() - kMaxArgs;
    args = args.first(kMaxArgs);
  }
  size_t arg_words = EncodeArgs(args);
  uint8_t thread_ref = ThreadRef(pid, tid);
  size_t words = 2 + arg_words + (has_trailer ? 1 : 0);
  uint8_t* out = BeginRecord(words);
  if (out == nullptr) return;
  PutWord(out, RecordHeader(RecordType::kEvent, words) | (uint64_t{static_cast<uint8_t>(type)} << 16) |
          (static_cast<uint64_t>(args.size()) << 20) | (uint64_t{thread_ref} << 24) |
          (uint64_t{category_ref} << 32) | (uint64_t{name_ref} << 48));
  PutWord(out, ts);
  PutArgs(out, arg_words);
  if (has_trailer) PutWord(out, trailer);
  ++stats_.events;
}

void FtfWriter::DurationBegin(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
                              absl::string_view name, absl::Span<const Arg> args) {
  WriteEvent(EventType::kDurationBegin, pid, tid, ts, category, name, args, false, 0);
}

void FtfWriter::DurationEnd(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
                            absl::string_view name, absl::Span<const Arg> args) {
  WriteEvent(EventType::kDurationEnd, pid, tid, ts, category, name, args, false, 0);
}

void FtfWriter::DurationBegin(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category,
                              absl::string_view name) {
  WriteEvent(EventType::kDurationBegin, pid, tid, ts, category, name, {}, false, 0);
}

void FtfWriter::DurationEnd(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category,
                            absl::Span<const Arg> args) {
  absl::string_view no_name;
  WriteEvent(EventType::kDurationEnd, pid, tid, ts, category, no_name, args, false, 0);
}

void FtfWriter::DurationBegin(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category, StringHandle& name,
                              absl::Span<const Arg> args) {
  WriteEvent(EventType::kDurationBegin, pid, tid, ts, category, name, args, false, 0);
}

void FtfWriter::DurationComplete(uint64_t pid, uint64_t tid, uint64_t ts, uint64_t end_ts,
                                 absl::string_view category, absl::string_view name,
                                 absl::Span<const Arg> args) {
  WriteEvent(EventType::kDurationComplete, pid, tid, ts, category, name, args, true, end_ts);
}

void FtfWriter::Instant(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
                        absl::string_view name, absl::Span<const Arg> args) {
  WriteEvent(EventType::kInstant, pid, tid, ts, category, name, args, false, 0);
}

void FtfWriter::Counter(uint64_t pid, uint64_t tid, uint64_t ts, absl::string_view category,
                        absl::string_view name, uint64_t counter_id, absl::Span<const Arg> args) {
  WriteEvent(EventType::kCounter, pid, tid, ts, category, name, args, true, counter_id);
}

void FtfWriter::WriteKernelObject(uint8_t obj_type, uint64_t koid, absl::string_view name,
                                  absl::Span<const Arg> args) {
  if (!status_.ok() || closed_) return;
  strings_.NextRecord();
  uint16_t name_ref = StringRef(name);
  size_t arg_words = EncodeArgs(args);
  size_t words = 2 + arg_words;
  uint8_t* out = BeginRecord(words);
  if (out == nullptr) return;
  PutWord(out, RecordHeader(RecordType::kKernelObject, words) | (uint64_t{obj_type} << 16) |
          (uint64_t{name_ref} << 24) | (static_cast<uint64_t>(args.size()) << 40));
  PutWord(out, koid);
  PutArgs(out, arg_words);
}

[[gnu::always_inline]] inline size_t FtfWriter::EncodeArgs(absl::Span<const Arg> args) {
  size_t n = 0;
  for (const Arg& arg : args) {
    if (arg.type == ArgType::kUint64 && arg.name_handle != nullptr) {
      // The common case first (counts at a slice's End): no switch on the type.
      arg_words_[n++] = ArgHeader(ArgType::kUint64, 2, StringRef(*arg.name_handle));
      arg_words_[n++] = arg.bits;
      continue;
    }
    uint16_t name_ref = arg.name_handle != nullptr ? StringRef(*arg.name_handle) : StringRef(arg.name);
    size_t words = 1 + ArgValueWords(arg.type);
    uint64_t header = ArgHeader(arg.type, words, name_ref);
    switch (arg.type) {
      case ArgType::kInt32:
      case ArgType::kUint32:
        header |= (arg.bits & 0xffffffffu) << 32;
        break;
      case ArgType::kString:
        header |= uint64_t{arg.value_handle != nullptr ? StringRef(*arg.value_handle) : StringRef(arg.string_value)}
                  << 32;
        break;
      case ArgType::kBool:
        header |= uint64_t{arg.bits != 0} << 32;
        break;
      default:
        break;
    }
    arg_words_[n++] = header;
    if (arg.type == ArgType::kDouble) {
      arg_words_[n++] = std::bit_cast<uint64_t>(arg.double_value);
    } else if (words == 2) {
      arg_words_[n++] = arg.bits;
    }
  }
  return n;
}

[[gnu::always_inline]] inline void FtfWriter::PutArgs(uint8_t*& out, size_t arg_words) {
  for (size_t i = 0; i < arg_words; ++i) PutWord(out, arg_words_[i]);
}

absl::string_view FtfWriter::Truncate(absl::string_view s) {
  ++stats_.strings_truncated;
  size_t cut = kMaxStringBytes;
  // Back up over UTF-8 continuation bytes so no character is split (stops after 3: input
  // that is not UTF-8 is cut where it is).
  for (int i = 0; i < 3 && cut > 0 && (static_cast<uint8_t>(s[cut]) & 0xc0) == 0x80; ++i) --cut;
  return s.substr(0, cut);
}

[[gnu::always_inline]] inline uint16_t FtfWriter::StringRef(absl::string_view s) {
  if (s.empty()) return 0;
  if (s.size() > kMaxStringBytes) [[unlikely]] s = Truncate(s);
  StringTable::Ref ref = strings_.Intern(s);
  if (ref.needs_definition) [[unlikely]] DefineString(ref.index, s);
  return ref.index;
}

[[gnu::always_inline]] inline uint16_t FtfWriter::StringRef(StringHandle& s) {
  if (s.writer_id_ == id_ && s.redefinitions_ == strings_.redefinitions() && s.index_ != 0) {
    strings_.Touch(s.index_);
    return s.index_;
  }
  s.index_ = StringRef(s.text_);
  s.writer_id_ = id_;
  s.redefinitions_ = strings_.redefinitions();
  return s.index_;
}

void FtfWriter::DefineString(uint16_t index, absl::string_view s) {
  size_t words = 1 + WordsForBytes(s.size());
  if (uint8_t* out = BeginRecord(words)) {
    PutWord(out, RecordHeader(RecordType::kString, words) | (uint64_t{index} << 16) |
            (static_cast<uint64_t>(s.size()) << 32));
    PutBytesPadded(out, s);
    ++stats_.string_records;
  }
}

[[gnu::always_inline]] inline uint8_t FtfWriter::ThreadRef(uint64_t pid, uint64_t tid) {
  ThreadTable::Ref ref = threads_.Intern(pid, tid);
  if (ref.needs_definition) [[unlikely]] DefineThread(ref.index, pid, tid);
  return ref.index;
}

void FtfWriter::DefineThread(uint8_t index, uint64_t pid, uint64_t tid) {
  if (uint8_t* out = BeginRecord(3)) {
    PutWord(out, RecordHeader(RecordType::kThread, 3) | (uint64_t{index} << 16));
    PutWord(out, pid);
    PutWord(out, tid);
    ++stats_.thread_records;
  }
}

[[gnu::always_inline]] inline uint8_t* FtfWriter::BeginRecord(size_t words) {
  if (!status_.ok() || closed_) return nullptr;
  size_t bytes = words * 8;
  if (used_ + bytes > buffer_.size()) [[unlikely]] {
    if (!Flush().ok()) return nullptr;
  }
  ++stats_.records;
  uint8_t* out = buffer_.data() + used_;
  used_ += bytes;
  return out;
}

absl::Status FtfWriter::Flush() {
  if (!status_.ok()) return status_;
  if (used_ == 0) return absl::OkStatus();
  absl::Status written = sink_->Write(absl::MakeConstSpan(buffer_.data(), used_));
  stats_.bytes += used_;
  used_ = 0;
  if (!written.ok()) Fail(written);
  return status_;
}

absl::Status FtfWriter::Close() {
  if (closed_) return status_;
  Flush().IgnoreError();
  closed_ = true;
  absl::Status closed = sink_->Close();
  if (!closed.ok()) Fail(closed);
  return status_;
}

void FtfWriter::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

}  // namespace ptd::ftf
