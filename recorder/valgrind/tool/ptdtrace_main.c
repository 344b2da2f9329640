/* ptdtrace: the Valgrind tool behind `ptrace-direct record --emulate=valgrind`.

   It reports the control flow the program executed, in the form the recorder needs to
   write the Intel PT packets hardware would have written (vgpt_stream.h): one word per
   executed superblock (stored inline by the instrumented code, no helper call), a
   description of each superblock when it is translated, and control records for thread
   switches, signals, memory mappings, forks, execs and exit. Everything goes into a
   1 MiB buffer that is written to this instance's file in the output directory when
   full, before a fork or exec, at syscalls once it holds 64 KiB, and at exit; the
   recorder reads the files while they grow and does all the packet work on its own
   thread. The tool keeps no state per instruction: the per-block work is six IR
   statements and a guarded call that runs once per --ptd-stamp-blocks blocks (a clock read:
   the wall clock's stamps) and writes the buffer once per 256 Ki blocks.

   Options: --ptd-out=DIR (required): where the stream files go, one per instance,
   named <pid>-<n>.vgpt; --ptd-follow-forks=no: forked children run untraced;
   --ptd-stamp-blocks=N: a wall time stamp every N blocks (1024; 0: at flushes only).

   Its parts: ptdtrace_stream.c (the buffer and the stream file), ptdtrace_instrument.c
   (superblocks), and this file (the core's events: memory, threads, signals, system calls,
   forks and execs; the options, start and end). */
#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_transtab.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

#include "vgpt_stream.h"
#include "ptdtrace.h"

/* Likewise: the core's guard against discarding translations from inside a translation.
   A fork's child callback runs in the scheduler, between translations, as client
   requests do (the one place the core sets it). */
extern Bool VG_(ok_to_discard_translations);
/* Likewise: --trace-children, which the core's execve wrapper reads after the tool's
   pre-syscall hook; and the core's own test of an executable, which refuses setuid,
   setgid and file-capability programs unless they are to run untraced. */
extern Bool VG_(clo_trace_children);
extern Int VG_(check_executable)(/*OUT*/ Bool* is_setuid, const HChar* f, Bool allow_setuid);

static UInt fork_seq = 0;          /* forks started by this process */
static Bool is_fork_child = False;
static ThreadId last_tid = VG_INVALID_THREADID;
#define MAX_TIDS 4096 /* Valgrind's ThreadIds are small (--max-threads, 500 by default) */
static Int os_tid_of[MAX_TIDS];
static Bool alive[MAX_TIDS];

/* ---- memory map ---------------------------------------------------------- */

static Bool is_valgrinds_file(const HChar* name) {
  /* Its preload libraries, and this tool's own executable (Valgrind's trampoline page
     lies in it). */
  static const HChar tool_file[] = "/ptdtrace-amd64-linux";
  const SizeT len = VG_(strlen)(name), tool_len = sizeof(tool_file) - 1;
  if (len >= tool_len && VG_(strcmp)(name + len - tool_len, tool_file) == 0) return True;
  return VG_(strstr)(name, "/vgpreload_") != NULL;
}

/* Is `a` in code that Valgrind, not the program, brought into the process? */
Bool is_valgrinds_code(Addr a) {
  NSegment const* seg = VG_(am_find_nsegment)(a);
  if (seg == NULL || seg->kind != SkFileC) return False;
  const HChar* fn = VG_(am_get_filename)(seg);
  return fn != NULL && is_valgrinds_file(fn);
}

static void put_map(Addr a, SizeT len, Bool rr, Bool ww, Bool xx, UInt flags) {
  NSegment const* seg = VG_(am_find_nsegment)(a);
  const HChar* name = "";
  ULong offset = 0, dev = 0, ino = 0;
  if (seg != NULL && seg->kind == SkFileC) {
    const HChar* fn = VG_(am_get_filename)(seg);
    if (fn != NULL) name = fn;
    offset = seg->offset + (a - seg->start);
    dev = seg->dev;
    ino = seg->ino;
  }
  /* Valgrind's preload library is the emulator's, not the program's: its code is hidden
     from the trace (VGPT_BLOCK_HIDDEN), and the program's maps do not show it. */
  if (is_valgrinds_file(name)) return;
  begin(VGPT_MAP, 12 + string_words(name));
  put64(a);
  put64(len);
  put64(offset);
  put32((rr ? 1 : 0) | (ww ? 2 : 0) | (xx ? 4 : 0));
  put32(flags);
  put64(dev);
  put64(ino);
  put_string(name);
}

static void on_new_mem_startup(Addr a, SizeT len, Bool rr, Bool ww, Bool xx, ULong di) {
  (void)di;
  put_map(a, len, rr, ww, xx, VGPT_MAP_STARTUP);
}

static void on_new_mem_mmap(Addr a, SizeT len, Bool rr, Bool ww, Bool xx, ULong di) {
  (void)di;
  put_map(a, len, rr, ww, xx, 0);
}

static void on_mprotect(Addr a, SizeT len, Bool rr, Bool ww, Bool xx) {
  put_map(a, len, rr, ww, xx, 0);
}

static void on_munmap(Addr a, SizeT len) {
  begin(VGPT_UNMAP, 4);
  put64(a);
  put64(len);
}

static void on_remap(Addr from, Addr to, SizeT len) {
  on_munmap(from, len);
  NSegment const* seg = VG_(am_find_nsegment)(to);
  put_map(to, len, seg && seg->hasR, seg && seg->hasW, seg && seg->hasX, 0);
}

/* The [vdso]: anonymous, but dumped whole (not JIT code). */
static Addr vdso_start = 0, vdso_end = 0;

/* Does the block at `a` run from memory no file backs (JIT code)? Its bytes go to the
   recorder, which captures them for the decoder. */
Bool is_jit_code(Addr a) {
  NSegment const* seg = VG_(am_find_nsegment)(a);
  if (seg == NULL || (a >= vdso_start && a < vdso_end)) return False;
  if (seg->kind == SkFileC) return seg->hasW;
  return seg->kind == SkAnonC || seg->kind == SkShmC;
}

/* The [vdso] has no file: send its bytes (an ELF image) for the decoder. */
static void dump_vdso(void) {
  Addr starts[512];
  Int n = VG_(am_get_segment_starts)(SkAnonC, starts, 512);
  for (Int i = 0; i < n; ++i) {
    NSegment const* seg = VG_(am_find_nsegment)(starts[i]);
    if (seg == NULL || !seg->hasX || !seg->hasR) continue;
    SizeT size = seg->end - seg->start + 1;
    const UChar* p = (const UChar*)seg->start;
    if (size > 64 * 1024 || p[0] != 0x7f || p[1] != 'E' || p[2] != 'L' || p[3] != 'F') continue;
    vdso_start = seg->start;
    vdso_end = seg->end + 1;
    begin(VGPT_DUMP, 3 + string_words("[vdso]") + (size + 3) / 4);
    put64(seg->start);
    put32((UInt)size);
    put_string("[vdso]");
    put_bytes(p, size);
  }
}

/* ---- threads and signals --------------------------------------------------- */

static void on_start_client_code(ThreadId tid, ULong blocks) {
  (void)blocks;
  tl_assert(tid < MAX_TIDS);
  os_tid_of[tid] = VG_(gettid)();
  alive[tid] = True;
  if (tid == last_tid) return;
  begin(VGPT_SWITCH, 4);
  put32((UInt)os_tid_of[tid]);
  if (last_tid != VG_INVALID_THREADID && alive[last_tid]) {
    put32((UInt)os_tid_of[last_tid]);
    put64(VG_(get_IP)(last_tid));
  } else {
    put32(0);
    put64(0);
  }
  last_tid = tid;
}

static void on_thread_exit(ThreadId tid) {
  begin(VGPT_THREAD_EXIT, 1);
  put32((UInt)os_tid_of[tid]);
  alive[tid] = False;
  if (tid == last_tid) last_tid = VG_INVALID_THREADID;
}

static void on_pre_deliver_signal(ThreadId tid, Int sig, Bool alt_stack) {
  (void)alt_stack;
  begin(VGPT_SIGNAL, 4);
  put32((UInt)(tid < MAX_TIDS && os_tid_of[tid] ? os_tid_of[tid] : VG_(gettid)()));
  put32((UInt)sig);
  put64(VG_(get_IP)(tid));
}

/* ---- syscalls, fork, exec -------------------------------------------------- */

static ULong syscall_entry_ns[MAX_TIDS]; /* when each thread's current system call began */
static ULong syscall_entry_cpu_ns[MAX_TIDS]; /* and its CPU time then */

/* Set while an execve the tool let run untraced is under way: the core's flag is
   restored if the exec fails. */
static Bool untraced_exec_pending = False;

/* Does Valgrind refuse to run `path` (setuid, setgid, file capabilities)? The core's own
   test, so the two never disagree. */
static Bool valgrind_refuses_to_run(const HChar* path) {
  Bool is_setuid = False;
  (void)VG_(check_executable)(&is_setuid, path, /*allow_setuid=*/False);
  return is_setuid;
}

static void pre_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nargs) {
  (void)nargs;
  if (sysno == __NR_execve || sysno == __NR_execveat) {
    const HChar* path = (const HChar*)args[sysno == __NR_execve ? 0 : 1];
    if (path == NULL || !VG_(am_is_valid_for_client)((Addr)path, 1, VKI_PROT_READ)) path = "";
    /* execveat with a relative path names a file under its dirfd: the core resolves it,
       the test here would look in the wrong place. */
    const Bool path_is_the_file = sysno == __NR_execve || path[0] == '/' || (Int)args[0] == VKI_AT_FDCWD;
    if (VG_(clo_trace_children) && path[0] != 0 && path_is_the_file && valgrind_refuses_to_run(path)) {
      /* Valgrind cannot run it, but runs untraced what it does not follow: the program
         behaves as without the tool, and the trace says what was left out. */
      begin(VGPT_EXEC_UNTRACED, 1 + string_words(path));
      put32(VGPT_UNTRACED_PRIVILEGED);
      put_string(path);
      flush();
      VG_(clo_trace_children) = False;
      untraced_exec_pending = True;
      return;
    }
    begin(VGPT_EXEC, string_words(path));
    put_string(path);
    flush();
  } else if (buf_pos - buf >= FLUSH_AT_SYSCALL_WORDS) {
    /* Keep what a SIGKILL would lose small. */
    flush();
  }
  /* Last: the time spent in the call, not in writing our stream. */
  if (tid < MAX_TIDS) {
    syscall_entry_cpu_ns[tid] = clock_ns(VKI_CLOCK_THREAD_CPUTIME_ID);
    syscall_entry_ns[tid] = monotonic_ns();
  }
}

/* The time the call took: the recorder's clocks charge it (a sleep lasts as long as it
   slept), not a fixed cost. */
static void post_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nargs, SysRes res) {
  (void)args;
  (void)nargs;
  (void)res;
  if ((sysno == __NR_execve || sysno == __NR_execveat) && untraced_exec_pending) {
    /* The exec failed (success never returns here): children are followed again, and the
       recorder learns at once that this program goes on (it stops reading a stream that
       ends with an untraced exec). */
    VG_(clo_trace_children) = True;
    untraced_exec_pending = False;
    begin(VGPT_NOTE, 3);
    put32((UInt)(tid < MAX_TIDS && os_tid_of[tid] ? os_tid_of[tid] : VG_(gettid)()));
    put64(VG_(get_IP)(tid));
    flush();
  }
  if (tid >= MAX_TIDS || syscall_entry_ns[tid] == 0) return;
  const ULong exit_ns = monotonic_ns();
  const ULong cpu_ns = clock_ns(VKI_CLOCK_THREAD_CPUTIME_ID) - syscall_entry_cpu_ns[tid];
  begin(VGPT_SYSCALL_TIME, 8);
  put32((UInt)VG_(gettid)());
  put32(sysno);
  put64(syscall_entry_ns[tid]);
  put64(exit_ns);
  put64(cpu_ns);
  syscall_entry_ns[tid] = 0;
}

static void pre_fork(ThreadId tid) {
  (void)tid;
  ++fork_seq;
  hello_parent_pid = VG_(getpid)(); /* the child's copy names its parent */
  begin(VGPT_FORKING, 1);
  put32(fork_seq);
  flush();
}

static void parent_fork(ThreadId tid) {
  (void)tid;
  /* The child's pid is not known here; the child names its parent instead. */
}

static void child_fork(ThreadId tid) {
  if (write_failed) return; /* untraced already: so is the child */
  if (!clo_follow_forks) {
    /* Not followed: the child runs untraced (its parent's file is not its own). */
    out_fd = -1;
    write_failed = True;
    buf_pos = buf;
    stamp_limit = next_stamp_limit(buf);
    return;
  }
  /* A new process: its own file. Its translations were made (and described) in the
     parent's stream, so they are dropped and made again, described in this one. */
  buf_pos = buf;
  stamp_limit = next_stamp_limit(buf);
  out_fd = -1;
  write_failed = False;
  is_fork_child = True;
  hello_fork_seq = fork_seq;
  hello_parent_instance = out_instance;
  fork_seq = 0;
  last_tid = VG_INVALID_THREADID;
  for (Int i = 0; i < MAX_TIDS; ++i) alive[i] = False;
  open_output();
  put_hello(VGPT_HELLO_FORK_CHILD);
  VG_(ok_to_discard_translations) = True;
  VG_(discard_translations_safely)(0, ~(SizeT)0, "ptdtrace fork");
  VG_(ok_to_discard_translations) = False;
  (void)tid;
}

/* ---- start and end ----------------------------------------------------------- */

static Bool process_cmd_line_option(const HChar* arg) {
  if (VG_STR_CLO(arg, "--ptd-out", clo_out_dir)) {
  } else if (VG_BOOL_CLO(arg, "--ptd-follow-forks", clo_follow_forks)) {
  } else if (VG_INT_CLO(arg, "--ptd-recorder-pid", clo_recorder_pid)) {
  } else if (VG_INT_CLO(arg, "--ptd-stamp-blocks", clo_stamp_blocks)) {
  } else {
    return False;
  }
  return True;
}

static void print_usage(void) {
  VG_(printf)("    --ptd-out=DIR             where to write the stream files (required)\n");
  VG_(printf)("    --ptd-follow-forks=no|yes trace forked children too [yes]\n");
  VG_(printf)("    --ptd-recorder-pid=PID    stop tracing (and drop the stream) once PID is gone\n");
  VG_(printf)("    --ptd-stamp-blocks=N      stamp the wall time every N blocks [1024] (0: at flushes only)\n");
}

static void print_debug_usage(void) { VG_(printf)("    (none)\n"); }

static void post_clo_init(void) {
  if (clo_out_dir == NULL) {
    VG_(fmsg)("ptdtrace: --ptd-out=DIR is required (ptrace-direct passes it)\n");
    VG_(exit)(1);
  }
  /* Records made before this (the loader's mappings) are in the buffer already. */
  UInt saved = (UInt)(buf_pos - buf);
  UInt early[4096];
  tl_assert(saved <= 4096);
  VG_(memcpy)(early, buf, saved * sizeof(UInt));
  buf_pos = buf;
  open_output();
  put_hello(VGPT_HELLO_STARTUP);
  reserve(saved);
  VG_(memcpy)(buf_pos, early, saved * sizeof(UInt));
  buf_pos += saved;
  dump_vdso();
  stamp_limit = next_stamp_limit(buf_pos);
}

static void fini(Int exitcode) {
  begin(VGPT_EXIT, 1);
  put32((UInt)exitcode);
  flush();
  if (out_fd >= 0) VG_(close)(out_fd);
  out_fd = -1;
}

static void pre_clo_init(void) {
  VG_(details_name)("ptdtrace");
  VG_(details_version)("1");
  VG_(details_description)("ptrace-direct's control-flow recorder");
  VG_(details_copyright_author)("ptrace-direct authors");
  VG_(details_bug_reports_to)("the ptrace-direct project");
  VG_(details_avg_translation_sizeB)(200);

  VG_(basic_tool_funcs)(post_clo_init, instrument, fini);
  VG_(needs_command_line_options)(process_cmd_line_option, print_usage, print_debug_usage);
  VG_(needs_syscall_wrapper)(pre_syscall, post_syscall);

  VG_(track_new_mem_startup)(on_new_mem_startup);
  VG_(track_new_mem_mmap)(on_new_mem_mmap);
  VG_(track_change_mem_mprotect)(on_mprotect);
  VG_(track_die_mem_munmap)(on_munmap);
  VG_(track_copy_mem_remap)(on_remap);
  VG_(track_start_client_code)(on_start_client_code);
  VG_(track_pre_thread_ll_exit)(on_thread_exit);
  VG_(track_pre_deliver_signal)(on_pre_deliver_signal);
  VG_(atfork)(pre_fork, parent_fork, child_fork);
}

VG_DETERMINE_INTERFACE_VERSION(pre_clo_init)
