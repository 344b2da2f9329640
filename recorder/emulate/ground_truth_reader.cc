#include "recorder/emulate/ground_truth.h"

#include <cstring>
#include <initializer_list>
#include <utility>

#include <unordered_map>
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ptd {
namespace {

constexpr size_t kHeaderSize = 16;
// No sane run is longer than this; bounds work and memory on corrupt input.
constexpr uint64_t kMaxRun = 1u << 20;

// One varint field of a record: its name (for errors) and the record member it fills.
struct VarintField {
  VarintField(const char* name, uint64_t* to) : name(name), wide(to) {}
  VarintField(const char* name, uint32_t* to) : name(name), narrow(to) {}
  void Store(uint64_t value) const {
    if (wide != nullptr) {
      *wide = value;
    } else {
      *narrow = static_cast<uint32_t>(value);
    }
  }
  const char* name;
  uint64_t* wide = nullptr;
  uint32_t* narrow = nullptr;
};

}  // namespace

GroundTruthReader::GroundTruthReader(std::vector<uint8_t> bytes, std::string source)
    : bytes_(std::move(bytes)), source_(std::move(source)) {}

absl::StatusOr<GroundTruthReader> GroundTruthReader::Open(const std::string& path) {
  absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  return FromBytes(*std::move(bytes), path);
}

absl::StatusOr<GroundTruthReader> GroundTruthReader::FromBytes(std::vector<uint8_t> bytes,
                                                               std::string source) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kGroundTruthMagic, 8) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: offset 0: not a ground truth file (magic %s expected)", source,
                        kGroundTruthMagic));
  }
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != kGroundTruthVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: offset 8: ground truth version %u, this reader knows %u", source, version,
        kGroundTruthVersion));
  }
  GroundTruthReader reader(std::move(bytes), std::move(source));
  reader.pos_ = kHeaderSize;
  return reader;
}

absl::Status GroundTruthReader::Corrupt(const char* what) const {
  return absl::DataLossError(absl::StrFormat("%s: offset %u: record at offset %u: %s", source_,
                                             pos_, record_start_, what));
}

absl::Status GroundTruthReader::ReadVarint(uint64_t* value, const char* field) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= bytes_.size()) {
      return absl::DataLossError(absl::StrFormat("%s: offset %u: record at offset %u: "
                                                 "truncated varint (%s)",
                                                 source_, pos_, record_start_, field));
    }
    const uint8_t byte = bytes_[pos_++];
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return absl::OkStatus();
    }
  }
  return absl::DataLossError(absl::StrFormat("%s: offset %u: record at offset %u: varint "
                                             "longer than 10 bytes (%s)",
                                             source_, pos_, record_start_, field));
}

absl::Status GroundTruthReader::ReadZigzag(int64_t* value, const char* field) {
  uint64_t raw = 0;
  if (absl::Status s = ReadVarint(&raw, field); !s.ok()) return s;
  *value = static_cast<int64_t>(raw >> 1) ^ -static_cast<int64_t>(raw & 1);
  return absl::OkStatus();
}

absl::StatusOr<bool> GroundTruthReader::Next(GroundTruthRecord* record) {
  if (run_left_ > 0) {
    ThreadState& t = threads_[current_];
    int64_t dip = 0;
    if (absl::Status s = ReadZigzag(&dip, "instruction delta"); !s.ok()) return s;
    t.last_ip += static_cast<uint64_t>(dip);
    --run_left_;
    *record = GroundTruthRecord{};
    record->type = GroundTruthTag::kInsns;
    record->pid = t.pid;
    record->tid = t.tid;
    record->time = run_time_;
    record->ip = t.last_ip;
    return true;
  }
  for (;;) {
    if (pos_ >= bytes_.size()) return false;
    record_start_ = pos_;
    const uint8_t tag = bytes_[pos_++];
    if (tag == static_cast<uint8_t>(GroundTruthTag::kThread)) {
      uint64_t pid = 0, tid = 0;
      if (absl::Status s = ReadVarint(&pid, "pid"); !s.ok()) return s;
      if (absl::Status s = ReadVarint(&tid, "tid"); !s.ok()) return s;
      if (pid > 0x7fffffff || tid > 0x7fffffff) return Corrupt("pid/tid out of range");
      size_t index = threads_.size();
      for (size_t i = 0; i < threads_.size(); ++i) {
        if (threads_[i].tid == static_cast<int>(tid)) index = i;
      }
      if (index == threads_.size()) threads_.push_back({});
      threads_[index].pid = static_cast<int>(pid);
      threads_[index].tid = static_cast<int>(tid);
      current_ = index;
      have_thread_ = true;
      continue;
    }
    if (!have_thread_) return Corrupt("record before the first THREAD record");
    if (tag < static_cast<uint8_t>(GroundTruthTag::kInsns) ||
        tag > static_cast<uint8_t>(GroundTruthTag::kLost)) {
      return Corrupt("unknown record tag");
    }
    int64_t dt = 0;
    if (absl::Status s = ReadZigzag(&dt, "time delta"); !s.ok()) return s;
    time_ += static_cast<uint64_t>(dt);
    const ThreadState& t = threads_[current_];
    *record = GroundTruthRecord{};
    record->type = static_cast<GroundTruthTag>(tag);
    record->pid = t.pid;
    record->tid = t.tid;
    record->time = time_;
    // The record's varint fields, in the order GroundTruthWriter writes them.
    auto read = [&](std::initializer_list<VarintField> fields) -> absl::Status {
      for (const VarintField& field : fields) {
        uint64_t value = 0;
        if (absl::Status s = ReadVarint(&value, field.name); !s.ok()) return s;
        field.Store(value);
      }
      return absl::OkStatus();
    };
    absl::Status fields;
    GroundTruthRecord& r = *record;
    switch (r.type) {
      case GroundTruthTag::kInsns: {
        uint64_t n = 0;
        if (absl::Status s = ReadVarint(&n, "run length"); !s.ok()) return s;
        if (n == 0 || n > kMaxRun) return Corrupt("instruction run length out of range");
        run_left_ = n;
        run_time_ = time_;
        return Next(record);
      }
      case GroundTruthTag::kCall:
        fields = read({{"from", &r.from}, {"to", &r.to}, {"sp", &r.sp}, {"depth", &r.depth},
                       {"flags", &r.flags}});
        break;
      case GroundTruthTag::kReturn:
        fields = read({{"from", &r.from}, {"to", &r.to}, {"depth", &r.depth}});
        break;
      case GroundTruthTag::kUnwind:
        fields = read({{"at", &r.from}, {"to", &r.to}, {"frames", &r.count}, {"depth", &r.depth}});
        break;
      case GroundTruthTag::kSyscall:
        fields = read({{"ip", &r.ip}});
        break;
      case GroundTruthTag::kSignal:
        fields = read({{"interrupted", &r.from}, {"handler", &r.to}, {"signo", &r.count}});
        break;
      case GroundTruthTag::kEnd:
        break;
      case GroundTruthTag::kLost:
        fields = read({{"count", &r.count}});
        break;
      case GroundTruthTag::kThread:
        return Corrupt("unknown record tag");
    }
    if (!fields.ok()) return fields;
    return true;
  }
}

absl::StatusOr<std::vector<GroundTruthThread>> LoadGroundTruth(const std::string& path) {
  absl::StatusOr<GroundTruthReader> reader = GroundTruthReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::vector<GroundTruthThread> threads;
  std::unordered_map<int, size_t> index_of;
  GroundTruthRecord record;
  for (;;) {
    absl::StatusOr<bool> more = reader->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    auto [it, inserted] = index_of.try_emplace(record.tid, threads.size());
    if (inserted) {
      threads.emplace_back();
      threads.back().pid = record.pid;
      threads.back().tid = record.tid;
    }
    GroundTruthThread& t = threads[it->second];
    if (record.type == GroundTruthTag::kInsns) {
      t.ips.push_back(record.ip);
      t.ip_times.push_back(record.time);
    } else {
      if (record.type == GroundTruthTag::kLost) t.lost += record.count;
      t.events.push_back(record);
      t.event_insn_index.push_back(t.ips.size());
    }
  }
  return threads;
}

}  // namespace ptd
