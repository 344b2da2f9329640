// Loaded by prog_dlopen_swap after libptd_prog_swap_a.so was unloaded (see prog_swap_a.c).
// Not A's shape: a branch where A's code has none, so a decoder that kept what it decoded
// of A by address goes wrong here (tests/decoder/fast_block_decoder_test.cc).
__attribute__((noinline)) int beta_step(int x) {
  if (x % 3 == 0) return x * 5 + 2;
  return x - 7;
}

int beta_run(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += beta_step(i);
  return total;
}
