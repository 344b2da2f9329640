// `ptrace-direct info DIR [--json]`: what a trace directory holds. The summary is built
// once as JSON and the text form is printed from it, so both always say the same.
// A bad or missing sideband file still prints everything that could be read, then names
// the file and offset on stderr and exits 1.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "nlohmann/json.hpp"
#include "sideband/sideband_set.h"

namespace ptd::cli {
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

Json InfoJson(const std::string& dir, const TraceMeta& meta, const Sideband& sb) {
  Json j;
  j["trace_dir"] = dir;
  j["format_version"] = absl::StrCat(meta.format_major, ".", meta.format_minor);
  j["tool_version"] = meta.tool_version;
  j["mode"] = TraceModeName(meta.mode);
  j["host"] = {{"cpu_vendor", meta.host.cpu.vendor},
               {"cpu_family", meta.host.cpu.family},
               {"cpu_model", meta.host.cpu.model},
               {"cpu_stepping", meta.host.cpu.stepping},
               {"kernel_release", meta.host.kernel_release},
               {"hostname", meta.host.hostname}};
  j["command"] = meta.command;
  j["pids"] = meta.pids;
  j["per"] = meta.per;
  // The PT settings as opened: the timing preset and every field it set.
  Json fields = Json::object();
  for (const auto& [name, value] : meta.pt.fields) fields[name] = value;
  j["pt"] = {{"timing", meta.pt.timing},
             {"fields", fields},
             {"user_only", meta.pt.user_only},
             {"ip_filter", meta.pt.ip_filter}};
  j["start_ns"] = meta.start_ns;
  j["end_ns"] = meta.end_ns;
  j["end_reason"] = meta.end_reason;
  j["partial"] = meta.partial;
  j["partial_reason"] = meta.partial_reason;
  j["threads"] = ThreadsJson(sb);
  j["mmaps"] = MmapsJson(sb);
  j["vdso"] = VdsoJson(dir, meta, sb);
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

// end_reason in words (docs/trace-dir.md lists the values).
const char* EndReasonText(const std::string& reason) {
  if (reason == "exit") return "the target exited";
  if (reason == "target_killed") return "the target was killed by a signal";
  if (reason == "sigint") return "the recorder got SIGINT (Ctrl-C)";
  if (reason == "sigterm") return "the recorder was stopped by SIGTERM";
  if (reason == "duration") return "--duration elapsed";
  if (reason == "control") return "'stop' on the control FIFO";
  if (reason == "trigger") return "the --trigger function ran";
  if (reason == "error") return "an error stopped the recording";
  if (reason == "import") return "imported";
  if (reason.empty()) return "not recorded";
  return "see notes";
}

std::string Str(const Json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

void PrintText(const Json& j) {
  std::printf("trace:   %s (format %s, written by %s)\n", Str(j["trace_dir"]).c_str(),
              Str(j["format_version"]).c_str(), Str(j["tool_version"]).c_str());
  std::printf("mode:    %s\n", Str(j["mode"]).c_str());
  const Json& h = j["host"];
  std::printf("host:    %s family %s model %s stepping %s, kernel %s, %s\n",
              Str(h["cpu_vendor"]).c_str(), Str(h["cpu_family"]).c_str(),
              Str(h["cpu_model"]).c_str(), Str(h["cpu_stepping"]).c_str(),
              Str(h["kernel_release"]).c_str(), Str(h["hostname"]).c_str());
  std::vector<std::string> command = j["command"].get<std::vector<std::string>>();
  std::printf("command: %s\n", absl::StrJoin(command, " ").c_str());
  std::printf("pids:    %s   streams per %s\n",
              absl::StrJoin(j["pids"].get<std::vector<int>>(), " ").c_str(),
              Str(j["per"]).c_str());
  if (!j["pt"]["fields"].empty()) {
    std::vector<std::string> fields;
    for (const auto& [name, value] : j["pt"]["fields"].items()) {
      fields.push_back(absl::StrCat(name, "=", Str(value)));
    }
    std::printf("pt:      timing %s (%s)%s%s\n", Str(j["pt"]["timing"]).c_str(),
                absl::StrJoin(fields, ", ").c_str(),
                j["pt"]["ip_filter"].get<std::string>().empty() ? "" : "  filter ",
                j["pt"]["ip_filter"].get<std::string>().c_str());
  }
  std::printf("time:    %s .. %s ns, ended by %s (%s)\n", Str(j["start_ns"]).c_str(),
              Str(j["end_ns"]).c_str(), Str(j["end_reason"]).c_str(),
              EndReasonText(Str(j["end_reason"])));
  if (j["partial"].get<bool>()) {
    std::printf("PARTIAL: recording stopped on an error; what was written before it is kept: %s\n",
                Str(j["partial_reason"]).c_str());
  }

  std::printf("\nthreads (%zu):\n", j["threads"].size());
  for (const Json& t : j["threads"]) {
    std::string names;
    for (const Json& n : t["names"]) {
      if (!names.empty()) names += " -> ";
      names += n["name"].get<std::string>();
    }
    std::printf("  tid %-7s pid %-7s %-16s%s%s\n", Str(t["tid"]).c_str(), Str(t["pid"]).c_str(),
                Str(t["name"]).c_str(),
                t["names"].size() > 1 ? absl::StrCat("  (", names, ")").c_str() : "",
                t["exit_ns"].is_null() ? "" : "  exited");
  }
  std::printf("\nmappings (%zu):\n", j["mmaps"].size());
  for (const Json& m : j["mmaps"]) {
    std::printf("  pid %-7s %18s-%-18s pgoff %-10s %s%s%s\n", Str(m["pid"]).c_str(),
                Str(m["start"]).c_str(), Str(m["end"]).c_str(), Str(m["pgoff"]).c_str(),
                Str(m["path"]).c_str(), m["inherited"].get<bool>() ? "  (inherited)" : "",
                m["executable"].get<bool>() ? "" : "  (data)");
  }
  std::printf("\nvdso (%zu):\n", j["vdso"].size());
  for (const Json& v : j["vdso"]) {
    std::printf("  pid %-7s %s size %s  %s\n", Str(v["pid"]).c_str(), Str(v["address"]).c_str(),
                Str(v["size"]).c_str(),
                v["dumped"].get<bool>() ? Str(v["path"]).c_str() : "NOT DUMPED");
  }
  const Json& archive = j["archive"];
  if (archive["archived"].get<bool>()) {
    std::printf("\narchive: %zu mapped file(s), %.1f MB in images/by-build-id\n", archive["files"].size(),
                static_cast<double>(archive["bytes"].get<int64_t>()) / 1e6);
    for (const Json& f : archive["files"]) {
      std::printf("  %s  %s  %s\n", Str(f["build_id"]).c_str(), Str(f["path"]).c_str(),
                  f["size"].get<int64_t>() < 0 ? "MISSING" : absl::StrCat(Str(f["size"]), " bytes").c_str());
    }
  } else {
    std::printf("\narchive: none (recorded with --no-archive, or imported): decode reads the mapped files by path\n");
  }
  std::printf("\nPT streams (%zu):\n", j["streams"].size());
  for (const Json& s : j["streams"]) {
    std::printf("  %s  cpu %s tid %s  %s bytes  %zu chunk(s)\n", Str(s["file"]).c_str(),
                Str(s["cpu"]).c_str(), Str(s["tid"]).c_str(), Str(s["size"]).c_str(),
                s["chunks"].size());
    size_t index = 0;
    for (const Json& c : s["chunks"]) {
      std::string flags;
      for (const char* flag : {"truncated", "partial", "collision", "overwrite", "lost_before"}) {
        if (c[flag].get<bool>()) absl::StrAppend(&flags, " ", flag);
      }
      std::printf("    [%zu] %s  %s bytes at %s  t=%s%s\n", index++, Str(c["reason"]).c_str(),
                  Str(c["size"]).c_str(), Str(c["file_offset"]).c_str(),
                  Str(c["time_ns"]).c_str(), flags.c_str());
    }
  }
  std::printf("\nsideband (%zu):\n", j["sideband"].size());
  for (const Json& s : j["sideband"]) {
    std::printf("  %s  %s cpu %s tid %s  %s bytes  %s records%s\n", Str(s["file"]).c_str(),
                Str(s["origin"]).c_str(), Str(s["cpu"]).c_str(), Str(s["tid"]).c_str(),
                Str(s["bytes"]).c_str(), Str(s["records"]).c_str(),
                s["error"].is_null() ? "" : "  ERROR (see below)");
  }
  std::printf("\nschedule:\n");
  for (const Json& c : j["schedule"]) {
    std::printf("  cpu %s: %s intervals, tids %s\n", Str(c["cpu"]).c_str(),
                Str(c["intervals"]).c_str(), c["tids"].dump().c_str());
  }
  const Json& l = j["lost"];
  std::printf("\nlost:    %s sideband records, %s samples; AUX records %s (%s truncated, %s "
              "partial, %s collision, %s overwrite); %s sideband parse errors\n",
              Str(l["records"]).c_str(), Str(l["samples"]).c_str(),
              Str(l["aux_records"]).c_str(), Str(l["aux_truncated"]).c_str(),
              Str(l["aux_partial"]).c_str(), Str(l["aux_collision"]).c_str(),
              Str(l["aux_overwrite"]).c_str(), Str(l["sideband_parse_errors"]).c_str());
  if (!j["notes"].empty()) {
    std::printf("\nnotes:\n");
    for (const Json& n : j["notes"]) std::printf("  - %s\n", Str(n).c_str());
  }
  if (!j["problems"].empty()) {
    std::printf("\nproblems:\n");
    for (const Json& p : j["problems"]) std::printf("  - %s\n", Str(p).c_str());
  }
}

}  // namespace

void RegisterInfoCommand(CLI::App& app, CliContext& ctx) {
  struct Options {
    std::string dir;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("info", "Summarize a trace directory");
  cmd->add_option("trace_dir", options->dir, "Trace directory")->required();
  cmd->add_flag("--json", options->json,
                "Print JSON (keys: mode, threads, mmaps, vdso, streams, archive, sideband, lost, ...)");
  cmd->footer(
      "Reads meta.json and every sideband file. When a sideband file is missing or corrupt,\n"
      "everything readable is still printed, then the error (file, byte offset, record)\n"
      "goes to stderr and the exit status is 1.");
  cmd->callback([&ctx, options]() {
    absl::StatusOr<TraceMeta> meta = ReadTraceMeta(options->dir);
    if (!meta.ok()) {
      ctx.exit_code = ReportError(meta.status());
      return;
    }
    absl::StatusOr<Sideband> sb = LoadSideband(options->dir, *meta, {.keep_going = true});
    if (!sb.ok()) {
      ctx.exit_code = ReportError(sb.status());
      return;
    }
    Json j = InfoJson(options->dir, *meta, *sb);
    if (options->json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintText(j);
    }
    std::fflush(stdout);
    for (const SidebandSourceInfo& source : sb->sources) {
      if (!source.error.ok()) ctx.exit_code = ReportError(source.error);
    }
  });
}

}  // namespace ptd::cli
