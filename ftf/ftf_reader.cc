#include "ftf/ftf_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptd::ftf {
namespace {

static_assert(std::endian::native == std::endian::little);

constexpr size_t kWindowBytes = size_t{1} << 20;
// Start small and grow on demand: most inputs (and every fuzz input) are tiny, and a
// zero-filled 1 MiB window per reader made short reads cost more than parsing.
constexpr size_t kInitialWindowBytes = size_t{64} << 10;
// A hostile file could announce a new provider in every record; each has its own tables.
constexpr size_t kMaxProviders = 1024;

constexpr uint64_t Field(uint64_t word, int lo, int hi) {
  return (word >> lo) & ((hi - lo == 63) ? ~uint64_t{0} : ((uint64_t{1} << (hi - lo + 1)) - 1));
}

}  // namespace

class FtfReader::WordCursor {
 public:
  explicit WordCursor(absl::Span<const uint64_t> words) : words_(words) {}
  bool ReadWord(uint64_t* out) {
    if (pos_ >= words_.size()) return false;
    *out = words_[pos_++];
    return true;
  }
  // Inline string bytes, padded to whole words.
  bool ReadBytes(size_t length, std::string* out) {
    size_t words = WordsForBytes(length);
    if (words > words_.size() - pos_) return false;
    out->assign(reinterpret_cast<const char*>(words_.data() + pos_), length);
    pos_ += words;
    return true;
  }
  size_t pos() const { return pos_; }
  size_t size() const { return words_.size(); }
  // Moves to word `pos` of the record; false when past its end.
  bool Seek(size_t pos) {
    if (pos > words_.size()) return false;
    pos_ = pos;
    return true;
  }
  // Narrows the cursor to end at word `end` (an argument's extent).
  WordCursor Sub(size_t end) const { return WordCursor(words_.subspan(0, end), pos_); }

 private:
  WordCursor(absl::Span<const uint64_t> words, size_t pos) : words_(words), pos_(pos) {}
  absl::Span<const uint64_t> words_;
  size_t pos_ = 0;
};

absl::StatusOr<std::unique_ptr<FtfReader>> FtfReader::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = OpenFileSource(path);
  if (!source.ok()) return source.status();
  return FromSource(*std::move(source), path);
}

std::unique_ptr<FtfReader> FtfReader::FromSource(std::unique_ptr<ByteSource> source,
                                                 std::string name) {
  return std::unique_ptr<FtfReader>(new FtfReader(std::move(source), std::move(name)));
}

FtfReader::FtfReader(std::unique_ptr<ByteSource> source, std::string name)
    : source_(std::move(source)), name_(std::move(name)), window_(kInitialWindowBytes) {
  // Provider 0 is implied when a file has no provider records.
  current_ = &Provider(0);
}

FtfReader::ProviderTables& FtfReader::Provider(uint32_t id) {
  std::unique_ptr<ProviderTables>& tables = providers_[id];
  if (tables == nullptr) tables = std::make_unique<ProviderTables>();
  return *tables;
}

absl::Status FtfReader::Error(absl::string_view what) const {
  return absl::DataLossError(absl::StrFormat("%s: offset %u (0x%x): %s record: %s", name_,
                                             record_offset_, record_offset_,
                                             RecordTypeName(record_type_), what));
}

absl::StatusOr<size_t> FtfReader::Fill(size_t bytes) {
  while (window_end_ - window_pos_ < bytes && !source_done_) {
    if (window_pos_ > 0) {
      std::memmove(window_.data(), window_.data() + window_pos_, window_end_ - window_pos_);
      window_end_ -= window_pos_;
      window_pos_ = 0;
    }
    if (window_.size() < bytes) window_.resize(bytes);
    absl::StatusOr<size_t> n = source_->Read(
        absl::MakeSpan(window_.data() + window_end_, window_.size() - window_end_));
    if (!n.ok()) return n.status();
    if (*n == 0) source_done_ = true;
    window_end_ += *n;
  }
  return std::min(bytes, window_end_ - window_pos_);
}

absl::Status FtfReader::SkipBytes(uint64_t bytes) {
  while (bytes > 0) {
    absl::StatusOr<size_t> have = Fill(static_cast<size_t>(std::min<uint64_t>(bytes, kWindowBytes)));
    if (!have.ok()) return have.status();
    if (*have == 0) {
      return Error(absl::StrCat("truncated: ", bytes, " more bytes announced by the header"));
    }
    window_pos_ += *have;
    offset_ += *have;
    bytes -= *have;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FtfReader::Next(FtfRecord* record) {
  record_offset_ = offset_;
  record_type_ = 0;
  absl::StatusOr<size_t> have = Fill(8);
  if (!have.ok()) return have.status();
  if (*have == 0) {
    if (!saw_magic_) {
      return absl::DataLossError(absl::StrCat(name_, ": empty, not a Fuchsia trace"));
    }
    return false;
  }
  if (*have < 8) {
    return absl::DataLossError(absl::StrFormat(
        "%s: offset %u: truncated record header (%u of 8 bytes)", name_, offset_, *have));
  }
  uint64_t header;
  std::memcpy(&header, window_.data() + window_pos_, 8);
  record_type_ = static_cast<uint8_t>(Field(header, 0, 3));
  if (!saw_magic_ && header != kMagicWord) {
    return absl::DataLossError(absl::StrFormat(
        "%s: offset 0: not a Fuchsia trace (first word 0x%016x, expected the magic 0x%016x)",
        name_, header, kMagicWord));
  }

  // Reset only what every record sets; strings and vectors keep their storage.
  record->offset = offset_;
  record->raw_type = record_type_;
  record->type = static_cast<RecordType>(record_type_);
  record->is_magic = false;
  record->skipped = false;

  if (record->type == RecordType::kLargeRecord) {
    // Large records carry a 32-bit size; we read none of their kinds (large blobs).
    record->size_words = Field(header, 4, 35);
    if (record->size_words == 0) return Error("size 0");
    absl::Status skipped = SkipBytes(record->size_words * 8);
    if (!skipped.ok()) return skipped;
    record->skipped = true;
    ++stats_.skipped_records;
    ++stats_.records;
    return true;
  }
  record->size_words = Field(header, 4, 15);
  if (record->size_words == 0) return Error("size 0 (Perfetto rejects the whole file)");
  size_t bytes = record->size_words * 8;
  have = Fill(bytes);
  if (!have.ok()) return have.status();
  if (*have < bytes) {
    return Error(absl::StrFormat("truncated: header says %u bytes, %u remain", bytes, *have));
  }
  record_words_.resize(record->size_words);
  std::memcpy(record_words_.data(), window_.data() + window_pos_, bytes);
  window_pos_ += bytes;
  offset_ += bytes;
  absl::Status parsed = ParseRecord(record_words_, record);
  if (!parsed.ok()) return parsed;
  saw_magic_ = true;
  ++stats_.records;
  if (record->skipped) ++stats_.skipped_records;
  return true;
}

absl::Status FtfReader::ParseRecord(absl::Span<const uint64_t> words, FtfRecord* record) {
  WordCursor cursor(words);
  uint64_t header = 0;
  cursor.ReadWord(&header);  // Next() made sure the record has its header word
  switch (record->type) {
    case RecordType::kMetadata:
      return ParseMetadata(header, cursor, record);
    case RecordType::kInitialization:
      if (!cursor.ReadWord(&record->ticks_per_second)) return Error("missing ticks_per_second");
      if (record->ticks_per_second == 0) return Error("ticks_per_second is 0");
      current_->ticks_per_second = record->ticks_per_second;
      return absl::OkStatus();
    case RecordType::kString: {
      record->string_index = static_cast<uint16_t>(Field(header, 16, 30));
      size_t length = Field(header, 32, 46);
      if (record->string_index == 0) return Error("defines string index 0 (reserved)");
      if (!cursor.ReadBytes(length, &record->string_value)) {
        return Error(absl::StrCat("string of ", length, " bytes does not fit in ",
                                  words.size(), " words"));
      }
      current_->strings[record->string_index] = record->string_value;
      return absl::OkStatus();
    }
    case RecordType::kThread: {
      record->thread_index = static_cast<uint8_t>(Field(header, 16, 23));
      if (record->thread_index == 0) return Error("defines thread index 0 (reserved)");
      if (!cursor.ReadWord(&record->thread.pid) || !cursor.ReadWord(&record->thread.tid)) {
        return Error("missing process or thread koid");
      }
      current_->threads[record->thread_index] = record->thread;
      current_->thread_defined[record->thread_index] = true;
      return absl::OkStatus();
    }
    case RecordType::kEvent:
      return ParseEvent(header, cursor, record);
    case RecordType::kKernelObject:
      return ParseKernelObject(header, cursor, record);
    default:
      record->skipped = true;
      return absl::OkStatus();
  }
}

absl::Status FtfReader::ParseMetadata(uint64_t header, WordCursor& cursor, FtfRecord* record) {
  MetadataRecord& metadata = record->metadata;
  metadata.metadata_type = static_cast<uint8_t>(Field(header, 16, 19));
  metadata.provider_id = 0;
  metadata.provider_name.clear();
  switch (static_cast<MetadataType>(metadata.metadata_type)) {
    case MetadataType::kProviderInfo: {
      metadata.provider_id = static_cast<uint32_t>(Field(header, 20, 51));
      size_t length = Field(header, 52, 59);
      if (!cursor.ReadBytes(length, &metadata.provider_name)) {
        return Error("provider name does not fit in the record");
      }
      if (!providers_.contains(metadata.provider_id) && providers_.size() >= kMaxProviders) {
        return Error(absl::StrCat("more than ", kMaxProviders, " providers"));
      }
      // As in Perfetto: a provider info record starts the provider afresh and makes it
      // current.
      providers_[metadata.provider_id] = std::make_unique<ProviderTables>();
      current_ = providers_[metadata.provider_id].get();
      return absl::OkStatus();
    }
    case MetadataType::kProviderSection:
      metadata.provider_id = static_cast<uint32_t>(Field(header, 20, 51));
      if (!providers_.contains(metadata.provider_id) && providers_.size() >= kMaxProviders) {
        return Error(absl::StrCat("more than ", kMaxProviders, " providers"));
      }
      current_ = &Provider(metadata.provider_id);
      return absl::OkStatus();
    case MetadataType::kTraceInfo:
      record->is_magic = cursor.size() == 1 && Field(header, 20, 23) == 0 &&
                         Field(header, 24, 55) == Field(kMagicWord, 24, 55);
      if (!record->is_magic) record->skipped = true;  // other trace info: nothing we use
      return absl::OkStatus();
    default:
      record->skipped = true;  // provider events (buffer full) and future kinds
      return absl::OkStatus();
  }
}

absl::Status FtfReader::ReadStringRef(uint16_t ref, WordCursor& cursor, absl::string_view field,
                                      std::string* out) {
  if (ref == 0) {
    out->clear();
    return absl::OkStatus();
  }
  if (ref & kInlineStringFlag) {
    size_t length = ref & ~kInlineStringFlag;
    if (!cursor.ReadBytes(length, out)) {
      return Error(absl::StrCat(field, ": inline string of ", length,
                                " bytes runs past the end of the record"));
    }
    return absl::OkStatus();
  }
  auto it = current_->strings.find(ref);
  if (it == current_->strings.end()) {
    return Error(absl::StrCat(field, ": string index ", ref, " used before it was defined"));
  }
  out->assign(it->second);
  return absl::OkStatus();
}

absl::Status FtfReader::ParseEvent(uint64_t header, WordCursor& cursor, FtfRecord* record) {
  EventRecord& event = record->event;
  event.type = static_cast<EventType>(Field(header, 16, 19));
  size_t arg_count = Field(header, 20, 23);
  event.thread_ref = static_cast<uint8_t>(Field(header, 24, 31));
  auto category_ref = static_cast<uint16_t>(Field(header, 32, 47));
  auto name_ref = static_cast<uint16_t>(Field(header, 48, 63));
  event.trailer = 0;
  if (!cursor.ReadWord(&event.ts)) return Error("missing timestamp");
  if (event.thread_ref == 0) {
    if (!cursor.ReadWord(&event.thread.pid) || !cursor.ReadWord(&event.thread.tid)) {
      return Error("inline thread runs past the end of the record");
    }
  } else {
    if (!current_->thread_defined[event.thread_ref]) {
      return Error(absl::StrCat("thread index ", event.thread_ref, " used before it was defined"));
    }
    event.thread = current_->threads[event.thread_ref];
  }
  absl::Status status = ReadStringRef(category_ref, cursor, "category", &event.category);
  if (!status.ok()) return status;
  status = ReadStringRef(name_ref, cursor, "name", &event.name);
  if (!status.ok()) return status;
  status = ParseArgs(arg_count, cursor, &event.args);
  if (!status.ok()) return status;
  switch (event.type) {
    case EventType::kCounter:
    case EventType::kDurationComplete:
    case EventType::kAsyncBegin:
    case EventType::kAsyncInstant:
    case EventType::kAsyncEnd:
    case EventType::kFlowBegin:
    case EventType::kFlowStep:
    case EventType::kFlowEnd:
      if (!cursor.ReadWord(&event.trailer)) {
        return Error(absl::StrCat(EventTypeName(event.type), " event lacks its trailing word"));
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

absl::Status FtfReader::ParseKernelObject(uint64_t header, WordCursor& cursor,
                                          FtfRecord* record) {
  KernelObjectRecord& object = record->object;
  object.obj_type = static_cast<uint8_t>(Field(header, 16, 23));
  auto name_ref = static_cast<uint16_t>(Field(header, 24, 39));
  size_t arg_count = Field(header, 40, 43);
  if (!cursor.ReadWord(&object.koid)) return Error("missing koid");
  absl::Status status = ReadStringRef(name_ref, cursor, "name", &object.name);
  if (!status.ok()) return status;
  return ParseArgs(arg_count, cursor, &object.args);
}

absl::Status FtfReader::ParseArgs(size_t count, WordCursor& cursor, std::vector<ArgValue>* args) {
  args->resize(count);
  for (size_t i = 0; i < count; ++i) {
    ArgValue& arg = (*args)[i];
    size_t base = cursor.pos();
    uint64_t header = 0;
    if (!cursor.ReadWord(&header)) {
      return Error(absl::StrCat("argument ", i, " of ", count, " is missing"));
    }
    arg.raw_type = static_cast<uint8_t>(Field(header, 0, 3));
    arg.type = static_cast<ArgType>(arg.raw_type);
    size_t size_words = Field(header, 4, 15);
    if (size_words == 0 || base + size_words > cursor.size()) {
      return Error(absl::StrCat("argument ", i, " has size ", size_words, " words, record has ",
                                cursor.size() - base, " left"));
    }
    WordCursor arg_cursor = cursor.Sub(base + size_words);
    std::string field = absl::StrCat("argument ", i);
    absl::Status status = ReadStringRef(static_cast<uint16_t>(Field(header, 16, 31)), arg_cursor,
                                        field, &arg.name);
    if (!status.ok()) return status;
    arg.bits = 0;
    arg.double_value = 0;
    arg.string_value.clear();
    bool ok = true;
    switch (arg.type) {
      case ArgType::kNull:
        break;
      case ArgType::kInt32:
      case ArgType::kUint32:
        arg.bits = Field(header, 32, 63);
        break;
      case ArgType::kBool:
        arg.bits = Field(header, 32, 32);
        break;
      case ArgType::kInt64:
      case ArgType::kUint64:
      case ArgType::kPointer:
      case ArgType::kKoid:
        ok = arg_cursor.ReadWord(&arg.bits);
        break;
      case ArgType::kDouble:
        ok = arg_cursor.ReadWord(&arg.bits);
        arg.double_value = std::bit_cast<double>(arg.bits);
        break;
      case ArgType::kString:
        status = ReadStringRef(static_cast<uint16_t>(Field(header, 32, 47)), arg_cursor,
                               absl::StrCat(field, " value"), &arg.string_value);
        if (!status.ok()) return status;
        break;
      default:
        break;  // unknown argument type: skipped by its size
    }
    if (!ok) {
      return Error(absl::StrCat(field, " (", arg.name, "): ", ArgTypeName(arg.type),
                                " value runs past the argument's ", size_words, " words"));
    }
    cursor.Seek(base + size_words);
  }
  return absl::OkStatus();
}

absl::string_view RecordTypeName(uint8_t type) {
  switch (type) {
    case 0: return "metadata";
    case 1: return "initialization";
    case 2: return "string";
    case 3: return "thread";
    case 4: return "event";
    case 5: return "blob";
    case 6: return "userspace object";
    case 7: return "kernel object";
    case 8: return "scheduling";
    case 9: return "log";
    case 15: return "large";
    default: return "unknown";
  }
}

absl::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kInstant: return "instant";
    case EventType::kCounter: return "counter";
    case EventType::kDurationBegin: return "begin";
    case EventType::kDurationEnd: return "end";
    case EventType::kDurationComplete: return "complete";
    case EventType::kAsyncBegin: return "async_begin";
    case EventType::kAsyncInstant: return "async_instant";
    case EventType::kAsyncEnd: return "async_end";
    case EventType::kFlowBegin: return "flow_begin";
    case EventType::kFlowStep: return "flow_step";
    case EventType::kFlowEnd: return "flow_end";
  }
  return "unknown_event";
}

absl::string_view ArgTypeName(ArgType type) {
  switch (type) {
    case ArgType::kNull: return "null";
    case ArgType::kInt32: return "int32";
    case ArgType::kUint32: return "uint32";
    case ArgType::kInt64: return "int64";
    case ArgType::kUint64: return "uint64";
    case ArgType::kDouble: return "double";
    case ArgType::kString: return "string";
    case ArgType::kPointer: return "pointer";
    case ArgType::kKoid: return "koid";
    case ArgType::kBool: return "bool";
  }
  return "unknown_arg";
}

absl::Status ForEachRecord(FtfReader& reader, const std::function<void(const FtfRecord&)>& visit) {
  FtfRecord record;
  for (;;) {
    absl::StatusOr<bool> more = reader.Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    visit(record);
  }
}

}  // namespace ptd::ftf
