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
   --ptd-stamp-blocks=N: a wall time stamp every N blocks (1024; 0: at flushes only). */

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

/* Not in the tool API, but exported by libcoregrind (which a tool links statically):
   moves an fd into the range Valgrind reserves for itself, which the program can
   neither see nor close (programs close every fd before exec, as subprocess does). */
extern Int VG_(safe_fd)(Int oldfd);
/* Likewise: the core's guard against discarding translations from inside a translation.
   A fork's child callback runs in the scheduler, between translations, as client
   requests do (the one place the core sets it). */
extern Bool VG_(ok_to_discard_translations);
/* Likewise: --trace-children, which the core's execve wrapper reads after the tool's
   pre-syscall hook; and the core's own test of an executable, which refuses setuid,
   setgid and file-capability programs unless they are to run untraced. */
extern Bool VG_(clo_trace_children);
extern Int VG_(check_executable)(/*OUT*/ Bool* is_setuid, const HChar* f, Bool allow_setuid);

#define BUF_WORDS (256 * 1024)
#define FLUSH_AT_SYSCALL_WORDS (16 * 1024)
/* Blocks between two VGPT_TIME stamps at most (--ptd-stamp-blocks; 0: stamps only at
   flushes, for measuring what they cost): a superblock holds at most 50 guest
   instructions (VEX's default --vex-guest-max-insns), so with 1024 a stamp comes at least
   every 51,200 instructions (the wall clock of --time=wall places CPU work by them). */
static Long clo_stamp_blocks = 1024;

static UInt buf[BUF_WORDS + 64];
/* The instrumented code stores a block id at *buf_pos and advances it; the guarded
   helper runs once buf_pos reaches stamp_limit: it stamps the time, and flushes at
   buf + BUF_WORDS. */
static UInt* buf_pos = buf;
static UInt* stamp_limit = buf + 1024;

/* Where the next stamp is due, with the buffer at `pos`. */
static UInt* next_stamp_limit(UInt* pos) {
  if (clo_stamp_blocks <= 0 || pos + clo_stamp_blocks >= buf + BUF_WORDS) return buf + BUF_WORDS;
  return pos + clo_stamp_blocks;
}

static const HChar* clo_out_dir = NULL;
static Bool clo_follow_forks = True;
static Long clo_recorder_pid = 0; /* the recorder reading the streams (0: not watched) */
static HChar out_path[4096];      /* this instance's stream file */
static Int out_fd = -1;
static Bool write_failed = False;
static UInt next_block_id = 1;
static UInt fork_seq = 0;          /* forks started by this process */
static UInt hello_fork_seq = 0;    /* the parent's fork this process came from */
static UInt out_instance = 0;      /* <n> of this instance's file <pid>-<n>.vgpt */
static UInt hello_parent_instance = 0; /* <n> of the parent's file that holds that fork */
static Int hello_parent_pid = 0;     /* the process that forked this one (0: none traced) */
static Bool is_fork_child = False;
static ThreadId last_tid = VG_INVALID_THREADID;
#define MAX_TIDS 4096 /* Valgrind's ThreadIds are small (--max-threads, 500 by default) */
static Int os_tid_of[MAX_TIDS];
static Bool alive[MAX_TIDS];

/* ---- output ---------------------------------------------------------------- */

static ULong clock_ns(vki_clockid_t clock) {
  struct vki_timespec ts;
  VG_(clock_gettime)(&ts, clock);
  return (ULong)ts.tv_sec * 1000000000ull + (ULong)ts.tv_nsec;
}
static ULong monotonic_ns(void) { return clock_ns(VKI_CLOCK_MONOTONIC); }

static ULong out_offset = 0; /* bytes written to the current file */

/* Never write past RLIMIT_FSIZE: the write that tried would raise SIGXFSZ, which kills
   the program. At the limit the stream just ends (the recorder marks the trace partial). */
static SizeT room_under_file_limit(SizeT len) {
  struct vki_rlimit limit;
  if (VG_(getrlimit)(1 /* RLIMIT_FSIZE */, &limit) != 0 || limit.rlim_cur == VKI_RLIM_INFINITY) return len;
  if (out_offset >= limit.rlim_cur) return 0;
  return len < limit.rlim_cur - out_offset ? len : (SizeT)(limit.rlim_cur - out_offset);
}

static void write_all(const void* data, SizeT len) {
  const UChar* p = data;
  const SizeT room = room_under_file_limit(len);
  const Bool at_limit = room < len;
  len = room;
  while (len > 0 && !write_failed) {
    Int n = VG_(write)(out_fd, p, len > (1 << 30) ? (1 << 30) : (Int)len);
    if (n <= 0) {
      /* Disk full or the recorder gone: stop writing, keep running the program. The
         recorder sees the file end without an exit record and says so. */
      write_failed = True;
      VG_(umsg)("ptdtrace: cannot write the trace stream; recording of pid %d stops here\n",
                VG_(getpid)());
      return;
    }
    p += n;
    len -= n;
    out_offset += n;
  }
  if (at_limit && !write_failed) {
    write_failed = True;
    VG_(umsg)("ptdtrace: the trace stream reached the file size limit; recording of pid %d stops here\n",
              VG_(getpid)());
  }
}

/* Is the recorder still there to read the streams? Its /proc/PID/stat, not kill(pid, 0):
   a program that drops privileges may not signal it but still reads that; and a killed
   recorder not yet reaped (state Z) is gone too. */
static Bool recorder_alive(void) {
  if (clo_recorder_pid <= 0) return True;
  HChar path[64];
  HChar stat[512];
  VG_(snprintf)(path, sizeof(path), "/proc/%lld/stat", clo_recorder_pid);
  SysRes r = VG_(open)(path, VKI_O_RDONLY, 0);
  if (sr_isError(r)) return False;
  const Int fd = (Int)sr_Res(r);
  const Int n = VG_(read)(fd, stat, sizeof(stat) - 1);
  VG_(close)(fd);
  if (n <= 0) return False;
  stat[n] = 0;
  const HChar* end_of_name = VG_(strrchr)(stat, ')'); /* "pid (comm) S ..." */
  return end_of_name == NULL || end_of_name[1] != ' ' || (end_of_name[2] != 'Z' && end_of_name[2] != 'X');
}

/* The recorder unlinks a stream file when it stops reading it (recording stopped while
   the program runs on): then the program goes on untraced. A recorder that died
   (SIGKILL) cannot: the stream would grow with nobody to read it until the disk is full,
   so the tool removes it itself and the program goes on untraced. */
static void stop_if_abandoned(void) {
  struct vg_stat st;
  const Bool unlinked = VG_(fstat)(out_fd, &st) == 0 && st.nlink == 0;
  if (!unlinked && recorder_alive()) return;
  if (!unlinked) VG_(unlink)(out_path);
  VG_(close)(out_fd);
  out_fd = -1;
  write_failed = True;
}

/* What ran up to here ran by now (a VGPT_TIME record; the buffer's slack past
   BUF_WORDS holds it). */
static void stamp(void) {
  if (buf_pos > buf && buf_pos + 4 <= buf + BUF_WORDS + 64) {
    const ULong now = monotonic_ns();
    *buf_pos++ = VGPT_TAG_BASE | VGPT_TIME;
    *buf_pos++ = 2;
    *buf_pos++ = (UInt)now;
    *buf_pos++ = (UInt)(now >> 32);
  }
  stamp_limit = next_stamp_limit(buf_pos);
}

static void flush(void) {
  if (write_failed) {
    buf_pos = buf; /* untraced: drop what the instrumented code stored */
    stamp_limit = next_stamp_limit(buf);
    return;
  }
  if (out_fd < 0) return; /* before post_clo_init: keep buffering */
  stamp();
  SizeT words = buf_pos - buf;
  if (words > 0) write_all(buf, words * sizeof(UInt));
  buf_pos = buf;
  stamp_limit = next_stamp_limit(buf);
  if (!write_failed) stop_if_abandoned();
}

/* One clock read per --ptd-stamp-blocks blocks; the write once the buffer is full. */
static VG_REGPARM(0) void at_stamp_limit(void) {
  if (buf_pos >= buf + BUF_WORDS) {
    flush();
  } else if (out_fd >= 0 && !write_failed) {
    stamp();
  } else {
    stamp_limit = buf + BUF_WORDS;
  }
}

/* Room for a control record of `words` words. */
static void reserve(SizeT words) {
  tl_assert(words < BUF_WORDS);
  if ((SizeT)(buf + BUF_WORDS - buf_pos) < words) flush();
}

static void put32(UInt w) { *buf_pos++ = w; }
static void put64(ULong w) {
  put32((UInt)w);
  put32((UInt)(w >> 32));
}
static SizeT string_words(const HChar* s) { return (VG_(strlen)(s) + 1 + 3) / 4; }
static void put_string(const HChar* s) {
  SizeT words = string_words(s);
  buf_pos[words - 1] = 0;
  VG_(memcpy)(buf_pos, s, VG_(strlen)(s) + 1);
  buf_pos += words;
}
static void put_bytes(const void* data, SizeT len) {
  SizeT words = (len + 3) / 4;
  if (words > 0) buf_pos[words - 1] = 0;
  VG_(memcpy)(buf_pos, data, len);
  buf_pos += words;
}
static void begin(UInt kind, SizeT payload_words) {
  reserve(payload_words + 2);
  put32(VGPT_TAG_BASE | kind);
  put32((UInt)payload_words);
}

static void open_output(void) {
  HChar path[4096];
  Int pid = VG_(getpid)();
  struct vg_stat st;
  VG_(snprintf)(path, sizeof(path), "%s/stop", clo_out_dir);
  if (!sr_isError(VG_(stat)(path, &st))) {
    /* The recording has stopped: this program (a child, an exec) runs untraced. */
    write_failed = True;
    return;
  }
  if (!recorder_alive()) {
    write_failed = True;
    return;
  }
  for (Int n = 0; n < 10000; ++n) {
    VG_(snprintf)(path, sizeof(path), "%s/%d-%d.vgpt", clo_out_dir, pid, n);
    SysRes r = VG_(open)(path, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_EXCL, 0600);
    if (!sr_isError(r)) {
      VG_(strncpy)(out_path, path, sizeof(out_path) - 1);
      /* Out of the program's way: programs close or dup2 over low fds. */
      out_fd = VG_(safe_fd)(sr_Res(r));
      out_offset = 0;
      out_instance = (UInt)n;
      return;
    }
    if (sr_Err(r) != VKI_EEXIST) break;
  }
  /* The recorder is gone (its directory removed): run untraced. */
  write_failed = True;
}

static void put_hello(UInt flags) {
  if (write_failed) return;
  const HChar* exe = VG_(args_the_exename) ? VG_(args_the_exename) : "";
  begin(VGPT_HELLO, 7 + string_words(exe));
  put32(VGPT_VERSION);
  put32((UInt)VG_(getpid)());
  /* The forking process, known before the fork: getppid() names init or a subreaper
     once that process has exited (a daemon's double fork). */
  put32((UInt)(hello_parent_pid != 0 ? hello_parent_pid : VG_(getppid)()));
  put32(flags);
  put32(hello_fork_seq);
  put32(out_instance);
  put32(hello_parent_instance);
  put_string(exe);
}

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
static Bool is_valgrinds_code(Addr a) {
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
static Bool is_jit_code(Addr a) {
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

/* ---- instrumentation ------------------------------------------------------- */

static Bool is_client_request_preamble(Addr a, UInt len) {
  /* rol rdi,3; rol rdi,13; rol rdi,61; rol rdi,51; xchg r,r: VEX makes one IMark of
     the five instructions the CPU runs. */
  static const UChar preamble[4] = {0x48, 0xc1, 0xc7, 0x03};
  return len == 19 && VG_(memcmp)((const void*)a, preamble, 4) == 0;
}

/* What the CPU sees in the last instruction of a block. Direct and indirect transfers
   are told apart by the opcode, not by whether VEX knows the target: VEX folds constants
   (`mov $f,%rax; call *%rax` has a constant next), PT still writes a TIP for it; and a
   jcc whose condition VEX folded away still costs a TNT bit. */
enum { OP_OTHER, OP_JCC, OP_JMP, OP_CALL, OP_IJMP, OP_ICALL, OP_RET, OP_REP_STRING };

static UInt decode_last(Addr a, UInt len, Addr end, ULong* target) {
  const UChar* p = (const UChar*)a;
  const UChar* stop = p + len;
  Bool rep = False;
  while (p < stop) {
    UChar b = *p;
    if (b == 0xf2 || b == 0xf3) {
      rep = True;
      ++p;
    } else if (b == 0xf0 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 ||
               b == 0x65 || b == 0x66 || b == 0x67 || (b >= 0x40 && b <= 0x4f)) {
      ++p;
    } else {
      break;
    }
  }
  if (p >= stop) return OP_OTHER;
  UChar op = p[0];
  if ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3)) {
    if (p + 2 > stop) return OP_OTHER;
    *target = end + (Long)(Char)p[1];
    return OP_JCC;
  }
  if (op == 0x0f && p + 6 <= stop && p[1] >= 0x80 && p[1] <= 0x8f) {
    Int rel;
    VG_(memcpy)(&rel, p + 2, 4);
    *target = end + (Long)rel;
    return OP_JCC;
  }
  if ((op == 0xe8 || op == 0xe9) && p + 5 <= stop) {
    Int rel;
    VG_(memcpy)(&rel, p + 1, 4);
    *target = end + (Long)rel;
    return op == 0xe8 ? OP_CALL : OP_JMP;
  }
  if (op == 0xeb && p + 2 <= stop) {
    *target = end + (Long)(Char)p[1];
    return OP_JMP;
  }
  if (op == 0xff && p + 2 <= stop) {
    UInt reg = (p[1] >> 3) & 7;
    if (reg == 2) return OP_ICALL;
    if (reg == 4) return OP_IJMP;
  }
  if (op == 0xc3 || op == 0xc2) return OP_RET;
  if (rep && ((op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf) || (op >= 0x6c && op <= 0x6f)))
    return OP_REP_STRING;
  return OP_OTHER;
}

static UInt classify(IRSB* sb, Addr last_ip, Addr end, ULong* target) {
  *target = 0;
  switch (sb->jumpkind) {
    case Ijk_Sys_syscall:
    case Ijk_Sys_int128:
    case Ijk_Sys_int129:
    case Ijk_Sys_int130:
    case Ijk_Sys_int145:
    case Ijk_Sys_int210:
    case Ijk_Sys_sysenter:
      *target = end;
      return VGPT_KIND_SYSCALL;
    case Ijk_SigTRAP:
    case Ijk_SigILL:
    case Ijk_SigSEGV:
    case Ijk_SigBUS:
    case Ijk_SigFPE:
    case Ijk_SigFPE_IntDiv:
    case Ijk_SigFPE_IntOvf:
    case Ijk_NoDecode:
      return VGPT_KIND_TRAP;
    default:
      break;
  }
  switch (decode_last(last_ip, (UInt)(end - last_ip), end, target)) {
    case OP_JCC: return VGPT_KIND_COND;
    case OP_JMP: return VGPT_KIND_JUMP;
    case OP_CALL: return VGPT_KIND_CALL;
    case OP_IJMP: return VGPT_KIND_IJUMP;
    case OP_ICALL: return VGPT_KIND_ICALL;
    case OP_RET: return VGPT_KIND_RET;
    case OP_REP_STRING:
      *target = last_ip;
      return VGPT_KIND_REP;
    default:
      /* Falls through: VEX cut the block, or a client request, pause, cpuid... */
      *target = end;
      return VGPT_KIND_NONE;
  }
}

static IRSB* instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                        const VexGuestExtents* vge, const VexArchInfo* archinfo,
                        IRType gWordTy, IRType hWordTy) {
  (void)closure;
  (void)layout;
  (void)vge;
  (void)archinfo;
  if (gWordTy != Ity_I64 || hWordTy != Ity_I64) VG_(tool_panic)("ptdtrace: amd64 only");

  /* Describe the block: its instructions and how it ends. */
  UChar lengths[512];
  UInt n = 0;
  Addr start = 0, last_ip = 0, end = 0;
  for (Int i = 0; i < in->stmts_used; ++i) {
    IRStmt* st = in->stmts[i];
    if (st->tag != Ist_IMark) continue;
    Addr a = st->Ist.IMark.addr;
    UInt len = st->Ist.IMark.len;
    if (n == 0) start = a;
    if (is_client_request_preamble(a, len) && n + 5 < sizeof(lengths)) {
      lengths[n++] = 4;
      lengths[n++] = 4;
      lengths[n++] = 4;
      lengths[n++] = 4;
      lengths[n++] = 3;
    } else if (n < sizeof(lengths)) {
      lengths[n++] = (UChar)len;
    }
    last_ip = a;
    end = a + len;
  }
  if (n == 0) return in; /* nothing the CPU would run */
  if (is_client_request_preamble(last_ip, (UInt)(end - last_ip))) last_ip = end - 3;

  ULong target = 0;
  UInt kind = classify(in, last_ip, end, &target);
  UInt id = next_block_id++;
  tl_assert(id < VGPT_TAG_BASE);
  begin(VGPT_BLOCK, 12 + (n + 3) / 4);
  put32(id);
  put64(start);
  put64(end);
  put64(last_ip);
  put64(target);
  put32(kind);
  put32(n);
  put32(is_valgrinds_code(start) ? VGPT_BLOCK_HIDDEN : 0);
  put_bytes(lengths, n);
  if (is_jit_code(start) && !is_valgrinds_code(start) && end - start < 4 * BUF_WORDS / 2) {
    begin(VGPT_CODE, 4 + (UInt)((end - start + 3) / 4));
    put32(id);
    put64(start);
    put32((UInt)(end - start));
    put_bytes((const void*)start, end - start);
  }

  /* Copy the statements, storing the id at the first instruction: after any
     self-check preamble, which may discard the block before it runs. */
  IRSB* out = deepCopyIRSBExceptStmts(in);
  Bool stored = False;
  for (Int i = 0; i < in->stmts_used; ++i) {
    IRStmt* st = in->stmts[i];
    if (!stored && st->tag == Ist_IMark) {
      stored = True;
      IRTemp pos = newIRTemp(out->tyenv, Ity_I64);
      IRTemp next_pos = newIRTemp(out->tyenv, Ity_I64);
      IRTemp full = newIRTemp(out->tyenv, Ity_I1);
      addStmtToIRSB(out, st);
      addStmtToIRSB(out, IRStmt_WrTmp(pos, IRExpr_Load(Iend_LE, Ity_I64,
                                                       mkIRExpr_HWord((HWord)&buf_pos))));
      addStmtToIRSB(out, IRStmt_Store(Iend_LE, IRExpr_RdTmp(pos),
                                      IRExpr_Const(IRConst_U32(id))));
      addStmtToIRSB(out, IRStmt_WrTmp(next_pos, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(pos),
                                                             IRExpr_Const(IRConst_U64(4)))));
      addStmtToIRSB(out, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)&buf_pos),
                                      IRExpr_RdTmp(next_pos)));
      IRTemp limit = newIRTemp(out->tyenv, Ity_I64);
      addStmtToIRSB(out, IRStmt_WrTmp(limit, IRExpr_Load(Iend_LE, Ity_I64,
                                                         mkIRExpr_HWord((HWord)&stamp_limit))));
      addStmtToIRSB(out, IRStmt_WrTmp(full, IRExpr_Binop(Iop_CmpLE64U, IRExpr_RdTmp(limit),
                                                         IRExpr_RdTmp(next_pos))));
      IRDirty* di = unsafeIRDirty_0_N(0, "ptdtrace_at_stamp_limit",
                                      VG_(fnptr_to_fnentry)(&at_stamp_limit), mkIRExprVec_0());
      di->guard = IRExpr_RdTmp(full);
      addStmtToIRSB(out, IRStmt_Dirty(di));
      continue;
    }
    addStmtToIRSB(out, st);
  }
  return out;
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
