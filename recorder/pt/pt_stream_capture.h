#pragma once
// Everything one ring produces, taken to disk: the AUX bytes as chunks of a stream file
// (aux/…pt), the DATA ring's records as a sideband file, and per chunk the flags of the
// PERF_RECORD_AUX records that describe it, so the decoder can mark lost data.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/trace_meta.h"
#include "recorder/sideband/data_ring.h"
#include "recorder/pt/aux_ring.h"
#include "recorder/pt/pt_ring_source.h"
#include "sideband/perf_record.h"

namespace ptd::pt {

struct StreamFiles {
  std::string dir;        // trace (staging) directory
  std::string aux_rel;    // e.g. "aux/cpu0.pt"
  std::string sideband_rel;  // e.g. "sideband/cpu0.data"
};

class PtStreamCapture {
 public:
  PtStreamCapture(std::unique_ptr<PtRingSource> ring, StreamFiles files,
                  uint64_t sideband_sample_type);
  ~PtStreamCapture();
  PtStreamCapture(const PtStreamCapture&) = delete;
  PtStreamCapture& operator=(const PtStreamCapture&) = delete;

  // Creates the two files (and their folders).
  absl::Status Open();

  // Overwrite mode, with the PT event disabled (ring().DisablePt(); PtRecording disables
  // every ring first, so that per-CPU snapshots are one cut): drains the sideband and
  // copies the AUX bytes written since the previous snapshot as one chunk tagged
  // `reason` (no chunk when nothing was written). Linear mode: the same as Drain(), with
  // `reason` on the chunk.
  absl::Status Snapshot(const std::string& reason, uint64_t time_ns);

  // Takes what the kernel has produced so far: all sideband records, and in linear mode
  // the AUX bytes up to aux_head (advancing aux_tail).
  absl::Status Drain(uint64_t time_ns);

  // Flushes and closes the files (idempotent).
  absl::Status Close();

  const PtStream& stream() const { return stream_; }
  SidebandFile sideband() const;
  uint64_t aux_bytes() const { return aux_file_size_; }
  uint64_t lost_chunks() const { return lost_chunks_; }
  uint64_t sideband_lost_records() const { return data_stats_.lost_records; }
  // Linear reads that found the ring within a page of full: the kernel may then have
  // disabled the PT event with no record at all (perf_aux_output_begin with no room).
  uint64_t full_reads() const { return full_reads_; }
  size_t pending_aux_records() const { return pending_aux_records_.size(); }
  PtRingSource& ring() { return *ring_; }
  // Tasks the DATA ring reported as created since the last call (PERF_RECORD_FORK: a
  // thread when pid == ppid, else a child process): PtRecording opens events for those
  // it follows.
  std::vector<ForkRecord> TakeNewTasks();

 private:
  absl::Status DrainSideband();
  absl::Status AddChunk(const AuxCopy& copy, const std::string& reason, uint64_t time_ns);
  // Linear mode: aux_tail to aux_head as a chunk tagged `reason`, the sideband drained.
  absl::Status ReadLinear(const std::string& reason, uint64_t time_ns);

  std::unique_ptr<PtRingSource> ring_;
  StreamFiles files_;
  uint64_t sample_type_;
  AuxRing aux_;
  DataRing data_;
  DataRingStats data_stats_;
  std::FILE* aux_file_ = nullptr;
  std::FILE* sideband_file_ = nullptr;
  std::string aux_buffer_;       // reused between reads: no allocation per drain
  std::string sideband_buffer_;
  // Linear mode: PERF_RECORD_AUX not yet matched to a chunk (bounded: consumed by the
  // drain that copies their bytes).
  std::vector<AuxRecord> pending_aux_records_;
  // Overwrite mode: the kernel writes one PERF_RECORD_AUX per sched-out, all with
  // in-buffer offsets; only their flags matter, OR-ed until the next snapshot.
  uint64_t pending_aux_flags_ = 0;
  std::vector<ForkRecord> new_tasks_;
  bool gap_pending_ = false;     // a truncation: the next chunk has data missing before it
  uint64_t aux_file_size_ = 0;
  uint64_t lost_chunks_ = 0;
  uint64_t full_reads_ = 0;
  PtStream stream_;
};

}  // namespace ptd::pt
