#include "common/trace_meta.h"

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "nlohmann/json.hpp"

namespace ptd {

// Ordered: meta.json lists keys in the order of this file, which reads better than sorted.
using Json = nlohmann::ordered_json;

namespace {

// The names meta.json uses for an enum's values: written by *Name(), read back by ParseNamed.
template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

constexpr NamedValue<TraceMode> kTraceModeNames[] = {
    {TraceMode::kHardware, "hardware"}, {TraceMode::kEmulated, "emulated"}, {TraceMode::kImported, "imported"}};
constexpr NamedValue<ImageKind> kImageKindNames[] = {
    {ImageKind::kFile, "file"}, {ImageKind::kVdso, "vdso"}, {ImageKind::kMemoryDump, "memory_dump"}};

template <typename E, size_t N>
const char* NameOf(const NamedValue<E> (&names)[N], E value) {
  for (const NamedValue<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return "unknown";
}

}  // namespace

const char* TraceModeName(TraceMode mode) { return NameOf(kTraceModeNames, mode); }

const char* ImageKindName(ImageKind kind) { return NameOf(kImageKindNames, kind); }

uint64_t TimeConversion::TscToNs(uint64_t tsc) const {
  if (time_shift == 0) return time_zero + tsc * time_mult;
  uint64_t quot = tsc >> time_shift;
  uint64_t rem = tsc & ((uint64_t{1} << time_shift) - 1);
  return time_zero + quot * time_mult + ((rem * time_mult) >> time_shift);
}

namespace {

// Addresses and config words are written as hex strings: JSON numbers above 2^53 lose
// precision in many readers (jq, JavaScript).
std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

// Reads fields with error messages naming the JSON path, and keeps the first error.
class FieldReader {
 public:
  FieldReader(const Json& obj, std::string path, std::string source, absl::Status* status)
      : obj_(obj), path_(std::move(path)), source_(std::move(source)), status_(status) {}

  bool Has(const char* key) const { return obj_.is_object() && obj_.contains(key); }

  FieldReader Child(const char* key, bool required = true) const {
    static const Json kEmptyObject = Json::object();
    if (!Has(key)) {
      if (required) Fail(key, "missing");
      return FieldReader(kEmptyObject, Path(key), source_, status_);
    }
    return FieldReader(obj_.at(key), Path(key), source_, status_);
  }

  const Json& json() const { return obj_; }
  const std::string& path() const { return path_; }

  uint64_t U64(const char* key, uint64_t def = 0, bool required = false) const {
    const Json* field = Get(key, required);
    if (field == nullptr) return def;
    const Json& v = *field;
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      // Unsigned: kernel addresses (0xffffffff81000000) are above INT64_MAX, where a
      // signed conversion would clamp them.
      char* end = nullptr;
      errno = 0;
      const uint64_t out = std::strtoull(s.c_str(), &end, 0);
      if (errno == 0 && !s.empty() && std::isxdigit(static_cast<unsigned char>(s[0])) && *end == '\0') {
        return out;
      }
    }
    Fail(key, "expected a non-negative integer or a hex string");
    return def;
  }

  int64_t I64(const char* key, int64_t def = 0, bool required = false) const {
    const Json* v = Get(key, required);
    if (v == nullptr) return def;
    if (v->is_number_integer()) return v->get<int64_t>();
    Fail(key, "expected an integer");
    return def;
  }

  bool Bool(const char* key, bool def = false) const {
    const Json* v = Get(key, /*required=*/false);
    if (v == nullptr) return def;
    if (v->is_boolean()) return v->get<bool>();
    Fail(key, "expected true or false");
    return def;
  }

  std::string Str(const char* key, const std::string& def = "", bool required = false) const {
    const Json* v = Get(key, required);
    if (v == nullptr) return def;
    if (v->is_string()) return v->get<std::string>();
    Fail(key, "expected a string");
    return def;
  }

  // Calls fn(FieldReader) for each element of an array field.
  template <typename Fn>
  void Array(const char* key, Fn fn) const {
    const Json* v = Get(key, /*required=*/false);
    if (v == nullptr) return;
    if (!v->is_array()) {
      Fail(key, "expected an array");
      return;
    }
    for (size_t i = 0; i < v->size(); ++i) {
      fn(FieldReader((*v)[i], absl::StrCat(Path(key), "[", i, "]"), source_, status_));
    }
  }

  // Calls fn(name, FieldReader of the object) for each member of an object field.
  template <typename Fn>
  void Members(const char* key, Fn fn) const {
    if (!Has(key)) return;
    FieldReader object = Child(key);
    if (!object.json().is_object()) {
      Fail(key, "expected an object");
      return;
    }
    for (auto it = object.json().begin(); it != object.json().end(); ++it) fn(it.key(), object);
  }

  void Fail(const char* key, const char* problem) const {
    if (status_->ok()) {
      *status_ = absl::InvalidArgumentError(
          absl::StrCat(source_, ": field '", Path(key), "': ", problem));
    }
  }

 private:
  // The field, or nullptr when absent (a failure when `required`).
  const Json* Get(const char* key, bool required) const {
    if (!Has(key)) {
      if (required) Fail(key, "missing");
      return nullptr;
    }
    return &obj_.at(key);
  }

  std::string Path(const char* key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  const Json& obj_;
  std::string path_;
  std::string source_;
  absl::Status* status_;
};

// The value named by string field `key` (`def` when absent); an unknown name fails,
// listing the known ones.
template <typename E, size_t N>
E ParseNamed(const FieldReader& r, const char* key, const NamedValue<E> (&names)[N], E def, bool required) {
  if (!r.Has(key) && !required) return def;
  const std::string name = r.Str(key, "", required);
  std::string known;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i].name) return names[i].value;
    absl::StrAppend(&known, i == 0 ? "" : i + 1 == N ? " or " : ", ", "\"", names[i].name, "\"");
  }
  r.Fail(key, absl::StrCat("expected ", known).c_str());
  return def;
}

// A relative path inside the trace directory must not escape it.
void CheckRelativePath(const FieldReader& r, const char* key, const std::string& p) {
  if (p.empty() || p[0] == '/' || p.find("..") != std::string::npos) {
    r.Fail(key, "expected a relative path inside the trace directory");
  }
}

// What a stream or sideband file says of itself: its path in the trace directory, and the
// CPU or thread it records (-1: not per CPU / per thread).
template <typename File>
void ReadFileOfCpuOrThread(const FieldReader& r, File* f) {
  f->file = r.Str("file", "", /*required=*/true);
  CheckRelativePath(r, "file", f->file);
  f->cpu = static_cast<int>(r.I64("cpu", -1));
  f->tid = static_cast<int>(r.I64("tid", -1));
}

// PtSettings' numeric timing fields by their meta.json names, for the reader and the
// writer alike: fn(name, field).
template <typename Settings, typename Fn>
void ForEachPtNumber(Settings& pt, Fn fn) {
  fn("cpuid_0x15_eax", pt.cpuid_0x15_eax);
  fn("cpuid_0x15_ebx", pt.cpuid_0x15_ebx);
  fn("nom_freq", pt.nom_freq);
  fn("mtc_freq", pt.mtc_freq);
  fn("tsc_art_ratio_num", pt.tsc_art_ratio_num);
  fn("tsc_art_ratio_den", pt.tsc_art_ratio_den);
  fn("psb_period_bytes", pt.psb_period_bytes);
}

}  // namespace

absl::StatusOr<TraceMeta> ParseTraceMeta(const std::string& json_text, const std::string& source) {
  Json root = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": top level is not a JSON object"));
  }
  absl::Status status;
  FieldReader r(root, "", source, &status);
  TraceMeta m;

  FieldReader ver = r.Child("format_version");
  if (!status.ok()) return status;
  m.format_major = static_cast<int>(ver.I64("major", 0, true));
  m.format_minor = static_cast<int>(ver.I64("minor", 0, true));
  if (!status.ok()) return status;
  if (m.format_major != kTraceFormatMajor) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: trace format version %d.%d is not supported (this build reads major version %d); "
        "use a matching ptrace-direct",
        source, m.format_major, m.format_minor, kTraceFormatMajor));
  }

  m.tool_version = r.Str("tool_version");
  FieldReader host = r.Child("host", false);
  m.host.cpu.vendor = host.Str("cpu_vendor", "unknown");
  m.host.cpu.family = static_cast<uint32_t>(host.U64("cpu_family"));
  m.host.cpu.model = static_cast<uint32_t>(host.U64("cpu_model"));
  m.host.cpu.stepping = static_cast<uint32_t>(host.U64("cpu_stepping"));
  m.host.kernel_release = host.Str("kernel_release");
  m.host.hostname = host.Str("hostname");
  m.mode = ParseNamed(r, "mode", kTraceModeNames, TraceMode::kHardware, /*required=*/true);

  FieldReader pt = r.Child("pt", false);
  m.pt.pmu_type = static_cast<int>(pt.I64("pmu_type", -1));
  m.pt.config = pt.U64("config");
  pt.Members("fields", [&](const std::string& name, const FieldReader& f) { m.pt.fields[name] = f.U64(name.c_str()); });
  pt.Members("caps", [&](const std::string& name, const FieldReader& c) { m.pt.caps[name] = c.Str(name.c_str()); });
  m.pt.timing = pt.Str("timing");
  m.pt.user_only = pt.Bool("user_only", true);
  m.pt.ip_filter = pt.Str("ip_filter");
  ForEachPtNumber(m.pt, [&](const char* name, auto& field) {
    field = static_cast<std::remove_reference_t<decltype(field)>>(pt.U64(name));
  });

  FieldReader tc = r.Child("time_conversion", false);
  m.time.time_shift = static_cast<uint16_t>(tc.U64("time_shift", 0));
  m.time.time_mult = static_cast<uint32_t>(tc.U64("time_mult", 1));
  m.time.time_zero = tc.U64("time_zero", 0);
  m.time.cap_user_time_zero = tc.Bool("cap_user_time_zero", false);
  if (m.time.time_shift > 63) tc.Fail("time_shift", "must be below 64");

  if (r.Has("command")) {
    r.Array("command", [&](const FieldReader& e) {
      if (e.json().is_string()) m.command.push_back(e.json().get<std::string>());
      else e.Fail("", "expected a string");
    });
  }
  r.Array("pids", [&](const FieldReader& e) {
    if (e.json().is_number_integer()) m.pids.push_back(e.json().get<int>());
    else e.Fail("", "expected an integer");
  });
  m.per = r.Str("per", "thread");
  if (m.per != "thread" && m.per != "cpu") r.Fail("per", "expected \"thread\" or \"cpu\"");

  r.Array("streams", [&](const FieldReader& s) {
    PtStream st;
    ReadFileOfCpuOrThread(s, &st);
    s.Array("chunks", [&](const FieldReader& c) {
      PtChunk ch;
      ch.file_offset = c.U64("file_offset", 0, true);
      ch.size = c.U64("size", 0, true);
      ch.aux_offset = c.U64("aux_offset");
      ch.time_ns = c.U64("time_ns");
      ch.reason = c.Str("reason");
      ch.truncated = c.Bool("truncated");
      ch.partial = c.Bool("partial");
      ch.collision = c.Bool("collision");
      ch.overwrite = c.Bool("overwrite");
      ch.lost_before = c.Bool("lost_before");
      st.chunks.push_back(ch);
    });
    m.streams.push_back(std::move(st));
  });
  r.Array("sideband", [&](const FieldReader& s) {
    SidebandFile sb;
    ReadFileOfCpuOrThread(s, &sb);
    sb.origin = s.Str("origin", "kernel");
    sb.sample_type = s.U64("sample_type");
    sb.sample_id_all = s.Bool("sample_id_all", true);
    sb.lost_records = s.U64("lost_records");
    m.sideband.push_back(std::move(sb));
  });
  r.Array("images", [&](const FieldReader& s) {
    ImageEntry im;
    im.path = s.Str("path", "", true);
    im.name = s.Str("name");
    im.vaddr = s.U64("vaddr", 0, true);
    im.file_offset = s.U64("file_offset");
    im.size = s.U64("size", 0, true);
    im.pid = static_cast<int>(s.I64("pid", -1));
    im.kind = ParseNamed(s, "kind", kImageKindNames, ImageKind::kFile, /*required=*/false);
    im.build_id = s.Str("build_id");
    if (im.kind != ImageKind::kFile) CheckRelativePath(s, "path", im.path);
    m.images.push_back(std::move(im));
  });
  r.Members("build_ids",
            [&](const std::string& path, const FieldReader& ids) { m.build_ids[path] = ids.Str(path.c_str()); });
  m.archived = r.Bool("archived");
  r.Array("archive", [&](const FieldReader& a) {
    ArchivedFile f;
    f.path = a.Str("path", "", true);
    f.build_id = a.Str("build_id", "", true);
    f.file = a.Str("file", "", true);
    CheckRelativePath(a, "file", f.file);
    f.size = a.U64("size");
    m.archive.push_back(std::move(f));
  });
  r.Members("namespace_tids", [&](const std::string& key, const FieldReader& ns) {
    int tid = 0;
    if (!absl::SimpleAtoi(key, &tid)) ns.Fail(key.c_str(), "expected a tid as key");
    else m.namespace_tids[tid] = static_cast<int>(ns.I64(key.c_str()));
  });
  if (r.Has("kernel")) {
    FieldReader k = r.Child("kernel");
    m.kernel.kallsyms = k.Str("kallsyms");
    if (!m.kernel.kallsyms.empty()) CheckRelativePath(k, "kallsyms", m.kernel.kallsyms);
    m.kernel.build_id = k.Str("build_id");
    k.Array("modules", [&](const FieldReader& e) {
      KernelModule module;
      module.name = e.Str("name", "", true);
      module.address = e.U64("address", 0, true);
      module.size = e.U64("size");
      module.build_id = e.Str("build_id");
      m.kernel.modules.push_back(std::move(module));
    });
  }
  m.end_reason = r.Str("end_reason");
  m.emulator = r.Str("emulator");
  m.time_axis = r.Str("time_axis");
  m.emulated_ps_per_instruction = r.U64("emulated_ps_per_instruction");
  m.native_ps_per_instruction = r.U64("native_ps_per_instruction");
  r.Array("notes", [&](const FieldReader& e) {
    if (e.json().is_string()) m.notes.push_back(e.json().get<std::string>());
    else e.Fail("", "expected a string");
  });
  m.partial = r.Bool("partial");
  m.partial_reason = r.Str("partial_reason");
  m.start_ns = r.U64("start_ns");
  m.end_ns = r.U64("end_ns");
  if (r.Has("trigger")) {
    FieldReader t = r.Child("trigger");
    TriggerPoint p;
    p.symbol = t.Str("symbol");
    p.slower_than_ns = t.U64("slower_than_ns");
    p.hit = t.U64("hit");
    p.pid = static_cast<int>(t.I64("pid", -1));
    p.tid = static_cast<int>(t.I64("tid", -1));
    p.entry_ns = t.U64("entry_ns");
    p.return_ns = t.U64("return_ns");
    p.trimmed_from_ns = t.U64("trimmed_from_ns");
    m.trigger = p;
  }

  if (!status.ok()) return status;
  return m;
}

Json TriggerPointToJson(const TriggerPoint& t) {
  return {{"symbol", t.symbol}, {"slower_than_ns", t.slower_than_ns}, {"hit", t.hit},
          {"pid", t.pid},       {"tid", t.tid},                       {"entry_ns", t.entry_ns},
          {"return_ns", t.return_ns}, {"trimmed_from_ns", t.trimmed_from_ns}};
}

Json PtChunkToJson(const PtChunk& c) {
  return {{"file_offset", c.file_offset},
          {"size", c.size},
          {"aux_offset", Hex(c.aux_offset)},
          {"time_ns", c.time_ns},
          {"reason", c.reason},
          {"truncated", c.truncated},
          {"partial", c.partial},
          {"collision", c.collision},
          {"overwrite", c.overwrite},
          {"lost_before", c.lost_before}};
}

Json TraceMetaToJson(const TraceMeta& m) {
  Json root = Json::object();
  root["format_version"] = {{"major", m.format_major}, {"minor", m.format_minor}};
  root["tool_version"] = m.tool_version;
  root["host"] = {{"cpu_vendor", m.host.cpu.vendor},       {"cpu_family", m.host.cpu.family},
                  {"cpu_model", m.host.cpu.model},         {"cpu_stepping", m.host.cpu.stepping},
                  {"kernel_release", m.host.kernel_release}, {"hostname", m.host.hostname}};
  root["mode"] = TraceModeName(m.mode);
  Json fields = Json::object();
  for (const auto& [k, v] : m.pt.fields) fields[k] = v;
  Json caps = Json::object();
  for (const auto& [k, v] : m.pt.caps) caps[k] = v;
  root["pt"] = {{"pmu_type", m.pt.pmu_type},
                {"config", Hex(m.pt.config)},
                {"fields", fields},
                {"timing", m.pt.timing},
                {"user_only", m.pt.user_only},
                {"ip_filter", m.pt.ip_filter},
                {"caps", caps}};
  ForEachPtNumber(m.pt, [&](const char* name, const auto& field) { root["pt"][name] = field; });
  root["time_conversion"] = {{"time_shift", m.time.time_shift},
                             {"time_mult", m.time.time_mult},
                             {"time_zero", m.time.time_zero},
                             {"cap_user_time_zero", m.time.cap_user_time_zero}};
  root["command"] = m.command;
  root["pids"] = m.pids;
  root["per"] = m.per;
  Json streams = Json::array();
  for (const PtStream& s : m.streams) {
    Json chunks = Json::array();
    for (const PtChunk& c : s.chunks) {
      chunks.push_back(PtChunkToJson(c));
    }
    streams.push_back({{"file", s.file}, {"cpu", s.cpu}, {"tid", s.tid}, {"chunks", chunks}});
  }
  root["streams"] = streams;
  Json sideband = Json::array();
  for (const SidebandFile& s : m.sideband) {
    sideband.push_back({{"file", s.file},
                        {"cpu", s.cpu},
                        {"tid", s.tid},
                        {"origin", s.origin},
                        {"sample_type", Hex(s.sample_type)},
                        {"sample_id_all", s.sample_id_all},
                        {"lost_records", s.lost_records}});
  }
  root["sideband"] = sideband;
  Json images = Json::array();
  for (const ImageEntry& im : m.images) {
    images.push_back({{"path", im.path},
                      {"name", im.name},
                      {"vaddr", Hex(im.vaddr)},
                      {"file_offset", Hex(im.file_offset)},
                      {"size", Hex(im.size)},
                      {"pid", im.pid},
                      {"kind", ImageKindName(im.kind)},
                      {"build_id", im.build_id}});
  }
  root["images"] = images;
  Json build_ids = Json::object();
  for (const auto& [path, id] : m.build_ids) build_ids[path] = id;
  root["build_ids"] = build_ids;
  root["archived"] = m.archived;
  Json archive = Json::array();
  for (const ArchivedFile& f : m.archive) {
    archive.push_back({{"path", f.path}, {"build_id", f.build_id}, {"file", f.file}, {"size", Hex(f.size)}});
  }
  root["archive"] = archive;
  Json namespace_tids = Json::object();
  for (const auto& [tid, inner] : m.namespace_tids) namespace_tids[std::to_string(tid)] = inner;
  root["namespace_tids"] = namespace_tids;
  if (!(m.kernel == KernelInfo{})) {
    Json modules = Json::array();
    for (const KernelModule& module : m.kernel.modules) {
      modules.push_back({{"name", module.name},
                         {"address", Hex(module.address)},
                         {"size", Hex(module.size)},
                         {"build_id", module.build_id}});
    }
    root["kernel"] = {{"kallsyms", m.kernel.kallsyms}, {"build_id", m.kernel.build_id}, {"modules", modules}};
  }
  root["end_reason"] = m.end_reason;
  if (!m.emulator.empty()) root["emulator"] = m.emulator;
  if (!m.time_axis.empty()) root["time_axis"] = m.time_axis;
  if (m.emulated_ps_per_instruction != 0) root["emulated_ps_per_instruction"] = m.emulated_ps_per_instruction;
  if (m.native_ps_per_instruction != 0) root["native_ps_per_instruction"] = m.native_ps_per_instruction;
  root["notes"] = m.notes;
  root["partial"] = m.partial;
  root["partial_reason"] = m.partial_reason;
  root["start_ns"] = m.start_ns;
  root["end_ns"] = m.end_ns;
  if (m.trigger) root["trigger"] = TriggerPointToJson(*m.trigger);
  return root;
}

std::string SerializeTraceMeta(const TraceMeta& m) { return TraceMetaToJson(m).dump(2) + "\n"; }

absl::StatusOr<TraceMeta> ReadTraceMeta(const std::string& trace_dir) {
  std::string path = absl::StrCat(trace_dir, "/", kMetaFileName);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status()) && !IsDirectory(trace_dir)) {
      return absl::NotFoundError(absl::StrCat(trace_dir, ": not a trace directory (does not exist)"));
    }
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(
          absl::StrCat(trace_dir, ": not a trace directory (no ", kMetaFileName, ")"));
    }
    return text.status();
  }
  return ParseTraceMeta(*text, path);
}

absl::Status WriteTraceMeta(const std::string& trace_dir, const TraceMeta& meta) {
  return WriteFileAtomic(absl::StrCat(trace_dir, "/", kMetaFileName), SerializeTraceMeta(meta));
}

}  // namespace ptd
