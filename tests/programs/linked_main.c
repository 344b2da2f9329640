// ptd_prog_linked_*: the same calls, whichever linker laid the program out.
#include <stdio.h>

#include "linked_functions.h"

int main(void) {
  printf("%d\n", run_linked_functions(40) + fib(8));
  return 0;
}
