/* Recording target for the recorder core tests.
 *
 *   ptd_core_mt_target OUT_DIR PLUGIN.so [--wait]
 *
 * Writes what the test compares the recording with, from the program's own point of
 * view: OUT_DIR/maps_start.txt (/proc/self/maps at start), OUT_DIR/vdso.bin (its vDSO
 * bytes, from getauxval(AT_SYSINFO_EHDR)), OUT_DIR/maps_after.txt (after the dlopen).
 * Starts kThreads threads named ptd-worker-N (pthread_setname_np), then renames itself
 * "ptd-marker" (a COMM record that marks the time), then dlopen()s PLUGIN.so.
 * --wait: after the threads are named, writes OUT_DIR/ready and waits for OUT_DIR/go
 * (so a test can attach in between). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { kThreads = 3 };

static pthread_barrier_t named_barrier;
static pthread_barrier_t done_barrier;
static const char* out_dir;

static void die(const char* what) {
  fprintf(stderr, "mt_target: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void path_in_out_dir(char* buf, size_t size, const char* name) {
  snprintf(buf, size, "%s/%s", out_dir, name);
}

static void copy_file(const char* from, const char* to_name) {
  char to[4096];
  path_in_out_dir(to, sizeof(to), to_name);
  FILE* in = fopen(from, "r");
  if (!in) die(from);
  FILE* out = fopen(to, "w");
  if (!out) die(to);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0) fwrite(buf, 1, n, out);
  fclose(in);
  if (fclose(out) != 0) die(to);
}

/* The vDSO's size is its [vdso] line in /proc/self/maps. */
static void write_vdso(void) {
  uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) die("/proc/self/maps");
  char line[4096];
  uintptr_t start = 0, end = 0;
  while (fgets(line, sizeof(line), maps)) {
    unsigned long s, e;
    if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s == base) {
      start = s;
      end = e;
      break;
    }
  }
  fclose(maps);
  if (end <= start) return;
  char path[4096];
  path_in_out_dir(path, sizeof(path), "vdso.bin");
  FILE* out = fopen(path, "wb");
  if (!out) die(path);
  fwrite((const void*)start, 1, end - start, out);
  if (fclose(out) != 0) die(path);
}

static void* worker(void* arg) {
  char name[16];
  snprintf(name, sizeof(name), "ptd-worker-%d", (int)(intptr_t)arg);
  pthread_setname_np(pthread_self(), name);
  pthread_barrier_wait(&named_barrier);
  pthread_barrier_wait(&done_barrier);
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s OUT_DIR PLUGIN.so [--wait]\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  int wait_for_go = argc > 3 && strcmp(argv[3], "--wait") == 0;
  copy_file("/proc/self/maps", "maps_start.txt");
  write_vdso();

  pthread_barrier_init(&named_barrier, NULL, kThreads + 1);
  pthread_barrier_init(&done_barrier, NULL, kThreads + 1);
  pthread_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    if (pthread_create(&threads[i], NULL, worker, (void*)(intptr_t)i) != 0) die("pthread_create");
  }
  pthread_barrier_wait(&named_barrier);

  if (wait_for_go) {
    char ready[4096], go[4096];
    path_in_out_dir(ready, sizeof(ready), "ready");
    path_in_out_dir(go, sizeof(go), "go");
    FILE* f = fopen(ready, "w");
    if (!f) die(ready);
    fclose(f);
    /* Bounded: a test that died must not leave this running for ever. */
    for (int i = 0; i < 60000 && access(go, F_OK) != 0; ++i) sleep_ms(1);
  }

  prctl(PR_SET_NAME, "ptd-marker", 0, 0, 0);
  void* plugin = dlopen(argv[2], RTLD_NOW);
  if (!plugin) {
    fprintf(stderr, "mt_target: dlopen %s: %s\n", argv[2], dlerror());
    return 3;
  }
  int (*answer)(void) = (int (*)(void))dlsym(plugin, "ptd_core_plugin_answer");
  if (!answer || answer() != 42) return 4;
  copy_file("/proc/self/maps", "maps_after.txt");

  pthread_barrier_wait(&done_barrier);
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  return 0;
}
