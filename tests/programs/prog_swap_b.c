// Loaded by prog_dlopen_swap after libptd_prog_swap_a.so was unloaded (see prog_swap_a.c).
__attribute__((noinline)) int beta_step(int x) { return x * 5 + 2; }

int beta_run(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += beta_step(i);
  return total;
}
