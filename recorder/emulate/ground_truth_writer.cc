#include "recorder/emulate/ground_truth_writer.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/file_util.h"

namespace ptd {
namespace {
constexpr size_t kWriteThreshold = 1 << 20;
}  // namespace

absl::StatusOr<GroundTruthWriter> GroundTruthWriter::Create(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return ErrnoError("open ground truth", path, errno);
  GroundTruthWriter writer(file, path);
  writer.buffer_.append(kGroundTruthMagic, 8);
  const uint32_t header[2] = {kGroundTruthVersion, 0};
  writer.buffer_.append(reinterpret_cast<const char*>(header), sizeof(header));
  return writer;
}

GroundTruthWriter::GroundTruthWriter(std::FILE* file, std::string path)
    : file_(file), path_(std::move(path)) {
  buffer_.reserve(kWriteThreshold + 4096);
}

GroundTruthWriter::GroundTruthWriter(GroundTruthWriter&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)),
      buffer_(std::move(other.buffer_)),
      write_failed_(other.write_failed_),
      bytes_written_(other.bytes_written_),
      pid_(other.pid_),
      tid_(other.tid_),
      last_time_(other.last_time_),
      last_ips_(std::move(other.last_ips_)),
      current_last_(other.current_last_),
      run_size_(other.run_size_),
      run_time_(other.run_time_) {
  std::memcpy(run_ips_, other.run_ips_, sizeof(run_ips_));
}

GroundTruthWriter::~GroundTruthWriter() {
  if (file_ != nullptr) (void)Close();
}

void GroundTruthWriter::PutVarint(uint64_t value) {
  while (value >= 0x80) {
    buffer_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  buffer_.push_back(static_cast<char>(value));
}

void GroundTruthWriter::PutZigzag(int64_t value) {
  PutVarint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
}

void GroundTruthWriter::MaybeWrite() {
  if (buffer_.size() < kWriteThreshold) return;
  if (!write_failed_ && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    write_failed_ = true;
  }
  bytes_written_ += buffer_.size();
  buffer_.clear();
}

void GroundTruthWriter::SwitchThread(int pid, int tid) {
  if (tid == tid_ && pid == pid_) return;
  FlushRun();
  pid_ = pid;
  tid_ = tid;
  buffer_.push_back(static_cast<char>(GroundTruthTag::kThread));
  PutVarint(static_cast<uint64_t>(pid));
  PutVarint(static_cast<uint64_t>(tid));
  current_last_ = last_ips_.size();
  for (size_t i = 0; i < last_ips_.size(); ++i) {
    if (last_ips_[i].tid == tid) current_last_ = i;
  }
  if (current_last_ == last_ips_.size()) last_ips_.push_back({tid, 0});
}

void GroundTruthWriter::FlushRun() {
  if (run_size_ == 0) return;
  buffer_.push_back(static_cast<char>(GroundTruthTag::kInsns));
  PutZigzag(static_cast<int64_t>(run_time_ - last_time_));
  last_time_ = run_time_;
  last_ips_[current_last_].time = run_time_;
  PutVarint(static_cast<uint64_t>(run_size_));
  uint64_t& last = last_ips_[current_last_].ip;
  for (int i = 0; i < run_size_; ++i) {
    PutZigzag(static_cast<int64_t>(run_ips_[i] - last));
    last = run_ips_[i];
  }
  run_size_ = 0;
  MaybeWrite();
}

void GroundTruthWriter::Instruction(int pid, int tid, uint64_t ip, uint64_t time) {
  SwitchThread(pid, tid);
  if (run_size_ == 0) run_time_ = time;
  run_ips_[run_size_++] = ip;
  if (run_size_ == 255) FlushRun();
}

void GroundTruthWriter::BeginRecord(GroundTruthTag tag, int pid, int tid, uint64_t time) {
  SwitchThread(pid, tid);
  FlushRun();
  buffer_.push_back(static_cast<char>(tag));
  // A record's time never precedes its thread's run before it; another process's clock
  // may be behind (dt is signed).
  uint64_t& thread_time = last_ips_[current_last_].time;
  if (time < thread_time) time = thread_time;
  thread_time = time;
  PutZigzag(static_cast<int64_t>(time - last_time_));
  last_time_ = time;
}

void GroundTruthWriter::Call(int pid, int tid, uint64_t time, uint64_t from, uint64_t to,
                             uint64_t sp, uint32_t depth, uint32_t flags) {
  BeginRecord(GroundTruthTag::kCall, pid, tid, time);
  PutVarint(from);
  PutVarint(to);
  PutVarint(sp);
  PutVarint(depth);
  PutVarint(flags);
  MaybeWrite();
}

void GroundTruthWriter::Return(int pid, int tid, uint64_t time, uint64_t from, uint64_t to,
                               uint32_t depth) {
  BeginRecord(GroundTruthTag::kReturn, pid, tid, time);
  PutVarint(from);
  PutVarint(to);
  PutVarint(depth);
  MaybeWrite();
}

void GroundTruthWriter::Unwind(int pid, int tid, uint64_t time, uint64_t at, uint64_t to,
                               uint64_t frames, uint32_t depth) {
  BeginRecord(GroundTruthTag::kUnwind, pid, tid, time);
  PutVarint(at);
  PutVarint(to);
  PutVarint(frames);
  PutVarint(depth);
  MaybeWrite();
}

void GroundTruthWriter::Syscall(int pid, int tid, uint64_t time, uint64_t ip) {
  BeginRecord(GroundTruthTag::kSyscall, pid, tid, time);
  PutVarint(ip);
  MaybeWrite();
}

void GroundTruthWriter::Signal(int pid, int tid, uint64_t time, uint64_t interrupted,
                               uint64_t handler, int signo) {
  BeginRecord(GroundTruthTag::kSignal, pid, tid, time);
  PutVarint(interrupted);
  PutVarint(handler);
  PutVarint(static_cast<uint64_t>(signo));
  MaybeWrite();
}

void GroundTruthWriter::End(int pid, int tid, uint64_t time) {
  BeginRecord(GroundTruthTag::kEnd, pid, tid, time);
  MaybeWrite();
}

void GroundTruthWriter::Lost(int pid, int tid, uint64_t time, uint64_t count) {
  BeginRecord(GroundTruthTag::kLost, pid, tid, time);
  PutVarint(count);
  MaybeWrite();
}

absl::Status GroundTruthWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  FlushRun();
  if (!write_failed_ && !buffer_.empty() &&
      std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    write_failed_ = true;
  }
  bytes_written_ += buffer_.size();
  buffer_.clear();
  const int saved_errno = errno;
  const bool close_failed = std::fclose(file_) != 0;
  file_ = nullptr;
  if (write_failed_ || close_failed) return ErrnoError("write ground truth", path_, saved_errno);
  return absl::OkStatus();
}

}  // namespace ptd
