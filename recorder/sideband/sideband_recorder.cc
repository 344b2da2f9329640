#include "recorder/sideband/sideband_recorder.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "recorder/sideband/sideband_events.h"

namespace ptd {

struct SidebandRecorder::Ring {
  Ring(PerfEvent ev, PerfMmap mm, int ring_cpu, int ring_tid)
      : event(std::move(ev)),
        mmap(std::move(mm)),
        reader(mmap.header(), mmap.data(), mmap.data_size()),
        cpu(ring_cpu),
        tid(ring_tid) {}
  ~Ring() {
    if (file_fd >= 0) ::close(file_fd);
  }

  PerfEvent event;
  PerfMmap mmap;
  DataRing reader;
  int cpu;
  int tid;
  std::string relative_path;
  int file_fd = -1;
  bool hung_up = false;  // POLLHUP: every task of the event exited; drained, not polled
  DataRingStats stats;
  std::string pending;   // reused between drains: capacity stays, no per-drain allocation
};

namespace {

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot write", path, errno);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> OnlineCpus() {
  const std::string path = "/sys/devices/system/cpu/online";
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  std::vector<int> cpus;
  for (absl::string_view part : absl::StrSplit(absl::StripAsciiWhitespace(*text), ',',
                                               absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    if (range.empty() || range.size() > 2 || !absl::SimpleAtoi(range[0], &first) ||
        !absl::SimpleAtoi(range.back(), &last) || first < 0 || last < first || last > 65535) {
      return absl::DataLossError(absl::StrCat(path, ": cannot parse \"", part, "\""));
    }
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  if (cpus.empty()) return absl::DataLossError(absl::StrCat(path, ": no CPUs listed"));
  return cpus;
}

SidebandRecorder::SidebandRecorder(const SidebandRecorderOptions& options,
                                   const TraceDirWriter& dir)
    : options_(options), dir_(dir) {}

absl::StatusOr<std::unique_ptr<SidebandRecorder>> SidebandRecorder::Open(
    const std::vector<int>& tids, const SidebandRecorderOptions& options,
    const TraceDirWriter& dir) {
  if (tids.empty()) return absl::InvalidArgumentError("no threads to record sideband for");
  std::unique_ptr<SidebandRecorder> rec(new SidebandRecorder(options, dir));
  rec->ring_bytes_ = RoundUpToRingSize(options.data_size);
  if (options.per_cpu) {
    absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
    if (!cpus.ok()) return cpus.status();
    rec->cpus_ = *cpus;
  }
  if (::pipe2(rec->wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return ErrnoError("pipe", "sideband recorder", errno);
  }
  std::lock_guard<std::mutex> lock(rec->mu_);
  for (size_t i = 0; i < tids.size(); ++i) {
    absl::Status st = rec->OpenThreadLocked(tids[i]);
    // A thread other than the first may exit while we attach; that is not an error.
    if (!st.ok() && (i == 0 || st.code() != absl::StatusCode::kNotFound)) return st;
  }
  return rec;
}

SidebandRecorder::~SidebandRecorder() {
  (void)Stop();
  for (int fd : wake_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

absl::StatusOr<SidebandRecorder::Ring*> SidebandRecorder::NewRingLocked(PerfEvent event, int cpu,
                                                                        int tid) {
  absl::StatusOr<PerfMmap> mm = PerfMmap::Map(event, ring_bytes_);
  if (!mm.ok()) return mm.status();
  if (first_event_id_ == 0) {
    absl::StatusOr<uint64_t> id = event.Id();
    if (id.ok()) first_event_id_ = *id;
  }
  auto ring = std::make_unique<Ring>(std::move(event), std::move(*mm), cpu, tid);
  ring->relative_path = cpu >= 0 ? absl::StrCat(kSidebandSubdir, "/cpu", cpu, ".data")
                                 : absl::StrCat(kSidebandSubdir, "/tid", tid, ".data");
  std::string path = dir_.FilePath(ring->relative_path);
  ring->file_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (ring->file_fd < 0) return ErrnoError("cannot create", path, errno);
  rings_.push_back(std::move(ring));
  return rings_.back().get();
}

absl::Status SidebandRecorder::OpenThreadLocked(int tid) {
  SidebandEventOptions ev;
  ev.per_cpu = options_.per_cpu;
  ev.enable_on_exec = options_.enable_on_exec;
  ev.clockid = options_.clockid;
  ev.context_switches = options_.context_switches;
  // Wake at a quarter of the ring so the drain thread keeps well ahead of the kernel.
  ev.wakeup_watermark = static_cast<uint32_t>(ring_bytes_ / 4);
  perf_event_attr attr = DummySidebandAttr(ev);
  if (!options_.per_cpu) {
    absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, tid, -1);
    if (!event.ok()) return event.status();
    absl::StatusOr<Ring*> ring = NewRingLocked(std::move(*event), -1, tid);
    return ring.status();
  }
  for (int cpu : cpus_) {
    absl::StatusOr<PerfEvent> event = PerfEvent::Open(attr, tid, cpu);
    if (!event.ok()) return event.status();
    Ring* cpu_ring = nullptr;
    for (const auto& r : rings_) {
      if (r->cpu == cpu) cpu_ring = r.get();
    }
    if (cpu_ring == nullptr) {
      absl::StatusOr<Ring*> ring = NewRingLocked(std::move(*event), cpu, -1);
      if (!ring.ok()) return ring.status();
      continue;
    }
    // perf's layout: one ring per CPU, the other (thread, CPU) events write into it.
    if (absl::Status st = event->SetOutput(cpu_ring->event); !st.ok()) return st;
    events_.push_back(std::move(*event));
  }
  return absl::OkStatus();
}

absl::Status SidebandRecorder::AddThread(int tid) {
  // Per-CPU events inherit: threads created by a recorded thread are already followed.
  if (options_.per_cpu) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& r : rings_) {
    if (r->tid == tid) return absl::OkStatus();
  }
  if (absl::Status st = OpenThreadLocked(tid); !st.ok()) return st;
  // A thread that appears later is past any exec the events waited for: enable it now.
  if (absl::Status st = rings_.back()->event.Enable(); !st.ok()) return st;
  if (wake_fds_[1] >= 0) (void)!::write(wake_fds_[1], "r", 1);  // poll the new ring too
  return absl::OkStatus();
}

absl::Status SidebandRecorder::Enable() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& r : rings_) {
    if (absl::Status st = r->event.Enable(); !st.ok()) return st;
  }
  for (PerfEvent& e : events_) {
    if (absl::Status st = e.Enable(); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status SidebandRecorder::Disable() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status first = absl::OkStatus();
  for (const auto& r : rings_) first.Update(r->event.Disable());
  for (PerfEvent& e : events_) first.Update(e.Disable());
  return first;
}

absl::Status SidebandRecorder::DrainAllLocked() {
  absl::Status first = absl::OkStatus();
  for (const auto& r : rings_) {
    if (r->file_fd < 0) continue;
    r->pending.clear();
    absl::Status st = r->reader.Drain(&r->pending, &r->stats);
    if (!st.ok()) {
      first.Update(absl::Status(st.code(), absl::StrCat(r->relative_path, ": ", st.message())));
    }
    // Whatever was read before an error is still written.
    if (!r->pending.empty()) {
      first.Update(WriteAll(r->file_fd, r->pending, dir_.FilePath(r->relative_path)));
    }
  }
  if (first_error_.ok()) first_error_ = first;
  return first;
}

absl::Status SidebandRecorder::Start() {
  if (drain_thread_.joinable() || stopped_) {
    return absl::FailedPreconditionError("sideband recorder already started");
  }
  drain_thread_ = std::thread([this] { DrainLoop(); });
  return absl::OkStatus();
}

void SidebandRecorder::DrainLoop() {
  std::vector<pollfd> fds;
  std::vector<Ring*> polled;
  while (!stopping_.load(std::memory_order_acquire)) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_fds_[0], POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& r : rings_) {
        if (r->hung_up) continue;
        fds.push_back({r->event.fd(), POLLIN, 0});
        polled.push_back(r.get());
      }
    }
    int n = ::poll(fds.data(), fds.size(), options_.poll_timeout_ms);
    if (n < 0 && errno != EINTR) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_error_.ok()) first_error_ = ErrnoError("poll", "sideband rings", errno);
      break;
    }
    if (n > 0 && (fds[0].revents & POLLIN)) {
      char buf[64];
      while (::read(wake_fds_[0], buf, sizeof(buf)) > 0) {
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 1; i < fds.size(); ++i) {
      // The event's tasks are gone: the ring gets no more records, but a hung-up fd
      // polls readable forever, so it leaves the poll set (still drained below).
      if (fds[i].revents & (POLLHUP | POLLERR)) polled[i - 1]->hung_up = true;
    }
    (void)DrainAllLocked();
  }
}

absl::Status SidebandRecorder::Stop() {
  if (stopped_) {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }
  stopped_ = true;
  stopping_.store(true, std::memory_order_release);
  if (wake_fds_[1] >= 0) (void)!::write(wake_fds_[1], "s", 1);
  if (drain_thread_.joinable()) drain_thread_.join();
  (void)Disable();
  std::lock_guard<std::mutex> lock(mu_);
  (void)DrainAllLocked();
  for (const auto& r : rings_) {
    if (r->file_fd >= 0 && ::close(r->file_fd) != 0 && first_error_.ok()) {
      first_error_ = ErrnoError("cannot close", dir_.FilePath(r->relative_path), errno);
    }
    r->file_fd = -1;
  }
  return first_error_;
}

std::vector<SidebandFile> SidebandRecorder::Files() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SidebandFile> files;
  for (const auto& r : rings_) {
    SidebandFile f;
    f.file = r->relative_path;
    f.cpu = r->cpu;
    f.tid = r->tid;
    f.origin = "kernel";
    f.sample_type = kSidebandSampleType;
    f.sample_id_all = true;
    f.lost_records = r->stats.lost_records;
    files.push_back(std::move(f));
  }
  return files;
}

DataRingStats SidebandRecorder::TotalStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  DataRingStats total;
  for (const auto& r : rings_) {
    total.bytes += r->stats.bytes;
    total.records += r->stats.records;
    total.lost_records += r->stats.lost_records;
    total.lost_events += r->stats.lost_events;
    total.lost_samples += r->stats.lost_samples;
    total.wrapped_records += r->stats.wrapped_records;
    total.drains += r->stats.drains;
  }
  return total;
}

}  // namespace ptd
