// dlopen()s libptd_prog_plugin.so from its own directory and calls into it.
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sibling_path.h"

int main(void) {
  char path[PATH_MAX];
  if (SiblingPath("libptd_prog_plugin.so", path) != 0) return 2;
  void* handle = dlopen(path, RTLD_NOW);
  if (handle == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  int (*run)(int) = (int (*)(int))dlsym(handle, "plugin_run");
  int total = run(50);
  printf("%d\n", total);
  return 0;  // no dlclose: the mapping stays for whoever reads /proc afterwards
}
