/* ptdtrace's output: the buffer the instrumented code and the control records fill, its
   writes to this instance's stream file (<pid>-<n>.vgpt), the wall clock's stamps, and the
   checks that stop tracing when the recorder is gone. */
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

/* Not in the tool API, but exported by libcoregrind (which a tool links statically):
   moves an fd into the range Valgrind reserves for itself, which the program can
   neither see nor close (programs close every fd before exec, as subprocess does). */
extern Int VG_(safe_fd)(Int oldfd);

/* Blocks between two VGPT_TIME stamps at most (--ptd-stamp-blocks; 0: stamps only at
   flushes, for measuring what they cost): a superblock holds at most 50 guest
   instructions (VEX's default --vex-guest-max-insns), so with 1024 a stamp comes at least
   every 51,200 instructions (the wall clock of --time=wall places CPU work by them). */
Long clo_stamp_blocks = 1024;

UInt buf[BUF_WORDS + 64];
/* The instrumented code stores a block id at *buf_pos and advances it; the guarded
   helper runs once buf_pos reaches stamp_limit: it stamps the time, and flushes at
   buf + BUF_WORDS. */
UInt* buf_pos = buf;
UInt* stamp_limit = buf + 1024;

/* Where the next stamp is due, with the buffer at `pos`. */
UInt* next_stamp_limit(UInt* pos) {
  if (clo_stamp_blocks <= 0 || pos + clo_stamp_blocks >= buf + BUF_WORDS) return buf + BUF_WORDS;
  return pos + clo_stamp_blocks;
}

const HChar* clo_out_dir = NULL;
Bool clo_follow_forks = True;
Long clo_recorder_pid = 0; /* the recorder reading the streams (0: not watched) */
static HChar out_path[4096];      /* this instance's stream file */
Int out_fd = -1;
Bool write_failed = False;
UInt hello_fork_seq = 0;    /* the parent's fork this process came from */
UInt out_instance = 0;      /* <n> of this instance's file <pid>-<n>.vgpt */
UInt hello_parent_instance = 0; /* <n> of the parent's file that holds that fork */
Int hello_parent_pid = 0;     /* the process that forked this one (0: none traced) */

/* ---- output ---------------------------------------------------------------- */

ULong clock_ns(vki_clockid_t clock) {
  struct vki_timespec ts;
  VG_(clock_gettime)(&ts, clock);
  return (ULong)ts.tv_sec * 1000000000ull + (ULong)ts.tv_nsec;
}
ULong monotonic_ns(void) { return clock_ns(VKI_CLOCK_MONOTONIC); }

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
void stamp(void) {
  if (buf_pos > buf && buf_pos + 4 <= buf + BUF_WORDS + 64) {
    const ULong now = monotonic_ns();
    *buf_pos++ = VGPT_TAG_BASE | VGPT_TIME;
    *buf_pos++ = 2;
    *buf_pos++ = (UInt)now;
    *buf_pos++ = (UInt)(now >> 32);
  }
  stamp_limit = next_stamp_limit(buf_pos);
}

void flush(void) {
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
VG_REGPARM(0) void at_stamp_limit(void) {
  if (buf_pos >= buf + BUF_WORDS) {
    flush();
  } else if (out_fd >= 0 && !write_failed) {
    stamp();
  } else {
    stamp_limit = buf + BUF_WORDS;
  }
}

/* Room for a control record of `words` words. */
void reserve(SizeT words) {
  tl_assert(words < BUF_WORDS);
  if ((SizeT)(buf + BUF_WORDS - buf_pos) < words) flush();
}

void put32(UInt w) { *buf_pos++ = w; }
void put64(ULong w) {
  put32((UInt)w);
  put32((UInt)(w >> 32));
}
SizeT string_words(const HChar* s) { return (VG_(strlen)(s) + 1 + 3) / 4; }
void put_string(const HChar* s) {
  SizeT words = string_words(s);
  buf_pos[words - 1] = 0;
  VG_(memcpy)(buf_pos, s, VG_(strlen)(s) + 1);
  buf_pos += words;
}
void put_bytes(const void* data, SizeT len) {
  SizeT words = (len + 3) / 4;
  if (words > 0) buf_pos[words - 1] = 0;
  VG_(memcpy)(buf_pos, data, len);
  buf_pos += words;
}
void begin(UInt kind, SizeT payload_words) {
  reserve(payload_words + 2);
  put32(VGPT_TAG_BASE | kind);
  put32((UInt)payload_words);
}

void open_output(void) {
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

void put_hello(UInt flags) {
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
