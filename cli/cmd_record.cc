// `ptrace-direct record`: Intel PT through perf_event_open, or an emulator (Valgrind, ptrace).
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "recorder/pt/hardware_recorder.h"
#include "recorder/session/record_options.h"
#include "recorder/emulate/emulated_recorder.h"
#include "recorder/session/record_backend.h"
#include "recorder/session/recording_supervisor.h"
#include "recorder/target/target_process.h"
#include "recorder/valgrind/valgrind_recorder.h"

namespace ptd::cli {
namespace {

// "ptrace-direct: <line>" on stderr, unless --quiet.
void Say(const RecordOptions& options, const std::string& line) {
  if (!options.quiet) std::fprintf(stderr, "ptrace-direct: %s\n", line.c_str());
}

// Exit status of `record` when the recording itself failed (the message says why): the
// value `timeout`, `env` and `nice` give for their own failures, out of the range a target's
// status shares with the shell's 126/127 and 128+signal (docs/cli.md).
constexpr int kExitRecordingFailed = 125;

// Records; on success, the exit status `record` ends with: the launched target's (its exit
// code, or 128 + the signal that killed it), 0 when attached or when the recording stopped
// before the target ended.
absl::StatusOr<int> RunRecord(const RecordOptions& options) {
  absl::StatusOr<BackendChoice> choice = ChooseBackend(options);
  if (!choice.ok()) return choice.status();
  Say(options, choice->why);
  if (choice->backend != RecordBackend::kHardware) {
    absl::StatusOr<EmulatedRecordSummary> summary = choice->backend == RecordBackend::kValgrind
                                                        ? RecordValgrind(options)
                                                        : RecordEmulated(options);
    if (!summary.ok()) return summary.status();
    Say(options, absl::StrFormat("%s (emulated): %d instructions, %d PT bytes, %d threads, %d snapshots, %.2f s, "
                                 "ended by %s",
                                 summary->trace_dir, summary->instructions, summary->pt_bytes, summary->threads,
                                 summary->snapshots, summary->seconds, summary->end_reason));
    return summary->exit_status >= 0 ? summary->exit_status : kExitOk;
  }
  absl::StatusOr<pt::HardwareRecordSummary> summary = pt::RecordHardware(options);
  if (!summary.ok()) return summary.status();
  Say(options, absl::StrFormat("%s: %d PT bytes from %d rings, %d snapshots, %d lost chunks, ended by %s",
                               summary->trace_dir, summary->pt_bytes, summary->rings, summary->snapshots,
                               summary->lost_chunks, summary->end_reason));
  return summary->exit_status >= 0 ? ShellExitCode(summary->exit_status) : kExitOk;
}

}  // namespace

void RegisterRecordCommand(CLI::App& app, CliContext& ctx) {
  auto opts = std::make_shared<RecordOptions>();
  auto timing = std::make_shared<std::string>("normal");
  auto time_axis = std::make_shared<std::string>("virtual");
  CLI::App* cmd = app.add_subcommand(
      "record",
      "Record a trace of a process into a trace directory.\n"
      "  ptrace-direct record [options] -- CMD ARGS     launch CMD and record it\n"
      "  ptrace-direct record [options] --pid PID[,PID...]  attach to running processes\n"
      "  ptrace-direct record [options] --cgroup DIR    attach to every process of a cgroup\n"
      "Snapshots: Ctrl-C (final), SIGUSR2, --control FIFO, target exit, --trigger.");
  cmd->add_option("--pid,-p", opts->pids,
                  "Attach to these running processes (comma-separated; all their threads, and their "
                  "children unless --no-follow)")
      ->delimiter(',')
      ->type_name("PID[,PID...]");
  cmd->add_option("--cgroup", opts->cgroup,
                  "Attach to every process of this cgroup directory (v2, or a v1 controller's; "
                  "e.g. /sys/fs/cgroup/unified/app). Hardware: per-CPU events for the cgroup "
                  "(PERF_FLAG_PID_CGROUP), processes that join later included; ptrace: its "
                  "processes, and those that join while recording (cgroup.procs read every 100 ms)")
      ->type_name("DIR");
  cmd->add_option("--output,-o", opts->output_dir, "Trace directory to write")->capture_default_str();
  cmd->add_flag("--force", opts->force, "Replace an existing output directory");
  auto emulate = cmd->add_option("--emulate", opts->emulator,
                                 "Emulate PT instead of using the hardware: valgrind (fast), ptrace "
                                 "(single-steps; can attach to --pid), or no value for the best one "
                                 "available. Without a PT PMU, record emulates by itself");
  emulate->expected(0, 1)->check(CLI::IsMember({"", "valgrind", "ptrace"}));
  cmd->add_option("--time", *time_axis,
                  "Emulation time axis: virtual (default: one ns per retired instruction, and each "
                  "system call as long as it really took, at least 1 us: durations are work plus waits) "
                  "or wall (CLOCK_MONOTONIC: CPU work slowed by the emulator)")
      ->check(CLI::IsMember({"virtual", "wall"}));
  cmd->add_flag("--no-follow", [opts](int64_t) { opts->follow_children = false; },
                "Do not trace the children (fork, vfork) of the program or of the --pid processes (every "
                "backend; their new threads are still traced)");
  cmd->add_flag("--debuginfod", opts->debuginfod,
                "Fetch into the trace directory the debug files that stripped mapped files lack, from the debuginfod servers in DEBUGINFOD_URLS");
  cmd->add_flag("--no-archive", [opts](int64_t) { opts->archive = false; },
                "Do not copy the mapped files into the trace directory (decode then reads them by path)");
  cmd->add_flag("--per-thread", opts->per_thread,
                "One ring per thread instead of per-CPU rings (small, few-thread targets)");
  cmd->add_flag("--snapshot", opts->snapshot,
                "Snapshot mode: keep only the newest --snapshot-size bytes per ring (overwrite)");
  CLI::Option* snapshot_size = cmd->add_option("--snapshot-size", opts->snapshot_size,
                  "AUX ring size in snapshot mode: power-of-two pages, e.g. 4M (default "
                  "128K without CAP_IPC_LOCK, as perf)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  CLI::Option* buffer_size = cmd->add_option("--buffer-size", opts->buffer_size,
                  "AUX ring size in full-trace mode: power-of-two pages, e.g. 16M (default "
                  "128K without CAP_IPC_LOCK, as perf)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  CLI::Option* data_size = cmd->add_option("--data-size", opts->data_size,
                  "DATA (sideband) ring size: power-of-two pages, e.g. 512K (default 256K "
                  "without CAP_IPC_LOCK, as perf)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--timing", *timing,
                  "Timing preset: low (tsc, mtc, mtc_period=3), normal (+cyc, cyc_thresh=1, "
                  "psb_period=3), high (+mtc_period=0, noretcomp); fields the CPU lacks are left out")
      ->check(CLI::IsMember({"low", "normal", "high"}))
      ->capture_default_str();
  cmd->add_option("--pt-config", opts->pt_config,
                  "Expert intel_pt fields over the preset: key=value,... (names from "
                  "/sys/bus/event_source/devices/intel_pt/format)");
  cmd->add_flag("--kernel", opts->kernel, "Also trace the kernel (root or CAP_PERFMON)");
  cmd->add_option("--filter", opts->filter,
                  "Trace only there (filter) or stop there (stop): 'filter main', "
                  "'filter f@/usr/lib/libx.so', 'filter @/bin/prog' (all its code), "
                  "'filter 0x1130/0x40@/bin/prog'; comma-separated; names are resolved to "
                  "the numeric file-offset filters the kernel takes");
  cmd->add_option("--trigger", opts->trigger_symbol,
                  "Snapshot when this function runs (hardware breakpoint, every thread; "
                  "--emulate: a thread reaching it); NAME or NAME@LIBRARY");
  auto slower_than = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--trigger-slower-than", *slower_than,
                  "Snapshot when a call to SYMBOL returns more than DURATION after its entry "
                  "(e.g. handle_request 5ms; every thread); the trace holds that call")
      ->expected(2)
      ->type_name("SYMBOL DURATION");
  cmd->add_option("--trigger-after", opts->trigger_after,
                  "The Nth hit of the trigger fires (entries, or slow returns), counted over all threads")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text.find_first_not_of("0123456789") == std::string::npos && text.find_first_not_of('0') != std::string::npos
                       ? std::string()
                       : "must be a count of 1 or more (the Nth hit fires), not '" + text + "'";
          },
          "N"));
  cmd->add_flag("--trim", opts->trim,
                "Keep only the trace from the firing call's entry on (each stream from its last PSB at or before it; meta.json and info say so)");
  cmd->add_flag("--multi-snapshot", opts->multi_snapshot,
                "Keep recording after each --trigger snapshot");
  cmd->add_option("--control", opts->control_fifo,
                  "Control FIFO: write 'snapshot' or 'stop' lines; each is answered 'ack' in FIFO.ack");
  cmd->add_option("--duration", opts->duration_s, "Stop by itself after this many seconds")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--start-at", opts->start_at_symbol,
                  "Emulation: begin tracing when this function is reached (NAME or "
                  "NAME@LIBRARY; libraries loaded later too)");
  cmd->add_option("--ground-truth", opts->ground_truth_path,
                  "Emulation: write the executed IPs and call/return events here");
  cmd->add_option("--virtual-cpus", opts->virtual_cpus,
                  "Emulation: per-CPU mode with this many virtual CPUs (0: per thread)");
  cmd->add_option("--psb-period", opts->psb_period,
                  "Emulation: bytes between PSB+ packets")->capture_default_str();
  cmd->add_flag("--noretcomp", opts->noretcomp, "Emulation: no return compression");
  cmd->add_option("--emulate-overflow-every", opts->emulate_overflow_every,
                  "Emulation, robustness tests: inject an internal overflow (OVF) every this "
                  "many PT bytes of a stream, losing some instructions (per-thread mode)");
  cmd->add_flag("--quiet,-q", opts->quiet, "No status line or summary");
  cmd->add_option("command", opts->command, "Command to launch (after --)");
  cmd->callback([&ctx, opts, timing, time_axis, emulate, snapshot_size, buffer_size, data_size, slower_than]() {
    if (slower_than->size() == 2) {
      if (!opts->trigger_symbol.empty() && opts->trigger_symbol != (*slower_than)[0]) {
        ReportError(absl::InvalidArgumentError(
            "--trigger and --trigger-slower-than name different functions; give one of them"));
        ctx.exit_code = kExitRecordingFailed;
        return;
      }
      opts->trigger_symbol = (*slower_than)[0];
      opts->trigger_slower_than = (*slower_than)[1];
    }
    if (emulate->count() > 0) opts->emulate = true;
    opts->wall_clock = *time_axis == "wall";
    opts->default_ring_sizes =
        snapshot_size->count() == 0 && buffer_size->count() == 0 && data_size->count() == 0;
    static const std::map<std::string, TimingPreset> kPresets = {
        {"low", TimingPreset::kLow}, {"normal", TimingPreset::kNormal}, {"high", TimingPreset::kHigh}};
    opts->timing = kPresets.at(*timing);
    const auto record = [&opts]() -> int {
      absl::StatusOr<int> exit_code = RunRecord(*opts);
      if (exit_code.ok()) return *exit_code;
      ReportError(exit_code.status());
      return kExitRecordingFailed;
    };
    if (!opts->command.empty()) {
      ctx.exit_code = record();
      return;
    }
    // Attached (--pid, --cgroup): killing `record` must not harm the processes it traces.
    absl::StatusOr<int> exit_code = RunSupervised(record);
    if (exit_code.ok()) {
      ctx.exit_code = *exit_code;
    } else {
      ReportError(exit_code.status());
      ctx.exit_code = kExitRecordingFailed;
    }
  });
}

}  // namespace ptd::cli
