#include "recorder/images/jit_files.h"

#include <map>
#include <set>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "image/jitdump.h"
#include "recorder/images/vdso_dump.h"
#include "sideband/record_reader.h"

namespace ptd {
namespace {

// The processes and jitdump paths (by pid) the sideband names.
void ScanSideband(const TraceDirWriter& dir, const TraceMeta& meta, std::set<int>* pids,
                  std::map<int, std::string>* jitdumps) {
  for (const SidebandFile& file : meta.sideband) {
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(dir.FilePath(file.file));
    if (!bytes.ok()) continue;
    RecordList list = ReadRecordsUpToError(*bytes, file.file, RecordFormat{file.sample_type, file.sample_id_all});
    for (const PerfRecord& r : list.records) {
      std::string filename;
      int pid = 0;
      if (const auto* m2 = std::get_if<Mmap2Record>(&r.body)) {
        filename = m2->filename;
        pid = static_cast<int>(m2->pid);
      } else if (const auto* m = std::get_if<MmapRecord>(&r.body)) {
        filename = m->filename;
        pid = static_cast<int>(m->pid);
      } else if (const auto* c = std::get_if<CommRecord>(&r.body)) {
        pid = static_cast<int>(c->pid);
      } else if (const auto* f = std::get_if<ForkRecord>(&r.body)) {
        pid = static_cast<int>(f->pid);
      }
      if (pid > 0) pids->insert(pid);
      if (pid > 0 && !filename.empty() && image::IsJitDumpName(filename)) jitdumps->emplace(pid, filename);
    }
  }
}

}  // namespace

void ArchiveJitFiles(const TraceDirWriter& dir, TraceMeta* meta) {
  std::set<int> pids(meta->pids.begin(), meta->pids.end());
  std::map<int, std::string> jitdumps;
  ScanSideband(dir, *meta, &pids, &jitdumps);
  for (const auto& [pid, path] : jitdumps) {
    const std::string rel = absl::StrCat(kImagesSubdir, "/jit-", pid, ".dump");
    if (PathExists(dir.FilePath(rel))) continue;  // the backend copied it already
    absl::StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(path);
    absl::Status st = bytes.ok() ? WriteFileAtomic(dir.FilePath(rel), absl::MakeConstSpan(*bytes)) : bytes.status();
    if (!st.ok()) {
      meta->notes.push_back(absl::StrCat("jitdump ", path, " of pid ", pid, " not copied (its JIT code will not ",
                                         "decode unless an emulator captured it): ", st.message()));
    } else {
      meta->notes.push_back(absl::StrCat("copied jitdump ", path, " (JIT code of pid ", pid, ") to ", rel));
    }
  }
  for (int pid : pids) {
    if (PathExists(dir.FilePath(absl::StrCat(kImagesSubdir, "/perf-", pid, ".map")))) continue;
    absl::StatusOr<bool> copied = CopyPerfMap(pid, dir);
    if (!copied.ok()) {
      meta->notes.push_back(absl::StrCat("/tmp/perf-", pid, ".map not copied: ", copied.status().message()));
    } else if (*copied) {
      meta->notes.push_back(absl::StrCat("copied /tmp/perf-", pid, ".map (JIT symbols) to ", kImagesSubdir,
                                         "/perf-", pid, ".map"));
    }
  }
}

}  // namespace ptd
