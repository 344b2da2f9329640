/* Starts a daemon the classic way and exits at once: fork (the launched process exits),
   setsid, fork again (the middle process exits), close every fd, sleep, then do known
   work (daemon_work called argv[3] times) and write its result to the file argv[1].
   argv[2]: how long the daemon sleeps first, in ms. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) long daemon_work(long n) {
  long sum = 0;
  for (long i = 0; i < n; i++) sum += i * i;
  return sum;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  if (fork() != 0) return 0;
  setsid();
  if (fork() != 0) _exit(0);
  for (int fd = 0; fd < 1024; fd++) close(fd);
  usleep((useconds_t)atoi(argv[2]) * 1000);
  long total = 0;
  const int calls = atoi(argv[3]);
  for (int i = 0; i < calls; i++) total += daemon_work(100 + i);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  char line[64];
  int n = snprintf(line, sizeof line, "%ld\n", total);
  if (write(fd, line, (size_t)n) != n) return 1;
  close(fd);
  return 0;
}
