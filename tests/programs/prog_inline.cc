// Inlined calls at -O2: always_inline helpers nested two deep, a flatten function that
// takes its callees in, an ordinary small helper the compiler inlines on its own, and an
// exception thrown from an inlined function and caught in the function it was put in.
#include <cstdio>
#include <stdexcept>

volatile int sink;

__attribute__((always_inline)) inline int square(int x) {
  sink = x;
  return x * x;
}

__attribute__((always_inline)) inline int sum_of_squares(int a, int b) {
  int s = square(a);
  sink = s;
  return s + square(b);
}

static int add_one(int x) {  // small and static: inlined at -O2 without being asked
  sink = x;
  return x + 1;
}

__attribute__((noinline)) int helper_called(int x) {
  sink = x;
  return x * 3;
}

__attribute__((flatten, noinline)) int flat(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += add_one(i) + helper_called(i);
  return total;
}

__attribute__((always_inline)) inline void check_positive(int x) {
  sink = x;
  if (x < 0) throw std::invalid_argument("negative");
}

__attribute__((noinline)) int guarded(int x) {
  try {
    check_positive(x);
    return x;
  } catch (const std::invalid_argument&) {
    return -1;
  }
}

__attribute__((noinline)) int work(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += sum_of_squares(i, i + 1);
  return total + flat(n);
}

int main(int argc, char**) {
  int n = 3 + argc;  // not a constant: work's loops stay loops
  int r = work(n);
  r += guarded(n);
  r += guarded(-n);
  std::printf("%d\n", r);
  return 0;
}
