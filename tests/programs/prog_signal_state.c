// Writes the SigBlk/SigIgn/SigCgt lines of its own /proc/self/status to argv[1]: the
// signal state it was started with, as the kernel sees it.
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* status = fopen("/proc/self/status", "r");
  FILE* out = fopen(argv[1], "w");
  if (status == NULL || out == NULL) return 1;
  char line[256];
  while (fgets(line, sizeof(line), status) != NULL) {
    if (strncmp(line, "Sig", 3) == 0) fputs(line, out);
  }
  return fclose(out) == 0 ? 0 : 1;
}
