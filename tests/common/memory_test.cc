#include "common/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace ptd {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// How many pages of [data, data + bytes) are mapped (mincore: anonymous pages count once
// touched or prefaulted).
size_t ResidentPages(const void* data, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes + kPage - 1) & ~(kPage - 1);
  std::vector<unsigned char> vec((end - begin) / kPage);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

// A fresh anonymous mapping, unmapped at the end.
struct Fresh {
  explicit Fresh(size_t size) : size(size) {
    data = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  }
  ~Fresh() { munmap(data, size); }
  char* data;
  size_t size;
};

#define PTD_REQUIRE_PREFAULT()                                                        \
  do {                                                                                \
    Fresh probe(kMinPrefaultBytes);                                                   \
    if (!PrefaultForWrite(probe.data, probe.size)) {                                  \
      GTEST_SKIP() << "madvise(MADV_POPULATE_WRITE) is not supported (Linux < 5.14)"; \
    }                                                                                 \
  } while (0)

TEST(PrefaultForWriteTest, MapsTheWholePagesOfTheRangeOnly) {
  PTD_REQUIRE_PREFAULT();
  Fresh m(64 * kPage);
  ASSERT_EQ(ResidentPages(m.data, m.size), 0u);
  // From the middle of page 2 to the middle of page 40: pages 3..39 are whole.
  ASSERT_TRUE(PrefaultForWrite(m.data + 2 * kPage + 100, 38 * kPage));
  EXPECT_EQ(ResidentPages(m.data, m.size), 37u);
  EXPECT_EQ(ResidentPages(m.data + 3 * kPage, 37 * kPage), 37u);
  EXPECT_EQ(ResidentPages(m.data + 40 * kPage, 24 * kPage), 0u);
}

TEST(PrefaultForWriteTest, LeavesSmallRangesAlone) {
  Fresh m(64 * kPage);
  EXPECT_FALSE(PrefaultForWrite(m.data, kMinPrefaultBytes - 1));
  EXPECT_EQ(ResidentPages(m.data, m.size), 0u);
}

struct Event88 {
  char bytes[88];  // a size that does not divide kMinPrefaultBytes
};

TEST(PushBackPrefaultedTest, MapsRoomAheadAsTheVectorFills) {
  PTD_REQUIRE_PREFAULT();
  std::vector<Event88> v;
  v.reserve(100'000);  // ~8.8 MB: from mmap, untouched but for malloc's header page
  ASSERT_LE(ResidentPages(v.data(), v.capacity() * sizeof(Event88)), 1u);
  PushBackPrefaulted(v, Event88{});
  // The first element's stretch of room is mapped (whole pages), nothing far beyond it.
  const size_t step_pages = kMinPrefaultBytes / kPage;
  EXPECT_GE(ResidentPages(v.data(), kMinPrefaultBytes), step_pages - 1);
  EXPECT_EQ(ResidentPages(reinterpret_cast<char*>(v.data()) + 4 * kMinPrefaultBytes, kMinPrefaultBytes), 0u);
  // Once the first element of the fourth stretch of room is in, that stretch is mapped
  // and the sixth is not yet.
  const size_t step = (kMinPrefaultBytes + sizeof(Event88) - 1) / sizeof(Event88);
  while (v.size() < 3 * step + 1) PushBackPrefaulted(v, Event88{});
  EXPECT_GE(ResidentPages(v.data() + 3 * step, kMinPrefaultBytes), step_pages - 1);
  EXPECT_EQ(ResidentPages(v.data() + 5 * step, kMinPrefaultBytes), 0u);
  EXPECT_EQ(v.size(), 3 * step + 1);
}

TEST(PrefaultingAllocatorTest, HashTablesComeMapped) {
  PTD_REQUIRE_PREFAULT();
  absl::flat_hash_map<uint64_t, uint64_t, absl::Hash<uint64_t>, std::equal_to<uint64_t>,
                      PrefaultingAllocator<std::pair<const uint64_t, uint64_t>>>
      map;
  map.reserve(1 << 16);  // ~1.1 MB of slots and control bytes
  map[1] = 2;
  // The slots of a table this size are one allocation: its pages are mapped though only
  // one element was written.
  const auto* slot = &*map.find(1);
  EXPECT_GE(ResidentPages(slot, kPage), 1u);
  size_t mapped = 0;
  for (uint64_t k = 0; k < 64; ++k) mapped += ResidentPages(reinterpret_cast<const char*>(slot) + k * kPage, 1);
  EXPECT_GE(mapped, 32u) << "pages near the element were not prefaulted";
  EXPECT_EQ(map.at(1), 2u);
}

}  // namespace
}  // namespace ptd
