// g++ -O2 moves main's catch block to main.cold and may_throw's throw to may_throw.cold:
// may_throw is called 8 times and throws on the 4 odd ones, which main catches; main is
// called once.
#include <cstdio>
#include <stdexcept>

__attribute__((noinline)) int may_throw(int i) {
  if (i % 2 == 1 && i < 10) throw std::runtime_error("odd");
  return i * 3;
}

int main() {
  int total = 0, caught = 0;
  for (int i = 0; i < 8; ++i) {
    try {
      total += may_throw(i);
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  std::printf("%d %d\n", total, caught);
  return 0;
}
