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
  if (BeginRecord(1)) PutWord(kMagicWord);
  // Provider info and section for provider 0. Perfetto starts a fresh provider (with
  // empty tables and default ticks) at a provider info record, so these come before
  // the initialization record and every string and thread.
  provider_name = provider_name.substr(0, 0xff);
  size_t name_words = WordsForBytes(provider_name.size());
  if (BeginRecord(1 + name_words)) {
    PutWord(RecordHeader(RecordType::kMetadata, 1 + name_words) |
            (uint64_t{static_cast<uint8_t>(MetadataType::kProviderInfo)} << 16) |
            (uint64_t{0} << 20) | (static_cast<uint64_t>(provider_name.size()) << 52));
    PutBytesPadded(provider_name);
  }
  if (BeginRecord(1)) {
    PutWord(RecordHeader(RecordType::kMetadata, 1) |
            (uint64_t{static_cast<uint8_t>(MetadataType::kProviderSection)} << 16));
  }
  if (BeginRecord(2)) {
    PutWord(RecordHeader(RecordType::kInitialization, 2));
    PutWord(kTicksPerSecond);
  }
}

void FtfWriter::WriteProcess(uint64_t pid, absl::string_view name) {
  WriteKernelObject(kObjTypeProcess, pid, name, {});
}

void FtfWriter::WriteThread(uint64_t pid, uint64_t tid, absl::string_view name) {
  const Arg process = Arg::Koid("process", pid);
  WriteKernelObject(kObjTypeThread, tid, name, absl::MakeConstSpan(&process, 1));
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
                              absl::string_view name, absl::Span<const Arg> args) {
  WriteEvent(EventType::kDurationBegin, pid, tid, ts, category, name, args, false, 0);
}

void FtfWriter::DurationEnd(uint64_t pid, uint64_t tid, uint64_t ts, StringHandle& category,
                            absl::string_view name, absl::Span<const Arg> args) {
  WriteEvent(EventType::kDurationEnd, pid, tid, ts, category, name, args, false, 0);
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

template <typename Category>
void FtfWriter::WriteEvent(EventType type, uint64_t pid, uint64_t tid, uint64_t ts, Category& category,
                           absl::string_view name, absl::Span<const Arg> args, bool has_trailer,
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
  size_t arg_words = ResolveArgs(args);
  uint8_t thread_ref = ThreadRef(pid, tid);
  size_t words = 2 + arg_words + (has_trailer ? 1 : 0);
  if (!BeginRecord(words)) return;
  PutWord(RecordHeader(RecordType::kEvent, words) | (uint64_t{static_cast<uint8_t>(type)} << 16) |
          (static_cast<uint64_t>(args.size()) << 20) | (uint64_t{thread_ref} << 24) |
          (uint64_t{category_ref} << 32) | (uint64_t{name_ref} << 48));
  PutWord(ts);
  PutArgs(args);
  if (has_trailer) PutWord(trailer);
  ++stats_.events;
}

void FtfWriter::WriteKernelObject(uint8_t obj_type, uint64_t koid, absl::string_view name,
                                  absl::Span<const Arg> args) {
  if (!status_.ok() || closed_) return;
  strings_.NextRecord();
  uint16_t name_ref = StringRef(name);
  size_t arg_words = ResolveArgs(args);
  size_t words = 2 + arg_words;
  if (!BeginRecord(words)) return;
  PutWord(RecordHeader(RecordType::kKernelObject, words) | (uint64_t{obj_type} << 16) |
          (uint64_t{name_ref} << 24) | (static_cast<uint64_t>(args.size()) << 40));
  PutWord(koid);
  PutArgs(args);
}

[[gnu::always_inline]] inline size_t FtfWriter::ResolveArgs(absl::Span<const Arg> args) {
  size_t words = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    arg_refs_[2 * i] = args[i].name_handle != nullptr ? StringRef(*args[i].name_handle) : StringRef(args[i].name);
    arg_refs_[2 * i + 1] =
        args[i].type == ArgType::kString ? StringRef(args[i].string_value) : uint16_t{0};
    words += 1 + ArgValueWords(args[i].type);
  }
  return words;
}

[[gnu::always_inline]] inline void FtfWriter::PutArgs(absl::Span<const Arg> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& arg = args[i];
    size_t words = 1 + ArgValueWords(arg.type);
    uint64_t header = static_cast<uint64_t>(arg.type) | (static_cast<uint64_t>(words) << 4) |
                      (uint64_t{arg_refs_[2 * i]} << 16);
    switch (arg.type) {
      case ArgType::kInt32:
      case ArgType::kUint32:
        header |= (arg.bits & 0xffffffffu) << 32;
        break;
      case ArgType::kString:
        header |= uint64_t{arg_refs_[2 * i + 1]} << 32;
        break;
      case ArgType::kBool:
        header |= uint64_t{arg.bits != 0} << 32;
        break;
      default:
        break;
    }
    PutWord(header);
    if (arg.type == ArgType::kDouble) {
      PutWord(std::bit_cast<uint64_t>(arg.double_value));
    } else if (words == 2) {
      PutWord(arg.bits);
    }
  }
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
  if (BeginRecord(words)) {
    PutWord(RecordHeader(RecordType::kString, words) | (uint64_t{index} << 16) |
            (static_cast<uint64_t>(s.size()) << 32));
    PutBytesPadded(s);
    ++stats_.string_records;
  }
}

[[gnu::always_inline]] inline uint8_t FtfWriter::ThreadRef(uint64_t pid, uint64_t tid) {
  ThreadTable::Ref ref = threads_.Intern(pid, tid);
  if (ref.needs_definition) [[unlikely]] DefineThread(ref.index, pid, tid);
  return ref.index;
}

void FtfWriter::DefineThread(uint8_t index, uint64_t pid, uint64_t tid) {
  if (BeginRecord(3)) {
    PutWord(RecordHeader(RecordType::kThread, 3) | (uint64_t{index} << 16));
    PutWord(pid);
    PutWord(tid);
    ++stats_.thread_records;
  }
}

[[gnu::always_inline]] inline bool FtfWriter::BeginRecord(size_t words) {
  if (!status_.ok() || closed_) return false;
  size_t bytes = words * 8;
  if (used_ + bytes > buffer_.size()) {
    if (!Flush().ok()) return false;
  }
  ++stats_.records;
  return true;
}

[[gnu::always_inline]] inline void FtfWriter::PutWord(uint64_t word) {
  std::memcpy(buffer_.data() + used_, &word, 8);
  used_ += 8;
}

void FtfWriter::PutBytesPadded(absl::string_view bytes) {
  size_t padded = WordsForBytes(bytes.size()) * 8;
  if (!bytes.empty()) std::memcpy(buffer_.data() + used_, bytes.data(), bytes.size());
  std::memset(buffer_.data() + used_ + bytes.size(), 0, padded - bytes.size());
  used_ += padded;
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
