// Loaded, called and unloaded by prog_dlopen_swap; libptd_prog_swap_b.so is then loaded,
// normally at the same address: the same code addresses hold other functions.
__attribute__((noinline)) int alpha_step(int x) { return x * 3 + 1; }

int alpha_run(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += alpha_step(i);
  return total;
}
