// Four threads, each throwing a C++ exception five frames deep and catching it in its
// thread function, kThrows times: 4 * kThrows throws, unwound across frames in every thread.
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

constexpr int kThreads = 4;
constexpr int kThrows = 10;

volatile int depth_reached;

__attribute__((noinline)) int dive(int depth) {
  depth_reached = depth;
  if (depth == 4) throw std::runtime_error("deep");
  return dive(depth + 1) + 1;
}

__attribute__((noinline)) void worker(int* caught) {
  for (int i = 0; i < kThrows; ++i) {
    try {
      dive(0);
    } catch (const std::exception&) {
      ++*caught;
    }
  }
}

int main() {
  std::vector<int> caught(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, &caught[t]);
  for (std::thread& t : threads) t.join();
  int total = 0;
  for (int c : caught) total += c;
  std::printf("%d\n", total);
  return total == kThreads * kThrows ? 0 : 1;
}
