// dlopen()s libptd_prog_swap_a.so, calls it, dlclose()s it, then dlopen()s
// libptd_prog_swap_b.so, which the loader puts where A was: code addresses that mean A's
// functions first and B's after (the decoder's image must follow the trace's time).
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sibling_path.h"

static int RunLibrary(const char* file, const char* symbol, int n) {
  char path[PATH_MAX];
  if (SiblingPath(file, path) != 0) return -1;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return -1;
  }
  int (*run)(int) = (int (*)(int))dlsym(handle, symbol);
  int total = run == NULL ? -1 : run(n);
  dlclose(handle);
  return total;
}

int main(void) {
  int a = RunLibrary("libptd_prog_swap_a.so", "alpha_run", 20);
  int b = RunLibrary("libptd_prog_swap_b.so", "beta_run", 20);
  printf("%d %d\n", a, b);
  return a < 0 || b < 0 ? 2 : 0;
}
