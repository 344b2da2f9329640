// clock_gettime in a loop: on x86-64 Linux it runs in the vDSO, code in no file.
#include <stdio.h>
#include <time.h>

int main(void) {
  long long sum = 0;
  for (int i = 0; i < 100; ++i) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sum += ts.tv_nsec & 1;
  }
  printf("%lld\n", sum);
  return 0;
}
