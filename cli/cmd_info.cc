// `ptrace-direct info INPUT [--json]`: what a trace directory or perf.data holds. The
// model is traceinfo::TraceInfo's JSON; the text form is printed from it, so both always
// say the same.
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
#include "common/units.h"
#include "nlohmann/json.hpp"
#include "traceinfo/trace_info.h"

namespace ptd::cli {
namespace {

using Json = nlohmann::ordered_json;

// end_reason in words (docs/trace-dir.md lists the values).
const char* EndReasonText(const std::string& reason) {
  if (reason == "exit") return "the target exited";
  if (reason == "target_killed") return "the target was killed by a signal";
  if (reason == "sigint") return "the recorder got SIGINT (Ctrl-C)";
  if (reason == "sigterm") return "the recorder was stopped by SIGTERM";
  if (reason == "duration") return "--duration elapsed";
  if (reason == "control") return "'stop' on the control FIFO";
  if (reason == "trigger") return "the trigger fired";
  if (reason == "error") return "an error stopped the recording";
  if (reason == "import") return "imported";
  if (reason.empty()) return "not recorded";
  return "see notes";
}

std::string Str(const Json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// How much the emulator slowed CPU work (meta.json's measured rates), or nothing.
std::string SlowdownText(const Json& j) {
  const uint64_t emulated = j.value("emulated_ps_per_instruction", uint64_t{0});
  const uint64_t native = j.value("native_ps_per_instruction", uint64_t{0});
  if (emulated == 0 || native == 0) return "";
  return absl::StrFormat(
      " about %.0fx: %.1f M instructions/s between system calls (translating new code included), against %.0f M/s "
      "of a simple loop run natively when recording",
      static_cast<double>(emulated) / static_cast<double>(native), 1e6 / static_cast<double>(emulated),
      1e6 / static_cast<double>(native));
}

// The time axis `decode` uses by default, its resolution and its clock, from the PT
// fields and the mode (docs/decoder.md, "Time").
std::string ClockText(const Json& j) {
  const Json fields = j.contains("pt") ? j["pt"]["fields"] : Json::object();
  auto on = [&](const char* name) { return fields.contains(name) && fields[name].is_number() && fields[name].get<int>() != 0; };
  if (!on("tsc")) return "axis instructions (no timing packets), resolution 1 instruction";
  std::string resolution = on("cyc")   ? "every packet (CYC: core cycles)"
                           : on("mtc") ? absl::StrCat("MTC (2^", Str(fields.value("mtc_period", Json(0))), " ART ticks)")
                                       : "TSC packets only (PSB+, re-enables)";
  const std::string emulator = j.value("emulator", "");
  std::string source = Str(j["mode"]) == "emulated" ? "the emulator's (meta.json names none)" : "the CPU's TSC";
  if (!emulator.empty()) {
    source = j.value("time_axis", "") == "virtual"
                 ? absl::StrCat("virtual (", emulator, "): 1 ns per retired instruction plus the time charged per system call")
                 : absl::StrCat("CLOCK_MONOTONIC as ", emulator, " read it (CPU work slowed by the emulator",
                                SlowdownText(j), ")");
  }
  return absl::StrCat("axis ns, resolution ", resolution, ", interpolated by instructions between; clock ", source);
}

void PrintText(const Json& j) {
  std::printf("trace:   %s (format %s, written by %s)\n", Str(j["trace_dir"]).c_str(),
              Str(j["format_version"]).c_str(), Str(j["tool_version"]).c_str());
  const std::string emulator = j.value("emulator", "");
  if (!emulator.empty()) {
    const std::string axis = j.value("time_axis", "");
    std::printf("mode:    %s by %s, time axis %s\n", Str(j["mode"]).c_str(), emulator.c_str(),
                axis.empty() ? "wall" : axis.c_str());
  } else {
    std::printf("mode:    %s\n", Str(j["mode"]).c_str());
  }
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
  if (j.contains("pt") && !j["pt"]["fields"].empty()) {
    std::vector<std::string> fields;
    for (const auto& [name, value] : j["pt"]["fields"].items()) {
      fields.push_back(absl::StrCat(name, "=", Str(value)));
    }
    std::printf("pt:      timing %s (%s)%s%s\n", Str(j["pt"]["timing"]).c_str(),
                absl::StrJoin(fields, ", ").c_str(),
                j["pt"]["ip_filter"].get<std::string>().empty() ? "" : "  filter ",
                j["pt"]["ip_filter"].get<std::string>().c_str());
  }
  std::printf("clock:   %s\n", ClockText(j).c_str());
  std::printf("time:    %s .. %s ns, ended by %s (%s)\n", Str(j["start_ns"]).c_str(),
              Str(j["end_ns"]).c_str(), Str(j["end_reason"]).c_str(),
              EndReasonText(Str(j["end_reason"])));
  if (j.contains("trigger")) {
    const Json& t = j["trigger"];
    const std::string when = t["return_ns"].get<uint64_t>() == 0
                                 ? absl::StrCat("entered at ", Str(t["entry_ns"]))
                                 : absl::StrCat("called at ", Str(t["entry_ns"]), ", returned at ",
                                                Str(t["return_ns"]), " (slower than ",
                                                FormatDurationNs(t["slower_than_ns"].get<uint64_t>()), ")");
    // A call that has not returned is shown from its entry to the end of the trace (an
    // open end): ENTRY..ENTRY would be an empty window, which decode rejects.
    const std::string window_end = t["return_ns"].get<uint64_t>() == 0
                                       ? std::string()
                                       : absl::StrCat(t["return_ns"].get<uint64_t>() + 1);
    std::printf("trigger: %s, hit %s, tid %s, %s; decode --window %s..%s shows it\n", Str(t["symbol"]).c_str(),
                Str(t["hit"]).c_str(), Str(t["tid"]).c_str(), when.c_str(), Str(t["entry_ns"]).c_str(),
                window_end.c_str());
    if (t["trimmed_from_ns"].get<uint64_t>() != 0) {
      std::printf("trimmed: --trim kept only the trace from the last PSB before %s ns on (the firing call's entry)\n",
                  Str(t["trimmed_from_ns"]).c_str());
    }
  }
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
  std::printf("\nimages (%zu):\n", j["images"].size());
  for (const Json& i : j["images"]) {
    std::printf("  pid %-7s %18s size %-10s %-6s %s%s\n", Str(i["pid"]).c_str(), Str(i["address"]).c_str(),
                Str(i["size"]).c_str(), Str(i["kind"]).c_str(), Str(i["name"]).c_str(),
                i["present"].get<bool>() ? "" : "  (NOT PRESENT)");
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
    const std::string size = s["size"].get<int64_t>() < 0 ? std::string("MISSING (decode skips this stream)")
                                                          : absl::StrCat(Str(s["size"]), " bytes");
    std::printf("  %s  cpu %s tid %s  %s  %zu chunk(s)\n", Str(s["file"]).c_str(), Str(s["cpu"]).c_str(),
                Str(s["tid"]).c_str(), size.c_str(), s["chunks"].size());
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

// What `info` was asked for.
struct InfoArgs {
  std::string input;
  bool json = false;
  bool verbose = false;
  std::vector<std::string> buildid_dirs;
};

int RunInfo(const InfoArgs& args) {
  absl::StatusOr<traceinfo::TraceInfo> info = traceinfo::ReadTraceInfo(args.input, {.buildid_dirs = args.buildid_dirs});
  if (!info.ok()) return ReportError(info.status());
  if (args.json) {
    std::printf("%s\n", info->json.dump(2).c_str());
  } else {
    PrintText(info->json);
  }
  std::fflush(stdout);
  WarnMissingBinaries(info->missing_binaries, -1, args.verbose);
  // Everything readable is printed first; then each sideband error, the last deciding the exit.
  int exit_code = kExitOk;
  for (const SidebandSourceInfo& source : info->sideband.sources) {
    if (!source.error.ok()) exit_code = ReportError(source.error);
  }
  return exit_code;
}

}  // namespace

void RegisterInfoCommand(CLI::App& app, CliContext& ctx) {
  auto [cmd, options] = AddSubcommand<InfoArgs>(app, ctx, "info", "Summarize a trace directory or perf.data", RunInfo);
  cmd->add_option("input", options->input, "Trace directory or perf.data (intel_pt; file or pipe mode)")
      ->required();
  AddMissingBinaryOptions(cmd, &options->buildid_dirs, &options->verbose);
  cmd->add_flag("--json", options->json,
                "Print JSON (keys: mode, threads, mmaps, vdso, images, streams, archive, sideband, lost, ...)");
  cmd->footer(
      "Reads meta.json and every sideband file (a perf.data is imported into a temporary\n"
      "trace directory first). When a sideband file is missing or corrupt,\n"
      "everything readable is still printed, then the error (file, byte offset, record)\n"
      "goes to stderr and the exit status is 1.");
}

}  // namespace ptd::cli
