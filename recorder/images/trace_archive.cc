#include "recorder/images/trace_archive.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/elf_build_id.h"
#include "common/file_util.h"
#include "common/progress_bar.h"
#include "image/module_cache.h"
#include "recorder/target/namespace_pids.h"
#include "sideband/record_reader.h"
#include "common/unique_fd.h"

namespace ptd {
namespace {

constexpr char kArchiveSubdir[] = "by-build-id";

// One place a file was mapped: where to find the bytes the process saw.
struct MappedAt {
  int pid = 0;
  uint64_t start = 0, end = 0;
  uint64_t ino = 0;  // MMAP2's inode, 0 when unknown
};

// `candidate` is a regular file and, when `ino` is known, that inode.
bool SameFile(const std::string& candidate, uint64_t ino) {
  struct stat st;
  if (::stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return ino == 0 || st.st_ino == ino;
}

// Where the bytes of `path` are read from, or why not.
struct Source {
  std::string file;     // "" when none
  bool changed = false;  // PATH exists but is no longer the inode that was mapped
};

// The first of the pinned file, /proc/PID/map_files/START-END, /proc/PID/root/PATH (while
// the process lives and the file is the inode it mapped) and PATH (the same inode) that
// can be opened.
Source FindSource(const std::string& path, const std::vector<MappedAt>& places, const MappedFilePins* pins) {
  if (pins != nullptr) {
    if (std::string pinned = pins->Source(path); !pinned.empty()) return {pinned};
  }
  for (const MappedAt& at : places) {
    std::string mapped = absl::StrFormat("/proc/%d/map_files/%x-%x", at.pid, at.start, at.end);
    if (SameFile(mapped, at.ino) && ::access(mapped.c_str(), R_OK) == 0) return {mapped};
  }
  for (const MappedAt& at : places) {
    std::string rooted = absl::StrCat("/proc/", at.pid, "/root", path);
    if (SameFile(rooted, at.ino) && ::access(rooted.c_str(), R_OK) == 0) return {rooted};
  }
  if (::access(path.c_str(), R_OK) != 0) return {};
  for (const MappedAt& at : places) {
    if (SameFile(path, at.ino)) return {path};
  }
  return {"", SameFile(path, 0)};
}

// Copies `from` to `to` through a temporary file and a rename (never a torn copy): a
// reflink when the filesystem can, else copy_file_range, else read/write. Read-only.
absl::Status CopyFile(const std::string& from, const std::string& to) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return ErrnoError("cannot open", from, errno);
  const std::string tmp = absl::StrCat(to, ".tmp-", ::getpid());
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.valid()) return ErrnoError("cannot create", tmp, errno);
  absl::Status status = absl::OkStatus();
  if (::ioctl(out.get(), FICLONE, in.get()) != 0) {
    bool use_read = false;
    for (;;) {
      ssize_t n = use_read ? 0 : ::copy_file_range(in.get(), nullptr, out.get(), nullptr, 1 << 30, 0);
      if (n == 0 && !use_read) break;
      if (n < 0 && !use_read) {
        if (errno == EINTR) continue;
        if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
          status = ErrnoError("cannot copy to", tmp, errno);
          break;
        }
        use_read = true;  // /proc files, old kernels: plain reads
      }
      if (use_read) {
        char buf[1 << 16];
        ssize_t r = ::read(in.get(), buf, sizeof(buf));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) status = ErrnoError("cannot read", from, errno);
        if (r <= 0) break;
        for (ssize_t done = 0; done < r && status.ok();) {
          ssize_t w = ::write(out.get(), buf + done, static_cast<size_t>(r - done));
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) status = ErrnoError("cannot write", tmp, errno);
          else done += w;
        }
        if (!status.ok()) break;
      }
    }
  }
  if (status.ok() && ::fchmod(out.get(), 0444) != 0) status = ErrnoError("cannot chmod", tmp, errno);
  if (status.ok() && ::rename(tmp.c_str(), to.c_str()) != 0) status = ErrnoError("cannot rename to", to, errno);
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}


// `file` holds the build-id `id` and is `size` bytes long: a usable cached copy.
bool IsCopyOf(const std::string& file, const std::string& id, uint64_t size) {
  if (FileSize(file) != static_cast<int64_t>(size)) return false;
  absl::StatusOr<std::string> got = ReadElfBuildId(file);
  return got.ok() && *got == id;
}

// Where the cache keeps `id`: the cache's copy, made if missing or damaged. "" when the
// cache cannot be used (then the trace gets a copy of its own).
std::string CachedCopy(const std::string& cache_dir, const std::string& source, const std::string& id,
                       uint64_t size) {
  if (cache_dir.empty()) return "";
  const std::string cached = absl::StrCat(cache_dir, "/", kArchiveSubdir, "/", id.substr(0, 2), "/", id.substr(2));
  if (IsCopyOf(cached, id, size)) return cached;
  if (!MakeDirs(Dirname(cached)).ok() || !CopyFile(source, cached).ok()) return "";
  return IsCopyOf(cached, id, size) ? cached : "";
}

}  // namespace

MappedFilePins::~MappedFilePins() {
  for (const auto& [path, fd] : fds_) ::close(fd);
}

void MappedFilePins::Pin(const Mmap2Record& map) {
  // A bound well under the usual 1024 descriptors; the rest are looked for at the end.
  constexpr size_t kMaxPins = 512;
  if (map.filename.empty() || map.filename[0] != '/' || fds_.count(map.filename) || fds_.size() >= kMaxPins) return;
  const uint64_t ino = map.has_build_id ? 0 : map.ino;
  const std::string candidates[] = {
      absl::StrFormat("/proc/%d/map_files/%x-%x", map.pid, map.addr, map.addr + map.len),
      absl::StrCat("/proc/", map.pid, "/root", map.filename),
      map.filename,
  };
  for (const std::string& candidate : candidates) {
    const int fd = ::open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    // The descriptor, not the path, is checked: the path may change between the two.
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (ino == 0 || st.st_ino == ino)) {
      fds_[map.filename] = fd;
      return;
    }
    ::close(fd);
  }
}

std::string MappedFilePins::Source(const std::string& path) const {
  auto it = fds_.find(path);
  return it == fds_.end() ? "" : absl::StrCat("/proc/self/fd/", it->second);
}

std::string DefaultArchiveCacheDir() {
  if (const char* env = std::getenv("PTD_CACHE_DIR"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return absl::StrCat(xdg, "/ptrace-direct");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return absl::StrCat(home, "/.cache/ptrace-direct");
  }
  return "";
}

ArchiveStats ArchiveMappedFiles(const TraceDirWriter& dir, const ArchiveOptions& options, TraceMeta* meta) {
  const auto began = std::chrono::steady_clock::now();
  ArchiveStats stats;
  // Every executable file mapping the sideband names, in the order first seen. Only the
  // MMAP records are looked at (the sideband may hold millions of switches).
  std::vector<std::string> order;
  std::map<std::string, std::vector<MappedAt>> places;
  for (const SidebandFile& file : meta->sideband) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(dir.FilePath(file.file));
    if (!bytes.ok()) continue;
    RecordReader reader(*bytes, file.file, RecordFormat{file.sample_type, file.sample_id_all});
    for (absl::StatusOr<std::optional<PerfRecord>> r = reader.Next(); r.ok() && r->has_value(); r = reader.Next()) {
      const std::string* path = nullptr;
      MappedAt at;
      if (const auto* m2 = std::get_if<Mmap2Record>(&(*r)->body)) {
        if (m2->data || (m2->prot != 0 && !(m2->prot & PROT_EXEC))) continue;
        path = &m2->filename;
        at = {static_cast<int>(m2->pid), m2->addr, m2->addr + m2->len, m2->has_build_id ? 0 : m2->ino};
      } else if (const auto* m1 = std::get_if<MmapRecord>(&(*r)->body)) {
        if (m1->data) continue;
        path = &m1->filename;
        at = {static_cast<int>(m1->pid), m1->addr, m1->addr + m1->len, 0};
      }
      // Files only: not [vdso] and the like, nor anonymous memory ("//anon").
      if (path == nullptr || path->empty() || (*path)[0] != '/' || *path == "//anon") continue;
      std::vector<MappedAt>& list = places[*path];
      if (list.empty()) order.push_back(*path);
      if (list.size() < 4) list.push_back(at);
    }
  }

  // While the processes still live: the pids their own namespaces give them (containers),
  // so tracks can be labelled with both.
  std::set<int> pids;
  for (const auto& [path, list] : places) {
    for (const MappedAt& at : list) pids.insert(at.pid);
  }
  for (int pid : meta->pids) pids.insert(pid);
  for (int pid : pids) {
    for (const auto& [tid, inner] : ReadNamespaceTids(pid)) meta->namespace_tids[tid] = inner;
  }

  meta->archived = options.enabled;
  const std::string cache_dir = options.cache_dir.empty() ? DefaultArchiveCacheDir() : options.cache_dir;
  std::map<std::string, std::string> archived_ids;  // build-id -> relative file
  // --debuginfod: what the copies lack, found as the decoder would look for it.
  std::optional<image::ModuleCache> debug_lookup;
  if (options.enabled && options.debuginfod) {
    debug_lookup.emplace();
    std::unique_ptr<image::DebuginfodFetcher> fetcher =
        image::DebuginfodFetcher::FromEnvironment(ProgressBar::StderrIsTerminal());
    if (fetcher == nullptr) meta->notes.push_back("--debuginfod: DEBUGINFOD_URLS is not set: no debug file fetched");
    debug_lookup->SetDebuginfod(std::move(fetcher));
  }
  std::vector<std::string> debug_failed;
  std::vector<std::string> unreadable, changed, without_id, failed;
  for (const std::string& path : order) {
    const Source found = FindSource(path, places[path], options.pins);
    if (found.file.empty()) {
      (found.changed ? changed : unreadable).push_back(path);
      continue;
    }
    const std::string* source = &found.file;
    absl::StatusOr<std::string> id = ReadElfBuildId(*source);
    if (!id.ok() || id->size() < 3) {
      without_id.push_back(path);
      continue;
    }
    meta->build_ids[path] = *id;
    if (!options.enabled) continue;
    const uint64_t size = static_cast<uint64_t>(FileSize(*source));
    auto done = archived_ids.find(*id);
    if (done != archived_ids.end()) {
      meta->archive.push_back({path, *id, done->second, size});
      continue;
    }
    const std::string relative =
        absl::StrCat(kImagesSubdir, "/", kArchiveSubdir, "/", id->substr(0, 2), "/", id->substr(2));
    const std::string target = dir.FilePath(relative);
    absl::Status status = MakeDirs(Dirname(target));
    const std::string cached = status.ok() ? CachedCopy(cache_dir, *source, *id, size) : "";
    if (status.ok() && !cached.empty() && ::link(cached.c_str(), target.c_str()) == 0) {
      ++stats.linked;
    } else if (status.ok()) {
      status = CopyFile(cached.empty() ? *source : cached, target);
    }
    if (!status.ok()) {
      failed.push_back(absl::StrCat(path, " (", status.message(), ")"));
      continue;
    }
    archived_ids[*id] = relative;
    meta->archive.push_back({path, *id, relative, size});
    ++stats.files;
    stats.bytes += size;
    if (debug_lookup && debug_lookup->debuginfod() != nullptr) {
      // Next to the copy, where the decoder looks first (image/module_cache.h).
      absl::StatusOr<std::shared_ptr<const image::Module>> module = debug_lookup->Get(target, path);
      if (module.ok() && (*module)->symbols_from_debuginfod) {
        if (absl::Status copied = CopyFile((*module)->symbols_from, target + ".debug"); !copied.ok()) {
          debug_failed.push_back(absl::StrCat(path, " (", copied.message(), ")"));
        }
      }
    }
  }
  if (debug_lookup && debug_lookup->debuginfod() != nullptr) {
    for (const std::string& w : debug_lookup->debuginfod()->warnings()) meta->notes.push_back(w);
    if (std::string summary = debug_lookup->debuginfod()->Summary(); !summary.empty()) {
      meta->notes.push_back(absl::StrCat(summary, ", archived next to the copies"));
    }
  }

  auto note = [&](const std::vector<std::string>& paths, const std::string& what) {
    if (paths.empty()) return;
    meta->notes.push_back(absl::StrCat(what, ": ", absl::StrJoin(paths, ", ")));
  };
  note(debug_failed, "fetched debug files that could not be archived");
  note(unreadable, "mapped files that could not be read when recording ended (decode looks for them by path)");
  note(changed,
       "mapped files replaced since they were mapped (another inode at the path), not archived and their "
       "build-id not noted (decode reads whatever is at the path)");
  if (options.enabled) {
    note(without_id, "mapped files without a build-id, not archived (decode reads them by path)");
    note(failed, "mapped files that could not be archived (decode reads them by path)");
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  if (options.enabled) {
    meta->notes.push_back(absl::StrFormat(
        "archive: %u mapped files, %.1f MB in images/by-build-id (%u linked from the cache %s), %.3f s",
        stats.files, static_cast<double>(stats.bytes) / 1e6, stats.linked,
        cache_dir.empty() ? "(none)" : cache_dir, stats.seconds));
  }
  return stats;
}

}  // namespace ptd
