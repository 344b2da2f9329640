// strlen both called and address-taken: the linker sends the calls through a .plt.got stub
// (which jumps through strlen's GLOB_DAT slot) instead of a .plt one. Calls strlen 7 times.
#include <stdio.h>
#include <string.h>

typedef size_t (*length_fn)(const char*);
volatile length_fn taken_strlen;

int main(int argc, char** argv) {
  (void)argc;
  taken_strlen = strlen;
  size_t total = 0;
  for (int i = 0; i < 7; ++i) total += strlen(argv[0] + i);
  printf("%zu\n", total);
  return 0;
}
