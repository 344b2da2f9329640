// A busy loop, a 50 ms nanosleep in nap(), the busy loop again, then a library loaded
// with dlopen after the sleep and called: what a time axis must show (a sleep as long as
// it slept, CPU work as its instructions) and where the sideband must land on it.
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <time.h>

#include "sibling_path.h"

__attribute__((noinline)) unsigned long spin(unsigned long n) {
  unsigned long sum = 0;
  for (unsigned long i = 0; i < n; ++i) {
    sum += i;
    __asm__ volatile("" : "+r"(sum));  // one loop per iteration, not a closed form
  }
  return sum;
}

__attribute__((noinline)) void nap(void) {
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

int main(void) {
  unsigned long sum = spin(500);
  nap();
  sum += spin(500);
  char path[PATH_MAX];
  if (SiblingPath("libptd_prog_plugin.so", path) != 0) return 2;
  void* handle = dlopen(path, RTLD_NOW);
  if (handle == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  int (*run)(int) = (int (*)(int))dlsym(handle, "plugin_run");
  printf("%lu %d\n", sum, run(5));
  return 0;
}
