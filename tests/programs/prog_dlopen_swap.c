// dlopen()s libptd_prog_swap_a.so, calls it, dlclose()s it, then dlopen()s
// libptd_prog_swap_b.so, which the loader puts where A was: code addresses that mean A's
// functions first and B's after (the decoder's image must follow the trace's time).
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int RunLibrary(const char* dir, const char* file, const char* symbol, int n) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, file);
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
  char dir[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
  if (n <= 0) return 2;
  dir[n] = '\0';
  *strrchr(dir, '/') = '\0';
  int a = RunLibrary(dir, "libptd_prog_swap_a.so", "alpha_run", 20);
  int b = RunLibrary(dir, "libptd_prog_swap_b.so", "beta_run", 20);
  printf("%d %d\n", a, b);
  return a < 0 || b < 0 ? 2 : 0;
}
