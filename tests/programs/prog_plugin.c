// Loaded with dlopen by prog_dlopen.
__attribute__((noinline)) int plugin_step(int x) { return x * 3 + 1; }

int plugin_run(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += plugin_step(i);
  return total;
}
