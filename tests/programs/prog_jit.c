/* A tiny JIT: writes x86-64 functions into anonymous executable memory and calls them,
   rewrites one in place (another function at the same address), moves one, and
   describes its code the way runtimes do: a jitdump (jit-PID.dump, mapped executable so
   that the recorder sees it) and a perf map (/tmp/perf-PID.map).

   Calls, exactly: jit_square 15 (10 direct, 5 from jit_square_plus_one),
   jit_square_plus_one 5, jit_negate 7 (written over jit_square), jit_triple 7 (3 before
   its move, 4 after).

   Usage: ptd_prog_jit [--no-jitdump] [--no-perf-map] [--unlink-jitdump] [--dir DIR]
   (the jitdump goes to DIR, default /tmp, and is deleted at exit with --unlink-jitdump,
   as some runtimes do; the perf map always goes to /tmp). */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int (*IntFn)(int);

static int jitdump_fd = -1;
static char jitdump_path[4096];
static FILE* perf_map = NULL;
static uint64_t next_code_index = 1;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_all(const void* data, size_t size) {
  const char* p = data;
  while (size > 0) {
    ssize_t n = write(jitdump_fd, p, size);
    if (n <= 0) {
      perror("jitdump write");
      exit(1);
    }
    p += n;
    size -= (size_t)n;
  }
}

struct RecordHeader {
  uint32_t id;
  uint32_t total_size;
  uint64_t timestamp;
};

static void open_jitdump(const char* dir) {
  char* path = jitdump_path;
  snprintf(path, sizeof(jitdump_path), "%s/jit-%d.dump", dir, (int)getpid());
  jitdump_fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
  if (jitdump_fd < 0) {
    perror(path);
    exit(1);
  }
  struct {
    uint32_t magic, version, total_size, elf_mach, pad1, pid;
    uint64_t timestamp, flags;
  } header = {0x4A695444, 1, 40, EM_X86_64, 0, (uint32_t)getpid(), now_ns(), 0};
  write_all(&header, sizeof(header));
  /* The announcement: perf (and ptrace-direct) find the dump by this executable mapping. */
  void* marker = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, jitdump_fd, 0);
  if (marker == MAP_FAILED) {
    perror("mmap jitdump");
    exit(1);
  }
}

static void perf_map_line(const char* name, const void* code, size_t size) {
  if (perf_map == NULL) return;
  fprintf(perf_map, "%lx %zx %s\n", (unsigned long)(uintptr_t)code, size, name);
  fflush(perf_map);
}

static void describe_load(const char* name, const void* code, size_t size, uint64_t timestamp) {
  perf_map_line(name, code, size);
  if (jitdump_fd < 0) return;
  struct {
    uint32_t pid, tid;
    uint64_t vma, code_addr, code_size, code_index;
  } load = {(uint32_t)getpid(), (uint32_t)getpid(), (uintptr_t)code, (uintptr_t)code, size, next_code_index++};
  struct RecordHeader h = {0, (uint32_t)(sizeof(h) + sizeof(load) + strlen(name) + 1 + size), timestamp};
  write_all(&h, sizeof(h));
  write_all(&load, sizeof(load));
  write_all(name, strlen(name) + 1);
  write_all(code, size);
}

static void describe_debug_info(const void* code, const char* file, uint32_t line) {
  if (jitdump_fd < 0) return;
  struct {
    uint64_t code_addr, nr_entry;
  } debug = {(uintptr_t)code, 1};
  struct {
    uint64_t addr;
    uint32_t line, discrim;
  } entry = {(uintptr_t)code, line, 0};
  struct RecordHeader h = {2, (uint32_t)(sizeof(h) + sizeof(debug) + sizeof(entry) + strlen(file) + 1), now_ns()};
  write_all(&h, sizeof(h));
  write_all(&debug, sizeof(debug));
  write_all(&entry, sizeof(entry));
  write_all(file, strlen(file) + 1);
}

static void describe_move(const char* name, const void* from, const void* to, size_t size, uint64_t index) {
  perf_map_line(name, to, size);
  if (jitdump_fd < 0) return;
  struct {
    uint32_t pid, tid;
    uint64_t vma, old_code_addr, new_code_addr, code_size, code_index;
  } move = {(uint32_t)getpid(), (uint32_t)getpid(), (uintptr_t)to, (uintptr_t)from, (uintptr_t)to, size, index};
  struct RecordHeader h = {1, (uint32_t)(sizeof(h) + sizeof(move)), now_ns()};
  write_all(&h, sizeof(h));
  write_all(&move, sizeof(move));
}

/* Writes `code` at `at` and describes it; the timestamp is taken once the bytes are in
   place (as runtimes do), before they run. */
static void emit(uint8_t* at, const uint8_t* code, size_t size, const char* name) {
  memcpy(at, code, size);
  __builtin___clear_cache((char*)at, (char*)at + size);
  describe_load(name, at, size, now_ns());
}

int main(int argc, char** argv) {
  int want_jitdump = 1, want_perf_map = 1, unlink_jitdump = 0;
  const char* dir = "/tmp";
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--no-jitdump") == 0) want_jitdump = 0;
    else if (strcmp(argv[i], "--no-perf-map") == 0) want_perf_map = 0;
    else if (strcmp(argv[i], "--unlink-jitdump") == 0) unlink_jitdump = 1;
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) dir = argv[++i];
  }
  if (want_jitdump) open_jitdump(dir);
  if (want_perf_map) {
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    perf_map = fopen(path, "w");
  }

  uint8_t* mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  uint8_t* square = mem;          /* mov eax,edi; imul eax,edi; ret */
  uint8_t* plus_one = mem + 64;   /* sub rsp,8; call square; add eax,1; add rsp,8; ret */
  uint8_t* triple = mem + 128;    /* lea eax,[rdi+rdi*2]; ret */
  uint8_t* triple_moved = mem + 256;
  static const uint8_t square_code[] = {0x89, 0xf8, 0x0f, 0xaf, 0xc7, 0xc3};
  static const uint8_t negate_code[] = {0x89, 0xf8, 0xf7, 0xd8, 0xc3};
  static const uint8_t triple_code[] = {0x8d, 0x04, 0x7f, 0xc3};
  uint8_t plus_one_code[] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0, 0, 0, 0, 0x83, 0xc0, 0x01, 0x48, 0x83, 0xc4, 0x08, 0xc3};
  int32_t rel = (int32_t)(square - (plus_one + 9));
  memcpy(plus_one_code + 5, &rel, 4);

  emit(square, square_code, sizeof(square_code), "jit_square");
  describe_debug_info(square, "square.js", 1);
  emit(plus_one, plus_one_code, sizeof(plus_one_code), "jit_square_plus_one");
  emit(triple, triple_code, sizeof(triple_code), "jit_triple");
  const uint64_t triple_index = next_code_index - 1;

  volatile int sum = 0;
  for (int i = 0; i < 10; ++i) sum += ((IntFn)square)(i);
  for (int i = 0; i < 5; ++i) sum += ((IntFn)plus_one)(i);
  for (int i = 0; i < 3; ++i) sum += ((IntFn)triple)(i);

  /* The runtime recompiles: another function where jit_square was. */
  emit(square, negate_code, sizeof(negate_code), "jit_negate");
  for (int i = 0; i < 7; ++i) sum += ((IntFn)square)(i);

  /* The runtime moves code (a compacting collector). */
  memcpy(triple_moved, triple_code, sizeof(triple_code));
  memset(triple, 0xcc, sizeof(triple_code));
  __builtin___clear_cache((char*)triple_moved, (char*)triple_moved + sizeof(triple_code));
  describe_move("jit_triple", triple, triple_moved, sizeof(triple_code), triple_index);
  for (int i = 0; i < 4; ++i) sum += ((IntFn)triple_moved)(i);

  if (jitdump_fd >= 0) {
    struct RecordHeader close_record = {3, sizeof(struct RecordHeader), now_ns()};
    write_all(&close_record, sizeof(close_record));
    close(jitdump_fd);
    if (unlink_jitdump) unlink(jitdump_path);
  }
  if (perf_map != NULL) fclose(perf_map);
  printf("sum %d\n", sum);
  return 0;
}
