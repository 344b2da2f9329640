#include "perfdata/perf_data_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "perfdata/build_id_cache.h"
#include "perfdata/perf_data_reader.h"
#include "perfdata/perf_format.h"
#include "perfdata/perf_importer.h"

namespace ptd::perfdata {

bool IsPerfDataFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint64_t magic = 0;
  const ssize_t n = ::pread(fd, &magic, sizeof(magic), 0);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof(magic)) && (magic == kPerfFileMagic || magic == kPerfFileMagicSwapped);
}

absl::StatusOr<TemporaryPerfImport> TemporaryPerfImport::Create(const std::string& perf_data,
                                                                std::vector<std::string> buildid_dirs) {
  absl::StatusOr<PerfData> data = PerfDataReader::ReadFile(perf_data);
  if (!data.ok()) return data.status();

  const char* tmpdir = std::getenv("TMPDIR");
  std::string templ = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/ptd-perf-import-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return ErrnoError("cannot create a temporary directory", templ, errno);
  TemporaryPerfImport imported;
  imported.perf_data_ = perf_data;
  imported.temp_root_ = templ;
  imported.trace_dir_ = templ + "/trace";
  imported.buildid_dirs_ = std::move(buildid_dirs);
  for (const std::string& d : BuildIdCache::DefaultDirs()) imported.buildid_dirs_.push_back(d);

  PerfImportOptions options;
  options.out_dir = imported.trace_dir_;
  options.buildid_dirs = imported.buildid_dirs_;
  absl::StatusOr<PerfImportResult> result = ImportPerfData(*data, options);
  if (!result.ok()) return result.status();  // `imported` removes the directory
  imported.missing_binaries_ = std::move(result->missing_binaries);
  return imported;
}

TemporaryPerfImport::TemporaryPerfImport(TemporaryPerfImport&& other) noexcept
    : perf_data_(std::move(other.perf_data_)),
      temp_root_(std::exchange(other.temp_root_, std::string())),
      trace_dir_(std::move(other.trace_dir_)),
      missing_binaries_(std::move(other.missing_binaries_)),
      buildid_dirs_(std::move(other.buildid_dirs_)) {}

TemporaryPerfImport& TemporaryPerfImport::operator=(TemporaryPerfImport&& other) noexcept {
  if (this != &other) {
    if (!temp_root_.empty()) (void)RemoveTree(temp_root_);
    perf_data_ = std::move(other.perf_data_);
    temp_root_ = std::exchange(other.temp_root_, std::string());
    trace_dir_ = std::move(other.trace_dir_);
    missing_binaries_ = std::move(other.missing_binaries_);
    buildid_dirs_ = std::move(other.buildid_dirs_);
  }
  return *this;
}

TemporaryPerfImport::~TemporaryPerfImport() {
  if (!temp_root_.empty()) (void)RemoveTree(temp_root_);
}

absl::StatusOr<DecodeInput> DecodeInput::Open(const std::string& path, std::vector<std::string> buildid_dirs) {
  DecodeInput input;
  input.path_ = path;
  if (IsPerfDataFile(path)) {
    absl::StatusOr<TemporaryPerfImport> imported = TemporaryPerfImport::Create(path, std::move(buildid_dirs));
    if (!imported.ok()) return imported.status();
    input.import_.emplace(*std::move(imported));
  }
  return input;
}

}  // namespace ptd::perfdata
