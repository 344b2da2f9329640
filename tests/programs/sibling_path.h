// The path of `file` in this executable's directory, where the test programs find the
// libraries and programs built next to them.
#pragma once

#include <limits.h>
#include <string.h>
#include <unistd.h>

// Writes the path into `out` (PATH_MAX bytes); 0 on success, -1 when it does not fit.
static inline int SiblingPath(const char* file, char out[PATH_MAX]) {
  ssize_t n = readlink("/proc/self/exe", out, PATH_MAX - 1);
  if (n <= 0) return -1;
  out[n] = '\0';
  char* slash = strrchr(out, '/');
  if (slash == NULL || (size_t)(slash + 1 - out) + strlen(file) >= PATH_MAX) return -1;
  strcpy(slash + 1, file);
  return 0;
}
