/* What the parts of ptdtrace share: the stream buffer and its writer (ptdtrace_stream.c),
   the options, and the tests of code that the instrumentation asks the core's events part
   (ptdtrace_main.c). Included after Valgrind's pub_tool headers. */
#ifndef PTDTRACE_H
#define PTDTRACE_H

#define BUF_WORDS (256 * 1024)
#define FLUSH_AT_SYSCALL_WORDS (16 * 1024)

/* Options (ptdtrace_main.c reads them). */
extern const HChar* clo_out_dir;
extern Bool clo_follow_forks;
extern Long clo_recorder_pid;
extern Long clo_stamp_blocks;

/* The buffer: the instrumented code stores block ids at *buf_pos; at stamp_limit it
   calls at_stamp_limit. */
extern UInt buf[BUF_WORDS + 64];
extern UInt* buf_pos;
extern UInt* stamp_limit;
UInt* next_stamp_limit(UInt* pos);
VG_REGPARM(0) void at_stamp_limit(void);

/* The stream file; write_failed: this process runs untraced. */
extern Int out_fd;
extern Bool write_failed;
/* This instance's place among its process's files and its parent's fork (the hello
   record's fields). */
extern UInt out_instance;
extern UInt hello_fork_seq;
extern UInt hello_parent_instance;
extern Int hello_parent_pid;
void open_output(void);
void put_hello(UInt flags);

ULong clock_ns(vki_clockid_t clock);
ULong monotonic_ns(void);
/* A VGPT_TIME record now. */
void stamp(void);
/* Writes the buffer out (or drops it when untraced). */
void flush(void);
/* Room for a control record of `words` words. */
void reserve(SizeT words);
/* A control record: its header (begin), then its payload. */
void begin(UInt kind, SizeT payload_words);
void put32(UInt w);
void put64(ULong w);
SizeT string_words(const HChar* s);
void put_string(const HChar* s);
void put_bytes(const void* data, SizeT len);

/* ptdtrace_main.c: code Valgrind, not the program, brought in; code no file backs. */
Bool is_valgrinds_code(Addr a);
Bool is_jit_code(Addr a);

/* ptdtrace_instrument.c */
IRSB* instrument(VgCallbackClosure* closure, IRSB* in, const VexGuestLayout* layout,
                 const VexGuestExtents* vge, const VexArchInfo* archinfo, IRType gWordTy,
                 IRType hWordTy);

#endif
