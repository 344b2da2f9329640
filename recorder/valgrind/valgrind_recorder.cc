#include "recorder/valgrind/valgrind_recorder.h"
#include "common/monotonic_clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "ptd/version.h"
#include "common/trace_dir.h"
#include "common/trace_meta.h"
#include "recorder/images/elf_symbol.h"
#include "recorder/images/jit_files.h"
#include "recorder/target/launch_signals.h"
#include "recorder/ptgen/emulated_pt_settings.h"
#include "recorder/session/emulation_control.h"
#include "recorder/ptgen/pt_stream_set.h"
#include "recorder/target/target_process.h"
#include "recorder/images/trace_archive.h"
#include "recorder/session/trigger_policy.h"
#include "recorder/valgrind/valgrind_install.h"
#include "recorder/valgrind/vgpt_converter.h"
#include "recorder/valgrind/vgpt_spool.h"

namespace ptd {
namespace {

// A working directory beside the trace directory (the tool's stream files), removed at
// the end: a tool instance that finds its stream unlinked, or no directory to open one
// in, lets its program run on untraced. Valgrind's library links live in the shared
// cache (SharedValgrindLibDir), where a program that outlives the recording finds them
// for its later execs; without a cache directory they go in the working directory,
// which then stays while the program runs.
constexpr char kSpoolSubdir[] = "stream";
constexpr char kLibSubdir[] = "lib";
// Once the program has exited, the processes it left running (daemons) are followed
// until they exit or the recording is stopped. A stream whose process is gone without
// an exit record (killed by SIGKILL), or a fork whose child has not begun its stream,
// is waited for until the streams have been quiet this long.
constexpr double kOrphanQuietSeconds = 2.0;

// Is `pid` still running (or not yet reaped)?
bool ProcessExists(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Working directories `work_dir_prefix`<pid> of recorders that were killed (SIGKILL leaves
// theirs: the stream files of processes that died with them): removed by the next
// recording to the same directory. A directory whose recorder still runs stays.
void RemoveWorkDirsOfKilledRecorders(const std::string& work_dir_prefix) {
  const std::filesystem::path prefix(work_dir_prefix);
  const std::string name_prefix = prefix.filename().string();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(prefix.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (!absl::StartsWith(name, name_prefix) || !absl::SimpleAtoi(name.substr(name_prefix.size()), &pid) ||
        pid <= 0 || ProcessExists(pid)) {
      continue;
    }
    (void)RemoveTree(entry.path().string());
  }
}
constexpr char kLogSubdir[] = "valgrind-log";


absl::Status CheckValgrindOptions(const RecordOptions& options) {
  if (!options.pids.empty() || !options.cgroup.empty()) {
    return absl::InvalidArgumentError(
        "record --emulate=valgrind: Valgrind cannot attach to a running process; "
        "use --emulate=ptrace with --pid or --cgroup");
  }
  if (options.command.empty()) {
    return absl::InvalidArgumentError("record --emulate=valgrind: give the command to run after --");
  }
  if (options.virtual_cpus > 0) {
    return absl::InvalidArgumentError(
        "record --emulate=valgrind: --virtual-cpus is a ptrace-emulation option (Valgrind runs one "
        "thread at a time; every thread gets its own stream)");
  }
  if (options.emulate_overflow_every > 0 || !options.ground_truth_path.empty() ||
      !options.start_at_symbol.empty()) {
    return absl::InvalidArgumentError(
        "record --emulate=valgrind: --emulate-overflow-every, --ground-truth and --start-at are "
        "ptrace-emulation options (use --emulate=ptrace)");
  }
  if (options.snapshot && options.snapshot_size < 4096) {
    return absl::InvalidArgumentError("record --emulate=valgrind: --snapshot-size must be at least 4096 bytes");
  }
  // A program that cannot be run fails here, naming it, as under the other backends (Valgrind
  // would say so on the program's stderr and leave an empty trace). One Valgrind cannot
  // run with its privileges (setuid) runs untraced: CommandValgrindCanStart.
  absl::StatusOr<std::string> exe = ResolveExecutable(options.command[0]);
  if (!exe.ok()) return exe.status();
  return absl::OkStatus();
}

// Where `symbol` lies in a newly mapped file, if there.
std::vector<uint64_t> TriggerAddressesIn(const Mmap2Record& map, const SymbolSpec& symbol) {
  if (!symbol.file_suffix.empty() && !absl::EndsWith(map.filename, symbol.file_suffix)) return {};
  absl::StatusOr<ElfSymbolAddress> found = FindElfFunction(map.filename, symbol.name);
  if (!found.ok()) return {};
  // The mapping shows file offset pgoff at addr; segments keep vaddr - offset constant.
  const uint64_t address = SymbolRuntimeAddress(*found, map.addr - map.pgoff);
  if (address < map.addr || address >= map.addr + map.len) return {};
  return {address};
}

absl::StatusOr<pid_t> Launch(const ValgrindInstall& install, const std::string& lib_dir,
                             const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoError("cannot create", "a pipe", errno);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return ErrnoError("cannot fork", argv[0], errno);
  if (pid == 0) {
    close(report[0]);
    // Killed with the recorder, as the ptrace backend's target is (PTRACE_O_EXITKILL): a
    // launched program does not go on untraced (docs/cli.md, "Exit status and signals").
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    setenv("VALGRIND_LIB", lib_dir.c_str(), 1);
    RestoreStartupSignalState();
    execv(install.launcher.c_str(), args.data());
    const int err = errno;
    (void)!write(report[1], &err, sizeof(err));
    _exit(127);
  }
  close(report[1]);
  int err = 0;
  const ssize_t n = read(report[0], &err, sizeof(err));
  close(report[0]);
  if (n == sizeof(err)) {
    waitpid(pid, nullptr, 0);
    return ErrnoError("cannot run", install.launcher, err);
  }
  return pid;
}

// The recording loop's outcome.
struct RunResult {
  std::string end_reason = "exit";
  int exit_status = -1;  // waitpid status of Valgrind (the program's), -1 if still running
  std::vector<EmulationRequest> fifo_stops;
  std::vector<std::string> notes;
  const TriggerPolicy* trigger = nullptr;
  double seconds = 0;
};

// Feeds the tool's streams to the converter until the program has exited (and children
// it left went quiet) or a stop was asked for, serving snapshot requests in between.
absl::Status Run(pid_t valgrind, EmulationControl& control, VgptSpool& spool, VgptConverter& converter,
                 const std::string& stop_file, bool quiet, bool follow_children, bool* trigger_stop, RunResult* result) {
  const double start = MonotonicSeconds();
  double quiet_since = -1;
  bool told_of_daemons = false;
  for (;;) {
    absl::StatusOr<bool> progress = spool.Poll();
    if (!progress.ok()) return progress.status();
    if (*trigger_stop) {
      result->end_reason = "trigger";
      break;
    }
    bool stop = false;
    if (control.pending()->load(std::memory_order_relaxed)) {
      for (const EmulationRequest& request : control.Take()) {
        switch (request.kind) {
          case EmulationRequest::Kind::kSnapshot:
            control.Answer(request, converter.Snapshot(request.reason));
            break;
          case EmulationRequest::Kind::kStop:
            if (request.from_fifo) result->fifo_stops.push_back(request);
            result->end_reason = request.reason;
            stop = true;
            break;
          case EmulationRequest::Kind::kUnknownCommand:
            result->notes.push_back(absl::StrCat("control: unknown command \"", request.text, "\""));
            control.Answer(request, absl::InvalidArgumentError(absl::StrCat(
                                        "unknown command \"", request.text, "\" (want snapshot or stop)")));
            break;
        }
      }
    }
    if (stop) break;
    if (*progress) {
      quiet_since = -1;
      continue;
    }
    if (result->exit_status < 0) {
      int status = 0;
      if (waitpid(valgrind, &status, WNOHANG) == valgrind) result->exit_status = status;
    }
    if (result->exit_status >= 0) {
      // A forked child's stream appears once the child first runs: until every fork
      // the parents announced has its child's stream, one may still come (a daemon's
      // grandchild whose parent has already exited). A fork that failed has no child:
      // the quiet period below ends that wait.
      const VgptConverterStats& stats = converter.stats();
      const bool children_pending = follow_children && stats.forks < stats.forks_begun;
      if (spool.AllExited() && !children_pending) break;
      const std::vector<int> unended = spool.UnendedPids();
      int running = 0;
      for (int pid : unended) running += ProcessExists(pid) ? 1 : 0;
      if (running > 0) {
        quiet_since = -1;
        if (!told_of_daemons && !quiet) {
          told_of_daemons = true;
          fprintf(stderr,
                  "ptrace-direct: the program has exited; following the %d process(es) it left running "
                  "until they exit (Ctrl-C stops the recording)\n",
                  running);
        }
      } else {
        if (quiet_since < 0) quiet_since = MonotonicSeconds();
        if (MonotonicSeconds() - quiet_since > kOrphanQuietSeconds) break;
      }
    }
    usleep(300);
  }
  // The tool instances still running stop writing at their next flush; the program goes
  // on untraced.
  if (result->exit_status < 0) {
    if (absl::Status s = WriteFileAtomic(stop_file, std::string_view("stop\n")); !s.ok()) {
      result->notes.push_back(absl::StrCat("could not tell the Valgrind tool to stop: ", s.message()));
    }
  }
  absl::Status drained = spool.Drain();
  result->seconds = MonotonicSeconds() - start;
  return drained;
}

// Picoseconds per instruction of a simple dependent loop (add, dec, jnz) run natively
// here: the yardstick `info` holds the emulated rate against (real code runs at another
// rate; this says about how much the emulator slows CPU work). The fastest of 3 runs of
// ~3 ms (a loaded machine preempts some).
uint64_t NativePsPerInstruction() {
  constexpr uint64_t kIterations = 4'000'000;
  constexpr uint64_t kInstructionsPerIteration = 3;
  uint64_t best = UINT64_MAX;
  for (int run = 0; run < 3; ++run) {
    uint64_t count = kIterations;
    uint64_t sum = 0;
    const uint64_t start = MonotonicNs();
    asm volatile("1:\n\tadd $1, %0\n\tdec %1\n\tjnz 1b" : "+r"(sum), "+r"(count) : : "cc");
    best = std::min(best, MonotonicNs() - start);
  }
  return best * 1000 / (kIterations * kInstructionsPerIteration);
}

void DescribeRun(const RecordOptions& options, const VgptConverter& converter, const RunResult& run,
                 uint64_t stream_bytes, TraceMeta* meta) {
  meta->tool_version = kToolVersion;
  // The host ran the program, but the CPU it "ran on" is Valgrind's: no errata apply
  // (decode never applies them to emulated traces).
  meta->host = ReadHostInfo();
  meta->emulator = "valgrind";
  meta->time_axis = options.wall_clock ? "wall" : "virtual";
  meta->command = options.command;
  meta->end_reason = run.end_reason;
  if (run.exit_status >= 0) {
    meta->notes.push_back(absl::StrCat("target process ", DescribeWaitStatus(run.exit_status)));
    if (WIFSIGNALED(run.exit_status) && meta->end_reason == "exit") meta->end_reason = "target_killed";
  } else {
    meta->notes.push_back("recording stopped while the program ran; it goes on under Valgrind, untraced");
  }
  const VgptConverterStats& s = converter.stats();
  if (s.work_instructions > 0) {
    meta->emulated_ps_per_instruction = std::max<uint64_t>(1, s.work_ns * 1000 / s.work_instructions);
    meta->native_ps_per_instruction = std::max<uint64_t>(1, NativePsPerInstruction());
  }
  if (s.cut_short > 0 && run.exit_status >= 0 && WIFEXITED(run.exit_status)) {
    // The program ended normally, yet a stream ended before it: the tool could not write.
    meta->partial = true;
    meta->partial_reason = absl::StrFormat(
        "the Valgrind tool could not write its stream for %u process(es) (disk full, or a file size "
        "limit): their trace ends where the stream does",
        s.cut_short);
    meta->notes.push_back(meta->partial_reason);
  }
  meta->notes.push_back(absl::StrFormat(
      "emulated with Valgrind (ptdtrace): %u blocks, %u instructions, %u processes, %u threads, "
      "%u signals, %.2f s (%.1f M instructions/s), %.0f MB of tool stream",
      s.blocks, s.instructions, s.processes, s.threads, s.signals, run.seconds,
      run.seconds > 0 ? static_cast<double>(s.instructions) / run.seconds / 1e6 : 0.0,
      static_cast<double>(stream_bytes) / 1e6));
  if (!options.wall_clock) {
    meta->notes.push_back(
        "time axis: virtual, one ns per retired instruction per process (a forked child starts at "
        "its parent's fork); record with --time=wall for the wall clock");
  }
  if (s.unknown_blocks > 0 || s.bad_records > 0) {
    meta->notes.push_back(absl::StrFormat(
        "tool stream: %u executions of undescribed blocks and %u bad records were skipped",
        s.unknown_blocks, s.bad_records));
  }
  if (run.trigger != nullptr && !run.trigger->spec().symbol.empty()) meta->notes.push_back(run.trigger->Describe(0));
  meta->notes.insert(meta->notes.end(), run.notes.begin(), run.notes.end());
}

// Would Valgrind refuse to run `command`'s program (setuid, setgid, file capabilities:
// the tests of its VG_(check_executable))? Then a shell runs it, and the tool lets that
// exec run untraced (ptdtrace's pre_syscall), as it does any such child: the program
// behaves as without the tool, and the trace says it ran untraced.
std::vector<std::string> CommandValgrindCanStart(const std::vector<std::string>& command) {
  absl::StatusOr<std::string> exe = ResolveExecutable(command[0]);
  struct stat st;
  if (!exe.ok() || stat(exe->c_str(), &st) != 0) return command;  // Valgrind's own error
  const bool privileged = (st.st_mode & (S_ISUID | S_ISGID)) != 0 ||
                          getxattr(exe->c_str(), "security.capability", nullptr, 0) >= 0;
  if (!privileged) return command;
  std::vector<std::string> via_shell = {"/bin/sh", "-c", "exec \"$0\" \"$@\""};
  via_shell.insert(via_shell.end(), command.begin(), command.end());
  return via_shell;
}

// Valgrind's own messages (an unhandled system call, a client error it caught), from
// the per-process logs in `log_dir`: each distinct message once, without Valgrind's
// "==PID==" / "--PID--" prefixes and its boilerplate (where to report bugs).
std::vector<std::string> ValgrindMessages(const std::string& log_dir) {
  std::vector<std::string> messages;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir, ec)) {
    absl::StatusOr<std::string> text = ReadFileToString(entry.path().string());
    if (!text.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (line.size() > 2 && (line[0] == '=' || line[0] == '-') && line[1] == line[0]) {
        const size_t end = line.find(line.substr(0, 2), 2);
        if (end != absl::string_view::npos) line.remove_prefix(end + 2);
      }
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || absl::StrContains(line, "You may be able to write your own handler") ||
          absl::StrContains(line, "README_MISSING_SYSCALL_OR_IOCTL") ||
          absl::StrContains(line, "Nevertheless we consider this a bug") ||
          absl::StrContains(line, "valgrind.org/support/bug_reports")) {
        continue;
      }
      if (std::find(messages.begin(), messages.end(), line) == messages.end()) messages.emplace_back(line);
    }
  }
  return messages;
}

}  // namespace

bool ValgrindAvailable(std::string* why) {
  absl::StatusOr<ValgrindInstall> install = FindValgrind();
  if (!install.ok() && why != nullptr) *why = std::string(install.status().message());
  return install.ok();
}

absl::StatusOr<EmulatedRecordSummary> RecordValgrind(const RecordOptions& options) {
  if (absl::Status s = CheckValgrindOptions(options); !s.ok()) return s;
  absl::StatusOr<TriggerSpec> trigger_spec = TriggerSpecOf(options);
  if (!trigger_spec.ok()) return trigger_spec.status();
  if (absl::Status s = CheckTriggerSymbol(options, *trigger_spec); !s.ok()) return s;
  absl::StatusOr<ValgrindInstall> install = FindValgrind();
  if (!install.ok()) return install.status();
  absl::StatusOr<TraceDirWriter> dir = TraceDirWriter::Create(options.output_dir, options.force);
  if (!dir.ok()) return dir.status();
  // Absolute: the program gets these paths (VALGRIND_LIB, the tool's output directory)
  // and may change its working directory before it forks or execs.
  std::error_code cwd_error;
  // <dir>.valgrind-<pid>: the prefix also finds killed recorders' directories.
  const std::string work_dir_prefix =
      std::filesystem::absolute(absl::StrCat(dir->final_dir(), ".valgrind-"), cwd_error).lexically_normal().string();
  const std::string work_dir = absl::StrCat(work_dir_prefix, getpid());
  if (cwd_error) return absl::InternalError(absl::StrCat("cannot find the working directory: ", cwd_error.message()));
  const std::string spool_dir = absl::StrCat(work_dir, "/", kSpoolSubdir);
  (void)RemoveTree(work_dir);
  RemoveWorkDirsOfKilledRecorders(work_dir_prefix);
  if (absl::Status s = MakeDirs(spool_dir); !s.ok()) return s;
  const std::string cache_dir = options.archive_cache_dir.empty() ? DefaultArchiveCacheDir() : options.archive_cache_dir;
  std::string lib_dir;
  if (!cache_dir.empty()) {
    absl::StatusOr<std::string> shared = SharedValgrindLibDir(*install, cache_dir);
    if (shared.ok()) lib_dir = *shared;
  }
  const bool lib_in_work_dir = lib_dir.empty();
  if (lib_in_work_dir) {
    lib_dir = absl::StrCat(work_dir, "/", kLibSubdir);
    if (absl::Status s = MakeDirs(lib_dir); !s.ok()) return s;
    if (absl::Status s = MakeValgrindLibDir(*install, lib_dir); !s.ok()) return s;
  }
  // Valgrind's own messages go to per-process logs, never the program's stderr. Beside
  // the links: a program that outlives the recording still finds the directory when it
  // execs (Valgrind refuses to start without its log file).
  const std::string log_dir =
      lib_in_work_dir ? absl::StrCat(work_dir, "/", kLogSubdir)
                      : std::filesystem::absolute(absl::StrCat(cache_dir, "/", kLogSubdir, "/", getpid()), cwd_error)
                            .lexically_normal()
                            .string();
  (void)RemoveTree(log_dir);
  if (absl::Status s = MakeDirs(log_dir); !s.ok()) return s;

  PtStreamSetOptions stream_options = EmulatedStreamOptions(options);
  stream_options.trim_marks = trigger_spec->trim;
  PtStreamSet streams(stream_options, &*dir);
  VgptConverterOptions converter_options;
  converter_options.wall_clock = options.wall_clock;
  bool trigger_stop = false;
  RunResult run;
  VgptConverter* converter_ptr = nullptr;
  TriggerPolicy trigger(*trigger_spec);
  run.trigger = &trigger;
  auto fire = [&](const TriggerFiring&) {
    if (options.multi_snapshot) {
      if (absl::Status s = converter_ptr->Snapshot("trigger"); !s.ok()) {
        run.notes.push_back(absl::StrCat("trigger snapshot: ", s.message()));
      }
    } else {
      trigger_stop = true;
      converter_ptr->Stop();
    }
  };
  if (!trigger_spec->symbol.empty()) {
    const SymbolSpec symbol = ParseSymbolSpec(trigger_spec->symbol);
    converter_options.trigger_addresses = [symbol](const Mmap2Record& map) { return TriggerAddressesIn(map, symbol); };
    converter_options.on_trigger = [&](int pid, int tid, uint64_t, uint64_t stack_key, uint64_t time) {
      if (std::optional<TriggerFiring> fired = trigger.OnEntry(pid, tid, stack_key, time)) fire(*fired);
    };
    if (trigger.watches_returns()) {
      converter_options.on_return = [&](int, int tid, uint64_t stack_key, uint64_t time) {
        if (std::optional<TriggerFiring> fired = trigger.OnStack(tid, stack_key, time)) fire(*fired);
      };
    }
  }
  // The files are pinned as the tool reports each mapping, while the program runs: when
  // recording ends the processes are gone (no /proc/PID/map_files) and a path may name
  // another file by then (a rebuilt binary, a package upgrade).
  MappedFilePins pins;
  converter_options.on_map = [&pins](const Mmap2Record& map) { pins.Pin(map); };
  VgptConverter converter(converter_options, &streams, &*dir);
  converter_ptr = &converter;
  VgptSpool spool(spool_dir, &converter);

  absl::StatusOr<std::unique_ptr<EmulationControl>> control =
      EmulationControl::Start(options.control_fifo, options.duration_s);
  if (!control.ok()) return control.status();
  ValgrindRunOptions run_options;
  run_options.out_dir = spool_dir;
  run_options.log_file = absl::StrCat(log_dir, "/%p");
  run_options.recorder_pid = getpid();
  run_options.follow_children = options.follow_children;
  absl::StatusOr<pid_t> valgrind =
      Launch(*install, lib_dir, ValgrindCommand(*install, run_options, CommandValgrindCanStart(options.command)));
  if (!valgrind.ok()) return valgrind.status();
  if (!options.quiet) {
    fprintf(stderr, "ptrace-direct: recording %s under Valgrind (pid %d)\n", options.command[0].c_str(), *valgrind);
  }
  absl::Status run_status =
      Run(*valgrind, **control, spool, converter, absl::StrCat(spool_dir, "/stop"), options.quiet,
          options.follow_children, &trigger_stop,
          &run);
  // Stopped before the program ended (Ctrl-C, SIGTERM, --duration, the FIFO, --trigger): it
  // does not go on untraced, as perf record's workload does not (docs/cli.md).
  const bool stopped_early = run.exit_status < 0;
  if (stopped_early) run.exit_status = TerminateChild(*valgrind);

  TraceMeta meta;
  streams.set_end_reason(run.end_reason);
  meta.trigger = TriggerPointOf(trigger);
  if (meta.trigger && trigger_spec->trim) {
    streams.TrimFrom(meta.trigger->entry_ns);
    meta.trigger->trimmed_from_ns = meta.trigger->entry_ns;
  }
  absl::Status finished = converter.Finish(&meta);
  // Said once: the notes name each program left out.
  if (const std::vector<UntracedExec>& untraced = converter.untraced_execs(); !untraced.empty()) {
    fprintf(stderr, "ptrace-direct: %s (pid %d) ran untraced: %s%s\n", untraced.front().program.c_str(),
            untraced.front().pid, untraced.front().reason.c_str(),
            untraced.size() > 1 ? absl::StrFormat(" (and %d more programs: ptrace-direct info %s)",
                                                  untraced.size() - 1, options.output_dir)
                                      .c_str()
                                : "");
  }
  DescribeEmulatedPt(options, stream_options, &meta);
  DescribeRun(options, converter, run, spool.bytes_read(), &meta);
  meta.pids = {static_cast<int>(*valgrind)};
  meta.end_ns = converter.newest_time() + 1;
  ArchiveMappedFiles(*dir, {options.archive, options.archive_cache_dir, &pins, options.debuginfod}, &meta);
  ArchiveJitFiles(*dir, &meta);
  if (!run_status.ok()) meta.notes.push_back(absl::StrCat("reading the tool's stream: ", run_status.message()));
  // Valgrind's messages went to its logs, not the program's stderr: what they say is one
  // message of the recorder's, and notes in the trace.
  const std::vector<std::string> valgrind_messages = ValgrindMessages(log_dir);
  for (const std::string& m : valgrind_messages) meta.notes.push_back(absl::StrCat("Valgrind: ", m));
  if (!valgrind_messages.empty()) {
    fprintf(stderr, "ptrace-direct: Valgrind said: %s%s\n", valgrind_messages.front().c_str(),
            valgrind_messages.size() > 1
                ? absl::StrFormat(" (and %d more messages: ptrace-direct info %s)", valgrind_messages.size() - 1,
                                  options.output_dir).c_str()
                : "");
  }
  if (run.exit_status >= 0) (void)RemoveTree(log_dir);
  if (run.exit_status >= 0 || !lib_in_work_dir) {
    (void)RemoveTree(work_dir);
  } else {
    (void)RemoveTree(spool_dir);
    meta.notes.push_back(absl::StrCat("the program still runs under Valgrind: ", work_dir,
                                      " holds the links Valgrind needs (no cache directory: set PTD_CACHE_DIR "
                                      "or HOME); remove it once the program is done"));
  }

  if (!finished.ok()) {
    if (absl::Status kept = dir->CommitPartial(meta, finished); !kept.ok()) {
      return absl::Status(finished.code(), absl::StrCat(finished.message(), "; ", kept.message()));
    }
    return absl::Status(finished.code(), absl::StrCat(finished.message(), "; what was written is kept in ",
                                                      options.output_dir, " (marked partial)"));
  }
  absl::Status committed = dir->Commit(meta);
  for (const EmulationRequest& request : run.fifo_stops) (*control)->Answer(request, committed);
  if (!committed.ok()) return committed;

  EmulatedRecordSummary summary;
  summary.trace_dir = options.output_dir;
  summary.instructions = converter.stats().instructions;
  summary.steps = converter.stats().blocks;
  summary.pt_bytes = streams.stats().bytes;
  summary.threads = converter.stats().threads;
  summary.signals_delivered = converter.stats().signals;
  summary.snapshots = streams.stats().snapshots;
  summary.trigger_hits = trigger.entries();
  summary.seconds = run.seconds;
  summary.end_reason = meta.end_reason;  // target_killed when the program died of a signal
  if (run.exit_status >= 0 && !stopped_early) summary.exit_status = ShellExitCode(run.exit_status);
  return summary;
}

}  // namespace ptd
