#include "perfdata/build_id_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ptd::perfdata {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// perf names the file inside <build-id>/ after what the binary is.
std::string CachedFileName(const std::string& name) {
  if (name == "[vdso]" || name == "[vdso32]" || name == "[vdsox32]") return "vdso";
  if (name.rfind("[kernel.kallsyms]", 0) == 0) return "kallsyms";
  return "elf";
}

// "[vdso]" is stored as a top-level directory; paths keep their absolute layout.
std::string CacheSubdir(const std::string& name) {
  if (!name.empty() && name[0] == '/') return name.substr(1);
  return name;
}

}  // namespace

std::vector<std::string> BuildIdCache::DefaultDirs() {
  const char* home = getenv("HOME");
  if (home == nullptr || *home == '\0') return {};
  return {absl::StrCat(home, "/.debug")};
}

std::string BuildIdCache::Find(const std::string& build_id, const std::string& name) const {
  if (build_id.size() < 4) return "";
  const std::string link = absl::StrCat(".build-id/", build_id.substr(0, 2), "/", build_id.substr(2));
  for (const std::string& dir : dirs_) {
    const std::string by_name = absl::StrCat(dir, "/", CacheSubdir(name), "/", build_id, "/", CachedFileName(name));
    if (IsRegularFile(by_name)) return by_name;
    const std::string by_link = absl::StrCat(dir, "/", link);
    for (const char* file : {"/elf", "/vdso", "/kallsyms", ""}) {
      if (IsRegularFile(by_link + file)) return by_link + file;
    }
  }
  return "";
}

absl::StatusOr<std::string> BuildIdCache::Add(const std::string& dir, const std::string& build_id,
                                              const std::string& name, const std::string& source) {
  if (build_id.size() < 4) return absl::InvalidArgumentError(absl::StrCat("no build-id for ", name));
  const std::string entry_dir = absl::StrCat(dir, "/", CacheSubdir(name), "/", build_id);
  absl::Status st = MakeDirs(entry_dir);
  if (!st.ok()) return st;
  const std::string target = absl::StrCat(entry_dir, "/", CachedFileName(name));
  std::error_code ec;
  std::filesystem::copy_file(source, target, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(absl::StrCat("copying ", source, " to ", target, ": ", ec.message()));
  const std::string link_dir = absl::StrCat(dir, "/.build-id/", build_id.substr(0, 2));
  st = MakeDirs(link_dir);
  if (!st.ok()) return st;
  const std::string link = absl::StrCat(link_dir, "/", build_id.substr(2));
  unlink(link.c_str());
  // Relative, as perf makes it, so the cache directory can be moved.
  const std::string rel = absl::StrCat("../../", CacheSubdir(name), "/", build_id);
  if (symlink(rel.c_str(), link.c_str()) != 0) return ErrnoError("symlink", link, errno);
  return target;
}

}  // namespace ptd::perfdata
