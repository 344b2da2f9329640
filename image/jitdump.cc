#include "image/jitdump.h"

#include <elf.h>

#include <cstring>
#include <map>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ptd::image {
namespace {

constexpr uint32_t kMagic = 0x4A695444;         // "JiTD" as written by a little-endian runtime
constexpr uint32_t kMagicSwapped = 0x4454694A;  // written by a big-endian one
constexpr size_t kFileHeaderSize = 40;
constexpr size_t kRecordHeaderSize = 16;
constexpr uint64_t kFlagArchTimestamp = 1;

enum RecordType : uint32_t {
  kCodeLoad = 0,
  kCodeMove = 1,
  kCodeDebugInfo = 2,
  kCodeClose = 3,
  kCodeUnwindingInfo = 4,
};

// Little-endian fields of one record body; every read is bounds-checked.
class Fields {
 public:
  explicit Fields(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}
  bool U32(uint32_t* v) { return Get(v, 4); }
  bool U64(uint64_t* v) { return Get(v, 8); }
  // A NUL-terminated string.
  bool String(std::string* s) {
    const void* nul = std::memchr(bytes_.data() + pos_, 0, bytes_.size() - pos_);
    if (nul == nullptr) return false;
    const size_t len = static_cast<const uint8_t*>(nul) - (bytes_.data() + pos_);
    s->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len + 1;
    return true;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  template <typename T>
  bool Get(T* v, size_t n) {
    if (left() < n) return false;
    std::memcpy(v, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  absl::Span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JitDump> ParseJitDump(absl::Span<const uint8_t> bytes, const std::string& path) {
  Fields header(bytes);
  JitDump dump;
  uint32_t magic = 0, total_size = 0, pad = 0;
  uint64_t flags = 0;
  if (!header.U32(&magic)) return absl::InvalidArgumentError(absl::StrFormat("%s: empty, not a jitdump", path));
  if (magic == kMagicSwapped) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a jitdump written in the other byte order (big-endian): not from this machine's architecture", path));
  }
  if (magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not a jitdump (magic 0x%08x, want 0x%08x)", path, magic, kMagic));
  }
  if (!header.U32(&dump.version) || !header.U32(&total_size) || !header.U32(&dump.elf_mach) ||
      !header.U32(&pad) || !header.U32(&dump.pid) || !header.U64(&dump.timestamp) || !header.U64(&flags)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: jitdump header cut short (%d of %d bytes)", path, bytes.size(), kFileHeaderSize));
  }
  if (dump.elf_mach != EM_X86_64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: jitdump of another architecture (ELF machine %d, this decoder reads x86-64, %d)", path,
        dump.elf_mach, EM_X86_64));
  }
  if (total_size < kFileHeaderSize || total_size > bytes.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: jitdump header size %d is impossible (file of %d bytes)", path, total_size, bytes.size()));
  }
  dump.arch_timestamp = (flags & kFlagArchTimestamp) != 0;

  std::map<uint64_t, size_t> load_by_index;  // code_index → its load in dump.code
  size_t offset = total_size;
  while (offset < bytes.size()) {
    if (bytes.size() - offset < kRecordHeaderSize) {
      dump.warnings.push_back(absl::StrFormat(
          "%s: record header at offset 0x%x cut short (%d bytes left): the rest is ignored", path, offset,
          bytes.size() - offset));
      break;
    }
    Fields rh(bytes.subspan(offset, kRecordHeaderSize));
    uint32_t type = 0, size = 0;
    uint64_t timestamp = 0;
    rh.U32(&type);
    rh.U32(&size);
    rh.U64(&timestamp);
    if (size < kRecordHeaderSize) {
      dump.warnings.push_back(absl::StrFormat(
          "%s: record at offset 0x%x has an impossible size %d: the rest is ignored", path, offset, size));
      break;
    }
    if (size > bytes.size() - offset) {
      dump.warnings.push_back(absl::StrFormat(
          "%s: record at offset 0x%x (type %d, %d bytes) cut short at the end of the file: the rest is ignored",
          path, offset, type, size));
      break;
    }
    const size_t body_offset = offset + kRecordHeaderSize;
    Fields body(bytes.subspan(body_offset, size - kRecordHeaderSize));
    bool ok = true;
    switch (type) {
      case kCodeLoad: {
        JitCodeEvent load;
        load.timestamp = timestamp;
        uint64_t vma = 0;
        ok = body.U32(&load.pid) && body.U32(&load.tid) && body.U64(&vma) && body.U64(&load.code_addr) &&
             body.U64(&load.code_size) && body.U64(&load.code_index) && body.String(&load.name) &&
             body.left() >= load.code_size;
        if (!ok) break;
        load.code_offset = body_offset + body.pos();
        load_by_index[load.code_index] = dump.code.size();
        dump.code.push_back(std::move(load));
        break;
      }
      case kCodeMove: {
        JitCodeEvent move;
        move.kind = JitCodeEvent::Kind::kMove;
        move.timestamp = timestamp;
        uint64_t vma = 0;
        ok = body.U32(&move.pid) && body.U32(&move.tid) && body.U64(&vma) && body.U64(&move.old_code_addr) &&
             body.U64(&move.code_addr) && body.U64(&move.code_size) && body.U64(&move.code_index);
        if (!ok) break;
        auto load = load_by_index.find(move.code_index);
        if (load == load_by_index.end() || dump.code[load->second].code_size < move.code_size) {
          dump.warnings.push_back(absl::StrFormat(
              "%s: JIT_CODE_MOVE at offset 0x%x moves code index %d, which no earlier load has: skipped", path,
              offset, move.code_index));
          break;
        }
        move.name = dump.code[load->second].name;
        move.code_offset = dump.code[load->second].code_offset;
        dump.code.push_back(std::move(move));
        break;
      }
      case kCodeDebugInfo: {
        JitDebugInfo info;
        info.timestamp = timestamp;
        uint64_t count = 0;
        ok = body.U64(&info.code_addr) && body.U64(&count);
        for (uint64_t i = 0; ok && i < count; ++i) {
          JitDebugEntry entry;
          ok = body.U64(&entry.code_addr) && body.U32(&entry.line) && body.U32(&entry.discriminator) &&
               body.String(&entry.file);
          if (ok) info.entries.push_back(std::move(entry));
        }
        if (ok) dump.debug_info.push_back(std::move(info));
        break;
      }
      case kCodeClose:
        dump.closed = true;
        break;
      case kCodeUnwindingInfo:
        ++dump.unwinding_records;
        break;
      default:
        dump.warnings.push_back(absl::StrFormat("%s: record at offset 0x%x has unknown type %d: skipped", path,
                                                offset, type));
        break;
    }
    if (!ok) {
      dump.warnings.push_back(absl::StrFormat(
          "%s: record at offset 0x%x (type %d) is shorter than its fields: skipped", path, offset, type));
    }
    offset += size;
  }
  return dump;
}

absl::StatusOr<JitDump> ReadJitDump(const std::string& path) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  return ParseJitDump(*bytes, path);
}

namespace {
template <typename T>
void Put(T value, std::vector<uint8_t>* out) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}
}  // namespace

void AppendJitDumpHeader(uint32_t pid, uint64_t timestamp, std::vector<uint8_t>* out) {
  Put<uint32_t>(kMagic, out);
  Put<uint32_t>(1, out);  // version
  Put<uint32_t>(kFileHeaderSize, out);
  Put<uint32_t>(EM_X86_64, out);
  Put<uint32_t>(0, out);
  Put<uint32_t>(pid, out);
  Put<uint64_t>(timestamp, out);
  Put<uint64_t>(0, out);  // flags
}

void AppendJitCodeLoad(const JitCodeEvent& load, absl::Span<const uint8_t> code, std::vector<uint8_t>* out) {
  const size_t size = kRecordHeaderSize + 4 + 4 + 8 * 4 + load.name.size() + 1 + code.size();
  Put<uint32_t>(kCodeLoad, out);
  Put<uint32_t>(static_cast<uint32_t>(size), out);
  Put<uint64_t>(load.timestamp, out);
  Put<uint32_t>(load.pid, out);
  Put<uint32_t>(load.tid, out);
  Put<uint64_t>(load.code_addr, out);  // vma
  Put<uint64_t>(load.code_addr, out);
  Put<uint64_t>(code.size(), out);
  Put<uint64_t>(load.code_index, out);
  out->insert(out->end(), load.name.begin(), load.name.end());
  out->push_back(0);
  out->insert(out->end(), code.begin(), code.end());
}

bool IsJitDumpName(const std::string& path, int* pid) {
  absl::string_view base = Basename(path);
  if (!absl::ConsumePrefix(&base, "jit-") || !absl::ConsumeSuffix(&base, ".dump")) return false;
  int value = 0;
  if (base.empty() || !absl::c_all_of(base, absl::ascii_isdigit) || !absl::SimpleAtoi(base, &value)) return false;
  if (pid != nullptr) *pid = value;
  return true;
}

}  // namespace ptd::image
