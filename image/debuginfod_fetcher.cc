#include "image/debuginfod_fetcher.h"

#include <elfutils/debuginfod.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/progress_bar.h"
#include "common/units.h"

namespace ptd::image {

std::unique_ptr<DebuginfodFetcher> DebuginfodFetcher::FromEnvironment(bool progress) {
  const char* urls = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
  if (urls == nullptr || urls[0] == '\0') return nullptr;
  debuginfod_client* client = debuginfod_begin();
  if (client == nullptr) return nullptr;
  std::unique_ptr<DebuginfodFetcher> fetcher(new DebuginfodFetcher(client, urls, progress));
  debuginfod_set_user_data(client, fetcher.get());
  debuginfod_set_progressfn(client, &DebuginfodFetcher::OnProgress);
  return fetcher;
}

DebuginfodFetcher::DebuginfodFetcher(debuginfod_client* client, std::string urls, bool progress)
    : client_(client), urls_(std::move(urls)), progress_enabled_(progress) {}

DebuginfodFetcher::~DebuginfodFetcher() { debuginfod_end(client_); }

int DebuginfodFetcher::OnProgress(debuginfod_client* client, long done, long total) {
  auto* self = static_cast<DebuginfodFetcher*>(debuginfod_get_user_data(client));
  if (self->progress_ == nullptr && total > 0) {
    self->progress_ = std::make_unique<ProgressBar>(absl::StrCat("debuginfod: ", self->downloading_),
                                                    static_cast<uint64_t>(total), self->progress_enabled_);
  }
  if (self->progress_ != nullptr && done >= 0) self->progress_->Update(static_cast<uint64_t>(done));
  return 0;  // go on
}

void DebuginfodFetcher::Warn(std::string warning) {
  if (warnings_.empty()) warnings_.push_back(std::move(warning));
}

absl::StatusOr<std::string> DebuginfodFetcher::Fetch(const std::string& build_id, const std::string& file) {
  if (failed_) return absl::UnavailableError(absl::StrCat("debuginfod failed before; not asked for ", file));
  downloading_ = file;
  char* path = nullptr;
  // A build-id of length 0 is passed as lower-case hex.
  const int fd = debuginfod_find_debuginfo(client_, reinterpret_cast<const unsigned char*>(build_id.c_str()), 0, &path);
  const bool completed = fd >= 0;
  if (progress_ != nullptr) progress_->Finish(completed);
  progress_.reset();
  if (fd < 0) {
    std::free(path);
    if (fd == -ENOENT) return absl::NotFoundError(absl::StrCat(urls_, " has no debug info for ", file));
    failed_ = true;
    const std::string why = absl::StrCat("debuginfod: cannot fetch the debug info of ", file, " (build-id ", build_id,
                                         ") from ", urls_, ": ", std::strerror(-fd),
                                         "; names come from the files' own symbol tables");
    Warn(why);
    return absl::UnavailableError(why);
  }
  struct stat st {};
  if (fstat(fd, &st) == 0) fetched_bytes_ += static_cast<uint64_t>(st.st_size);
  close(fd);
  ++fetched_files_;
  std::string result(path);
  std::free(path);
  return result;
}

void DebuginfodFetcher::RejectFetched(const std::string& file, const std::string& path, const std::string& why) {
  Warn(absl::StrCat("debuginfod: what ", urls_, " sent for ", file, " (", path, ") is no debug file: ", why,
                    "; its names come from its own symbol table"));
}

std::string DebuginfodFetcher::Summary() const {
  if (fetched_files_ == 0) return "";
  return absl::StrFormat("debuginfod: debug info of %d file%s (%s) from %s", fetched_files_,
                         fetched_files_ == 1 ? "" : "s", FormatByteSize(fetched_bytes_), urls_);
}

}  // namespace ptd::image
