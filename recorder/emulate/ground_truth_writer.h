#pragma once
// Writes the ground truth format described in ground_truth.h. Instructions of one thread
// are batched into runs; a run ends at a thread change, an event or 255 instructions.
// Buffered: nothing is allocated per instruction once the buffer has grown.

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recorder/emulate/ground_truth.h"

namespace ptd {

class GroundTruthWriter {
 public:
  static absl::StatusOr<GroundTruthWriter> Create(const std::string& path);
  GroundTruthWriter(GroundTruthWriter&& other) noexcept;
  GroundTruthWriter& operator=(GroundTruthWriter&&) = delete;
  GroundTruthWriter(const GroundTruthWriter&) = delete;
  ~GroundTruthWriter();

  void Instruction(int pid, int tid, uint64_t ip, uint64_t time);
  void Call(int pid, int tid, uint64_t time, uint64_t from, uint64_t to, uint64_t sp,
            uint32_t depth, uint32_t flags);
  void Return(int pid, int tid, uint64_t time, uint64_t from, uint64_t to, uint32_t depth);
  void Unwind(int pid, int tid, uint64_t time, uint64_t at, uint64_t to, uint64_t frames,
              uint32_t depth);
  void Syscall(int pid, int tid, uint64_t time, uint64_t ip);
  void Signal(int pid, int tid, uint64_t time, uint64_t interrupted, uint64_t handler, int signo);
  void End(int pid, int tid, uint64_t time);
  void Lost(int pid, int tid, uint64_t time, uint64_t count);

  // Writes everything out and closes the file; the first write error, if any.
  absl::Status Close();
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  GroundTruthWriter(std::FILE* file, std::string path);
  void SwitchThread(int pid, int tid);
  void BeginRecord(GroundTruthTag tag, int pid, int tid, uint64_t time);
  void FlushRun();
  void PutVarint(uint64_t value);
  void PutZigzag(int64_t value);
  void MaybeWrite();

  struct LastIp {
    int tid = -1;
    uint64_t ip = 0;
    uint64_t time = 0;  // of the thread's newest record (processes' clocks are their own)
  };

  std::FILE* file_ = nullptr;
  std::string path_;
  std::string buffer_;
  bool write_failed_ = false;
  uint64_t bytes_written_ = 0;
  int pid_ = -1;
  int tid_ = -1;
  uint64_t last_time_ = 0;
  // Last IP and time per thread, for the deltas (a small vector: few threads).
  std::vector<LastIp> last_ips_;
  size_t current_last_ = 0;
  uint64_t run_ips_[255];
  int run_size_ = 0;
  uint64_t run_time_ = 0;
};

}  // namespace ptd
