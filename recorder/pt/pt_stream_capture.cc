#include "recorder/pt/pt_stream_capture.h"

#include "recorder/sideband/perf_mmap.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/file_util.h"
#include "sideband/record_reader.h"

namespace ptd::pt {
namespace {

absl::Status WriteAll(std::FILE* file, const std::string& bytes, const std::string& path) {
  if (bytes.empty()) return absl::OkStatus();
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    return ErrnoError("write", path, errno);
  }
  return absl::OkStatus();
}

}  // namespace

PtStreamCapture::PtStreamCapture(std::unique_ptr<PtRingSource> ring, StreamFiles files,
                                 uint64_t sideband_sample_type)
    : ring_(std::move(ring)),
      files_(std::move(files)),
      sample_type_(sideband_sample_type),
      aux_(ring_->header(), ring_->aux(), ring_->aux_size(), ring_->overwrite()),
      data_(ring_->header(), ring_->data(), ring_->data_size()) {
  stream_.file = files_.aux_rel;
  stream_.cpu = ring_->cpu();
  stream_.tid = ring_->tid();
}

PtStreamCapture::~PtStreamCapture() { (void)Close(); }

absl::Status PtStreamCapture::Open() {
  for (const std::string& rel : {files_.aux_rel, files_.sideband_rel}) {
    absl::Status st = MakeDirs(Dirname(files_.dir + "/" + rel));
    if (!st.ok()) return st;
  }
  const std::string aux_path = files_.dir + "/" + files_.aux_rel;
  aux_file_ = std::fopen(aux_path.c_str(), "wb");
  if (aux_file_ == nullptr) return ErrnoError("create", aux_path, errno);
  const std::string sb_path = files_.dir + "/" + files_.sideband_rel;
  sideband_file_ = std::fopen(sb_path.c_str(), "wb");
  if (sideband_file_ == nullptr) return ErrnoError("create", sb_path, errno);
  return absl::OkStatus();
}

absl::Status PtStreamCapture::Close() {
  absl::Status status = absl::OkStatus();
  for (std::FILE** file : {&aux_file_, &sideband_file_}) {
    if (*file != nullptr && std::fclose(*file) != 0 && status.ok()) {
      status = ErrnoError("close", files_.dir + "/" + files_.aux_rel, errno);
    }
    *file = nullptr;
  }
  return status;
}

SidebandFile PtStreamCapture::sideband() const {
  SidebandFile file;
  file.file = files_.sideband_rel;
  file.cpu = ring_->cpu();
  file.tid = ring_->tid();
  file.origin = "kernel";
  file.sample_type = sample_type_;
  file.sample_id_all = true;
  file.lost_records = data_stats_.lost_records;
  return file;
}

absl::Status PtStreamCapture::DrainSideband() {
  if (sideband_file_ == nullptr) return absl::FailedPreconditionError("capture not open");
  sideband_buffer_.clear();
  absl::Status drained = data_.Drain(&sideband_buffer_, &data_stats_);
  // The records are kept even when the ring reported corruption after them.
  RecordFormat format;
  format.sample_type = sample_type_;
  format.sample_id_all = true;
  RecordReader reader(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(sideband_buffer_.data()),
                          sideband_buffer_.size()),
      files_.sideband_rel, format);
  while (true) {
    absl::StatusOr<std::optional<PerfRecord>> record = reader.Next();
    if (!record.ok() || !record->has_value()) break;
    if (const AuxRecord* aux = std::get_if<AuxRecord>(&(*record)->body)) {
      if (ring_->overwrite()) {
        pending_aux_flags_ |= aux->flags;
      } else {
        pending_aux_records_.push_back(*aux);
      }
    } else if (const ForkRecord* fork = std::get_if<ForkRecord>(&(*record)->body)) {
      if (fork->tid != fork->ptid) new_tasks_.push_back(*fork);
    }
  }
  absl::Status written = WriteAll(sideband_file_, sideband_buffer_,
                                  files_.dir + "/" + files_.sideband_rel);
  if (!written.ok()) return written;
  return drained;
}

std::vector<ForkRecord> PtStreamCapture::TakeNewTasks() {
  std::vector<ForkRecord> taken;
  taken.swap(new_tasks_);
  return taken;
}

absl::Status PtStreamCapture::AddChunk(const AuxCopy& copy, const std::string& reason,
                                       uint64_t time_ns) {
  PtChunk chunk;
  chunk.file_offset = aux_file_size_;
  chunk.size = copy.size;
  chunk.aux_offset = copy.aux_offset;
  chunk.time_ns = time_ns;
  chunk.reason = reason;
  chunk.overwrite = ring_->overwrite();
  chunk.lost_before = copy.lost_before || gap_pending_;
  gap_pending_ = false;
  // PERF_RECORD_AUX records describing bytes up to the chunk's end belong to it. A
  // truncation record may have size 0 and sit exactly at the end.
  const uint64_t end = copy.aux_offset + copy.size;
  AuxRecord flags;  // the OR of the flags of every record that belongs to the chunk
  flags.flags = pending_aux_flags_;
  pending_aux_flags_ = 0;
  size_t kept = 0;
  for (const AuxRecord& record : pending_aux_records_) {
    const bool mine =
        record.aux_offset < end || (record.aux_size == 0 && record.aux_offset <= end);
    if (!mine) {
      pending_aux_records_[kept++] = record;
      continue;
    }
    flags.flags |= record.flags;
  }
  pending_aux_records_.resize(kept);
  chunk.truncated = flags.truncated();
  chunk.partial = flags.partial();
  chunk.collision = flags.collision();
  chunk.overwrite |= flags.overwrite();
  // A truncated chunk is followed by a hole: the kernel dropped trace after its end.
  if (chunk.truncated) gap_pending_ = true;
  if (chunk.truncated || chunk.lost_before || chunk.collision) lost_chunks_++;
  if (chunk.size == 0 && !chunk.truncated && !chunk.partial && !chunk.collision) {
    return absl::OkStatus();  // nothing happened
  }
  absl::Status written = WriteAll(aux_file_, aux_buffer_, files_.dir + "/" + files_.aux_rel);
  if (!written.ok()) return written;
  aux_file_size_ += copy.size;
  // Consecutive clean linear reads are one contiguous piece of trace: one chunk.
  if (!stream_.chunks.empty()) {
    PtChunk& last = stream_.chunks.back();
    const bool clean = !chunk.truncated && !chunk.partial && !chunk.collision &&
                       !chunk.lost_before && !last.truncated && !last.partial &&
                       !last.collision;
    if (clean && reason == "linear" && last.reason == "linear" &&
        last.aux_offset + last.size == chunk.aux_offset &&
        last.file_offset + last.size == chunk.file_offset) {
      last.size += chunk.size;
      last.time_ns = time_ns;
      return absl::OkStatus();
    }
  }
  stream_.chunks.push_back(std::move(chunk));
  return absl::OkStatus();
}

absl::Status PtStreamCapture::ReadLinear(const std::string& reason, uint64_t time_ns) {
  // aux_head first: the kernel emits PERF_RECORD_AUX before it publishes aux_head, so
  // every record for the bytes we are about to copy is already in the DATA ring.
  aux_buffer_.clear();
  const AuxCopy copy = aux_.Drain(&aux_buffer_);
  if (aux_.size() - copy.size < PageSize()) full_reads_++;
  absl::Status sideband = DrainSideband();
  absl::Status chunk = AddChunk(copy, reason, time_ns);
  return chunk.ok() ? sideband : chunk;
}

absl::Status PtStreamCapture::Drain(uint64_t time_ns) {
  if (ring_->overwrite()) return DrainSideband();
  return ReadLinear("linear", time_ns);
}

absl::Status PtStreamCapture::Snapshot(const std::string& reason, uint64_t time_ns) {
  if (!ring_->overwrite()) return ReadLinear(reason, time_ns);
  aux_buffer_.clear();
  const AuxCopy copy = aux_.CopyNew(&aux_buffer_);
  // After the copy: the PERF_RECORD_AUX the disable wrote is in the DATA ring by now.
  absl::Status sideband = DrainSideband();
  absl::Status chunk = AddChunk(copy, reason, time_ns);
  return chunk.ok() ? sideband : chunk;
}

}  // namespace ptd::pt
