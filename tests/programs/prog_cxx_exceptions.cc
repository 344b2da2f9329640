// C++ exceptions thrown four frames deep and caught in main.
#include <cstdio>
#include <stdexcept>

volatile int depth_reached;

__attribute__((noinline)) int level(int depth) {
  depth_reached = depth;
  if (depth == 4) throw std::runtime_error("deep");
  return level(depth + 1) + 1;
}

int main() {
  int caught = 0;
  for (int i = 0; i < 2; ++i) {
    try {
      level(0);
    } catch (const std::exception&) {
      ++caught;
    }
  }
  std::printf("%d\n", caught);
  return caught == 2 ? 0 : 1;
}
