/* The stream ptrace-direct's Valgrind tool (ptdtrace) writes and the recorder reads:
   one file per tool instance (a process, or a process after each exec), a sequence
   of little-endian 32-bit words. Shared by the tool (C, no libc) and the host (C++).

   - A word below VGPT_TAG_BASE is the id of a superblock that started executing
     (ids start at 1 and are never reused within a file). This is the hot path: the
     instrumented code stores one word per executed superblock.
   - A word VGPT_TAG_BASE | kind starts a control record; the next word is the number of
     payload words that follow. Payload layouts are below (u64 = two words, low first;
     strings are NUL-terminated and padded to a word).

   Blocks are translated with --vex-guest-chase=no, so a superblock is straight-line code
   that ends at its first control transfer (or at VEX's size limit); which way it left
   is told by the next superblock its thread executes, or by the resume IP in a switch
   or signal record. */
#ifndef PTD_VGPT_STREAM_H
#define PTD_VGPT_STREAM_H

#define VGPT_TAG_BASE 0xFFFFFF00u
#define VGPT_VERSION 2u

/* Control record kinds. */
enum {
  /* u32 version, u32 pid, u32 ppid, u32 flags (VGPT_HELLO_*), u32 fork_seq,
     u32 instance, u32 parent_instance, string exe path. First record of every file.
     `instance` is this file's <n> (<pid>-<n>.vgpt: 0 for a process's first program, one
     more after each exec). A forked child's file says which fork of its parent it came
     from: the VGPT_FORKING record with seq `fork_seq` in the parent's file number
     `parent_instance` (each exec'd program counts its forks from 1 again, so the seq
     alone is ambiguous once the parent has exec'd). */
  VGPT_HELLO = 1,
  /* u32 id, u64 start, u64 end (fall-through of the last instruction), u64 last_ip,
     u64 target (const target of the final jump, 0 if indirect), u32 kind (VGPT_KIND_*),
     u32 n_insns, u32 flags (VGPT_BLOCK_*), then n_insns instruction lengths, 1 byte
     each, padded to a word. */
  VGPT_BLOCK = 2,
  /* u32 tid now running, u32 tid switched out (0: none), u64 resume IP of the one
     switched out. */
  VGPT_SWITCH = 3,
  /* u32 tid. The thread is gone. */
  VGPT_THREAD_EXIT = 4,
  /* u32 tid, u32 signo, u64 interrupted IP (the next instruction that did not run). */
  VGPT_SIGNAL = 5,
  /* u64 start, u64 len, u64 file offset, u32 prot (1 r, 2 w, 4 x), u32 flags
     (VGPT_MAP_*), u64 dev, u64 ino, string path ("" when anonymous). */
  VGPT_MAP = 6,
  /* u64 start, u64 len. */
  VGPT_UNMAP = 7,
  /* u32 fork_seq. The process is about to fork (written and flushed before it). */
  VGPT_FORKING = 8,
  /* u32 child pid (written after a successful fork, in the parent). */
  VGPT_FORKED = 9,
  /* string path. An execve is about to be attempted; the process's next file (a new
     tool instance) starts if it succeeds. */
  VGPT_EXEC = 10,
  /* u32 exit code. The tool is shutting down (program exit or fatal signal). */
  VGPT_EXIT = 11,
  /* u64 vaddr, u32 size, string name, then size bytes padded to a word: a copy of
     memory the decoder needs and no file holds (the [vdso]). */
  VGPT_DUMP = 12,
  /* u32 tid, u64 IP after the syscall: an untraced exec (VGPT_EXEC_UNTRACED) failed; the
     program goes on in this file. */
  VGPT_NOTE = 13,
  /* u32 block id, u64 start, u32 size, then size bytes padded to a word: the code of
     the block just described, which runs from memory no file backs (anonymous, or a
     writable file mapping: JIT code). Written at every translation, so code rewritten
     in place (retranslated by Valgrind's self-modifying-code checks) comes again. */
  VGPT_CODE = 14,
  /* u32 reason (VGPT_UNTRACED_*), string path. An execve is about to be attempted of a
     program that runs untraced (Valgrind cannot run it): if it succeeds, this file ends
     here and the process runs on, untraced, until it exits. */
  VGPT_EXEC_UNTRACED = 15,
  /* u32 tid, u32 syscall number, u64 entry, u64 exit, u64 cpu: CLOCK_MONOTONIC ns around
     a system call that returned (after any MAP/UNMAP records it made), and the thread's CPU
     time in between (Valgrind's own work in the call, e.g. reading a mapped library's
     symbols, is CPU time). A thread blocked in a call lets others run, so this comes when
     the thread has the lock again, maybe before its SWITCH. */
  VGPT_SYSCALL_TIME = 16,
  /* u64 CLOCK_MONOTONIC ns when the blocks before this record had run: written every
     1024 blocks (at most 51,200 instructions) and at every flush of the tool's buffer
     (the wall clock of --time=wall between system calls). */
  VGPT_TIME = 17,
};

/* Why a program runs untraced (VGPT_EXEC_UNTRACED). */
enum {
  VGPT_UNTRACED_PRIVILEGED = 1, /* setuid, setgid or file capabilities */
};

/* How the last instruction of a block transfers control. */
enum {
  VGPT_KIND_NONE = 0,      /* falls through (VEX cut the block, pause, client request) */
  VGPT_KIND_COND = 1,      /* jcc/loop/jrcxz: taken iff the next block starts at target */
  VGPT_KIND_JUMP = 2,      /* jmp rel */
  VGPT_KIND_IJUMP = 3,     /* jmp r/m */
  VGPT_KIND_CALL = 4,      /* call rel */
  VGPT_KIND_ICALL = 5,     /* call r/m */
  VGPT_KIND_RET = 6,       /* ret */
  VGPT_KIND_SYSCALL = 7,   /* syscall/sysenter/int 0x80: leaves user space */
  VGPT_KIND_REP = 8,       /* rep-prefixed string instruction: repeats by re-entering itself */
  VGPT_KIND_TRAP = 9,      /* int3, ud2, an instruction Valgrind cannot run: a signal follows */
};

enum {
  VGPT_HELLO_FORK_CHILD = 1, /* this process was forked from ppid (fork_seq, parent_instance valid) */
  VGPT_HELLO_STARTUP = 2,    /* the first program of a process started by the tool */
};

enum {
  VGPT_MAP_STARTUP = 1,  /* mapped before the program ran (the loader's work) */
};

/* VGPT_BLOCK flags. */
enum {
  /* Code of Valgrind's own, run in the program (its preload library's constructors):
     not the program's code, left out of the trace as if filtered out. */
  VGPT_BLOCK_HIDDEN = 1,
};

#endif
