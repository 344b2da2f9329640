#include "recorder/valgrind/vgpt_spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd {
namespace {

constexpr size_t kReadBytes = 4u << 20;    // at most this much per file per Pump
constexpr uint64_t kPunchBytes = 8u << 20;  // give back consumed disk in steps of this

}  // namespace

struct VgptSpool::File {
  std::string path;
  int fd = -1;
  int instance = -1;
  uint64_t offset = 0;    // bytes read so far
  uint64_t punched = 0;   // bytes given back to the file system
  uint64_t consumed = 0;  // bytes fed to the converter
  uint64_t limit = UINT64_MAX;  // Drain: read no further than the size it found
  std::vector<uint32_t> words;  // read, not yet consumed (an incomplete record at most)
  uint8_t tail[4] = {};         // a word read in part
  size_t tail_size = 0;
  bool closed = false;
};

VgptSpool::VgptSpool(std::string dir, VgptConverter* converter)
    : dir_(std::move(dir)), converter_(converter) {}

VgptSpool::~VgptSpool() {
  for (auto& [pid, by_seq] : files_) {
    for (auto& [seq, file] : by_seq) {
      if (file->fd >= 0) close(file->fd);
    }
  }
}

absl::Status VgptSpool::Scan() {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return ErrnoError("cannot list", dir_, errno);
  while (dirent* e = readdir(d)) {
    int pid = 0, seq = 0;
    char suffix[8] = {};
    if (sscanf(e->d_name, "%d-%d.%7s", &pid, &seq, suffix) != 3 || std::strcmp(suffix, "vgpt") != 0) continue;
    auto& slot = files_[pid][seq];
    if (slot != nullptr) continue;
    auto file = std::make_unique<File>();
    file->path = absl::StrCat(dir_, "/", e->d_name);
    file->fd = open(file->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file->fd < 0) {
      closedir(d);
      return ErrnoError("cannot open", file->path, errno);
    }
    slot = std::move(file);
  }
  closedir(d);
  return absl::OkStatus();
}

absl::Status VgptSpool::Pump(File& file, bool final_read, bool* progress) {
  if (file.instance < 0) file.instance = converter_->OpenInstance(file.path);
  // Read what is new, after what is left of the last read.
  const size_t have = file.words.size();
  std::vector<uint8_t> buffer(kReadBytes);
  std::memcpy(buffer.data(), file.tail, file.tail_size);
  const uint64_t room = std::min<uint64_t>(kReadBytes - file.tail_size, file.limit - std::min(file.limit, file.offset));
  const ssize_t n = pread(file.fd, buffer.data() + file.tail_size, room, static_cast<off_t>(file.offset));
  if (n < 0) return ErrnoError("cannot read", file.path, errno);
  file.offset += static_cast<uint64_t>(n);
  bytes_read_ += static_cast<uint64_t>(n);
  const size_t bytes = file.tail_size + static_cast<size_t>(n);
  const size_t whole = bytes / 4;
  if (whole > 0) {
    file.words.resize(have + whole);
    std::memcpy(file.words.data() + have, buffer.data(), whole * 4);
  }
  file.tail_size = bytes - whole * 4;
  std::memcpy(file.tail, buffer.data() + whole * 4, file.tail_size);
  if (file.words.empty()) return absl::OkStatus();

  bool waiting = false;
  const size_t used = converter_->Feed(file.instance, absl::MakeConstSpan(file.words), &waiting);
  if (used > 0) *progress = true;
  file.words.erase(file.words.begin(), file.words.begin() + static_cast<long>(used));
  file.consumed += used * 4;
  if (file.consumed >= file.punched + kPunchBytes) {
    const uint64_t upto = file.consumed / kPunchBytes * kPunchBytes;
    // Best effort: a file system without hole punching keeps the bytes until the end.
    fallocate(file.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(file.punched),
              static_cast<off_t>(upto - file.punched));
    file.punched = upto;
  }
  (void)final_read;
  return absl::OkStatus();
}

void VgptSpool::Close(File& file) {
  if (file.closed) return;
  if (file.instance < 0) file.instance = converter_->OpenInstance(file.path);
  converter_->CloseInstance(file.instance);
  file.closed = true;
  // Emptied, not unlinked: the tool names a new instance's file after the first free
  // <pid>-<n>, so an unlinked name would be taken again by the process's next exec'd
  // program, a file this spool has already read and would never read again (and the
  // fork numbers naming the file would be ambiguous). Drain unlinks them all.
  (void)!ftruncate(file.fd, 0);
  close(file.fd);
  file.fd = -1;
}

absl::StatusOr<bool> VgptSpool::Poll() {
  if (absl::Status s = Scan(); !s.ok()) return s;
  bool progress = false;
  for (auto& [pid, by_seq] : files_) {
    for (auto it = by_seq.begin(); it != by_seq.end(); ++it) {
      File& file = *it->second;
      if (file.closed) continue;
      // Only the oldest open instance of a pid is read; a newer one means the older
      // exec'd away, so once it has nothing left it is complete. Words it has read but
      // not consumed are a forked child waiting for its parent's fork (a child that
      // execs at once has its next file before its parent's stream reached the fork):
      // it stays open until they are taken.
      bool fed = false;
      if (absl::Status s = Pump(file, false, &fed); !s.ok()) return s;
      progress |= fed;
      const bool newer = std::next(it) != by_seq.end();
      if (!fed && (converter_->Exited(file.instance) || newer) && file.words.empty() && file.tail_size == 0) {
        // Nothing more can come: read once more to be sure, then close.
        bool more = false;
        if (absl::Status s = Pump(file, true, &more); !s.ok()) return s;
        if (!more) {
          Close(file);
          progress = true;
          continue;
        }
        progress = true;
      }
      break;
    }
  }
  return progress;
}

absl::Status VgptSpool::Drain() {
  if (absl::Status s = Scan(); !s.ok()) return s;
  // A program still running keeps writing until it sees its file gone: read what is
  // there now, no more.
  for (auto& [pid, by_seq] : files_) {
    for (auto& [seq, file] : by_seq) {
      struct stat st;
      if (file->fd >= 0 && fstat(file->fd, &st) == 0) file->limit = static_cast<uint64_t>(st.st_size);
    }
  }
  // Instances wait for each other (children for their parents' forks), so go round
  // until nothing moves; then once more with no waiting (a child whose parent's fork
  // was never written starts at its parent's latest time), until nothing moves again.
  for (bool progress = true, forced = false; progress || !forced;) {
    if (!progress) {
      converter_->StopWaiting();
      forced = true;
    }
    progress = false;
    for (auto& [pid, by_seq] : files_) {
      for (auto& [seq, file] : by_seq) {
        if (file->closed) continue;
        bool fed = false;
        do {
          fed = false;
          if (absl::Status s = Pump(*file, true, &fed); !s.ok()) return s;
          progress |= fed;
        } while (fed);
        if (file->words.empty() && file->tail_size == 0) {
          Close(*file);
          progress = true;
          continue;  // the next instance of this pid
        }
        break;  // waits (for a parent's fork) or holds a torn last record
      }
    }
  }
  // Whatever is left (a torn last record) is closed as is. The files go: a tool
  // instance still running sees its file gone at its next write and runs on untraced.
  for (auto& [pid, by_seq] : files_) {
    for (auto& [seq, file] : by_seq) {
      Close(*file);
      unlink(file->path.c_str());
    }
  }
  return absl::OkStatus();
}

bool VgptSpool::AllExited() const {
  for (const auto& [pid, by_seq] : files_) {
    for (const auto& [seq, file] : by_seq) {
      if (!file->closed) return false;
    }
  }
  return !files_.empty();
}

std::vector<int> VgptSpool::UnendedPids() const {
  std::vector<int> pids;
  for (const auto& [pid, by_seq] : files_) {
    for (const auto& [seq, file] : by_seq) {
      if (!file->closed) {
        pids.push_back(pid);
        break;
      }
    }
  }
  return pids;
}

}  // namespace ptd
