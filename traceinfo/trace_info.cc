#include "traceinfo/trace_info.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/trace_dir.h"
#include "perfdata/perf_data_input.h"

namespace ptd::traceinfo {
namespace {

using Json = nlohmann::ordered_json;

// 64-bit addresses as hex strings, as in meta.json (JSON numbers lose precision above 2^53).
std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

Json NsOrNull(uint64_t ns) { return ns == kForever ? Json(nullptr) : Json(ns); }

Json ThreadsJson(const Sideband& sb) {
  Json threads = Json::array();
  for (const ThreadInfo& t : sb.threads.Threads()) {
    Json names = Json::array();
    for (const ThreadName& n : t.names) {
      names.push_back({{"time_ns", n.time_ns}, {"name", n.name}, {"exec", n.exec}});
    }
    threads.push_back({{"tid", t.tid},
                       {"pid", t.pid},
                       {"name", sb.threads.LastName(t.tid)},
                       {"names", names},
                       {"parent_tid", t.parent_tid},
                       {"start_ns", t.start_ns},
                       {"exit_ns", NsOrNull(t.exit_ns)}});
  }
  return threads;
}

// Every mapping as it was added (MMAP/MMAP2 records and fork copies), in time order per pid.
Json MmapsJson(const Sideband& sb) {
  Json mmaps = Json::array();
  for (int pid : sb.mmaps.Pids()) {
    for (const MapChange& c : sb.mmaps.Changes(pid)) {
      if (c.kind != MapChange::Kind::kMap) continue;
      const Mapping& m = c.mapping;
      mmaps.push_back({{"pid", pid},
                       {"start", Hex(m.start)},
                       {"end", Hex(m.end)},
                       {"pgoff", Hex(m.pgoff)},
                       {"path", m.path},
                       {"time_ns", c.time_ns},
                       {"executable", m.executable},
                       {"build_id", m.build_id},
                       {"inherited", c.inherited}});
    }
  }
  return mmaps;
}

// vDSO dumps listed in meta.json, plus [vdso] mappings seen in the sideband that have no
// dump (the decoder will then miss vDSO code).
Json VdsoJson(const std::string& dir, const TraceMeta& meta, const Sideband& sb) {
  Json vdso = Json::array();
  std::set<std::pair<int, uint64_t>> listed;
  for (const ImageEntry& image : meta.images) {
    if (image.kind != ImageKind::kVdso) continue;
    listed.insert({image.pid, image.vaddr});
    vdso.push_back({{"pid", image.pid},
                    {"path", image.path},
                    {"address", Hex(image.vaddr)},
                    {"size", Hex(image.size)},
                    {"dumped", FileSize(ResolveTracePath(dir, image.path)) >= 0}});
  }
  for (int pid : sb.mmaps.Pids()) {
    for (const MapChange& c : sb.mmaps.Changes(pid)) {
      if (c.kind != MapChange::Kind::kMap || c.mapping.path != "[vdso]" || c.inherited) continue;
      if (listed.count({pid, c.mapping.start}) || listed.count({-1, c.mapping.start})) continue;
      listed.insert({pid, c.mapping.start});
      vdso.push_back({{"pid", pid},
                      {"path", ""},
                      {"address", Hex(c.mapping.start)},
                      {"size", Hex(c.mapping.end - c.mapping.start)},
                      {"dumped", false}});
    }
  }
  return vdso;
}

// The images meta.json lists (host files, vDSO and memory dumps): for `import raw` and
// perf.data traces the only account of the code the decoder will read.
Json ImagesJson(const std::string& dir, const TraceMeta& meta) {
  Json images = Json::array();
  for (const ImageEntry& image : meta.images) {
    images.push_back({{"kind", ImageKindName(image.kind)},
                      {"name", image.name},
                      {"path", image.path},
                      {"pid", image.pid},
                      {"address", Hex(image.vaddr)},
                      {"size", Hex(image.size)},
                      {"file_offset", Hex(image.file_offset)},
                      {"build_id", image.build_id},
                      {"present", FileSize(ResolveTracePath(dir, image.path)) >= 0}});
  }
  return images;
}

// The archived copies of the mapped files: each file once (several paths may share one
// build-id) and the bytes they take in the directory.
Json ArchiveJson(const std::string& dir, const TraceMeta& meta) {
  Json files = Json::array();
  std::set<std::string> counted;
  int64_t bytes = 0;
  for (const ArchivedFile& f : meta.archive) {
    const int64_t size = FileSize(ResolveTracePath(dir, f.file));
    if (counted.insert(f.file).second && size > 0) bytes += size;
    files.push_back({{"path", f.path}, {"build_id", f.build_id}, {"file", f.file}, {"size", size}});
  }
  return {{"archived", meta.archived}, {"bytes", bytes}, {"files", files}};
}

Json StreamsJson(const std::string& dir, const TraceMeta& meta) {
  Json streams = Json::array();
  for (const PtStream& s : meta.streams) {
    Json chunks = Json::array();
    for (const PtChunk& c : s.chunks) {
      chunks.push_back(PtChunkToJson(c));
    }
    streams.push_back({{"file", s.file},
                       {"cpu", s.cpu},
                       {"tid", s.tid},
                       {"size", FileSize(ResolveTracePath(dir, s.file))},
                       {"chunks", chunks}});
  }
  return streams;
}

Json SidebandJson(const Sideband& sb) {
  Json files = Json::array();
  for (const SidebandSourceInfo& s : sb.sources) {
    files.push_back({{"file", s.file},
                     {"origin", s.synthesized ? "synthesized" : "kernel"},
                     {"cpu", s.cpu},
                     {"tid", s.tid},
                     {"bytes", s.bytes},
                     {"records", s.records},
                     {"error", s.error.ok() ? Json(nullptr) : Json(std::string(s.error.message()))}});
  }
  return files;
}

Json ScheduleJson(const Sideband& sb) {
  Json cpus = Json::array();
  for (int cpu : sb.schedule.Cpus()) {
    std::set<int> tids;
    std::vector<CpuInterval> intervals = sb.schedule.Intervals(cpu);
    for (const CpuInterval& i : intervals) tids.insert(i.tid);
    cpus.push_back({{"cpu", cpu}, {"intervals", intervals.size()}, {"tids", tids}});
  }
  return cpus;
}

Json InfoJson(const std::string& input, const std::string& input_kind, const std::string& dir,
              const TraceMeta& meta, const Sideband& sb) {
  Json j;
  j["trace_dir"] = input;
  j["input_kind"] = input_kind;
  j["format_version"] = absl::StrCat(meta.format_major, ".", meta.format_minor);
  // meta.json's account of the run, key for key as it writes them: host, PT settings (the
  // timing preset, every field it set, the timing ratios), which emulator wrote an emulated
  // trace and what its timestamps count, how it ended. meta.json leaves out an unset
  // emulator and time_axis; info shows them empty.
  const Json meta_json = TraceMetaToJson(meta);
  for (const char* key : {"tool_version", "mode", "host", "command", "pids", "per", "emulator", "time_axis", "pt",
                          "start_ns", "end_ns", "end_reason", "partial", "partial_reason"}) {
    j[key] = meta_json.contains(key) ? meta_json[key] : Json("");
  }
  if (meta.trigger) j["trigger"] = meta_json["trigger"];
  // Emulated traces: how fast CPU work ran under the emulator and natively (when measured).
  for (const char* key : {"emulated_ps_per_instruction", "native_ps_per_instruction"}) {
    if (meta_json.contains(key)) j[key] = meta_json[key];
  }
  j["threads"] = ThreadsJson(sb);
  j["mmaps"] = MmapsJson(sb);
  j["vdso"] = VdsoJson(dir, meta, sb);
  j["images"] = ImagesJson(dir, meta);
  j["streams"] = StreamsJson(dir, meta);
  j["archive"] = ArchiveJson(dir, meta);
  j["sideband"] = SidebandJson(sb);
  j["schedule"] = ScheduleJson(sb);
  j["lost"] = {{"records", sb.stats.lost_records},
               {"samples", sb.stats.lost_samples},
               {"aux_records", sb.stats.aux_records},
               {"aux_truncated", sb.stats.aux_truncated},
               {"aux_partial", sb.stats.aux_partial},
               {"aux_collision", sb.stats.aux_collision},
               {"aux_overwrite", sb.stats.aux_overwrite},
               {"sideband_parse_errors", sb.stats.parse_errors},
               {"records_not_modelled", sb.stats.other_records}};
  j["notes"] = meta.notes;
  j["problems"] = sb.problems;
  return j;
}

}  // namespace

absl::StatusOr<TraceInfo> ReadTraceInfo(const std::string& input, const TraceInfoOptions& options) {
  TraceInfo info;
  info.input = input;
  info.input_kind = "trace_dir";
  // A perf.data is imported into a temporary trace directory, removed on return: the
  // model reads file sizes there, so it is built before.
  std::optional<perfdata::TemporaryPerfImport> perf_import;
  if (perfdata::IsPerfDataFile(input)) {
    absl::StatusOr<perfdata::TemporaryPerfImport> imported =
        perfdata::TemporaryPerfImport::Create(input, options.buildid_dirs);
    if (!imported.ok()) return imported.status();
    perf_import.emplace(*std::move(imported));
    info.input_kind = "perf.data";
    info.missing_binaries = perf_import->missing_binaries();
  }
  const std::string dir = perf_import ? perf_import->trace_dir() : input;
  absl::StatusOr<TraceMeta> meta = ReadTraceMeta(dir);
  if (!meta.ok()) return meta.status();
  info.meta = *std::move(meta);
  absl::StatusOr<Sideband> sideband = LoadSideband(dir, info.meta, {.keep_going = true});
  if (!sideband.ok()) return sideband.status();
  info.sideband = *std::move(sideband);
  info.json = InfoJson(input, info.input_kind, dir, info.meta, info.sideband);
  return info;
}

}  // namespace ptd::traceinfo
