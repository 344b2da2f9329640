#include "common/mapped_array.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace ptd {
namespace {

struct Pair {
  uint64_t a;
  uint64_t b;
};

// Growing (nine times from 64 KiB: the pages move, nothing is copied) keeps every element.
TEST(MappedArrayTest, GrowingKeepsEveryElement) {
  MappedArray<Pair> array;
  EXPECT_TRUE(array.empty());
  constexpr uint64_t kCount = 2'000'000;  // 32 MB
  for (uint64_t i = 0; i < kCount; ++i) array.push_back({i, ~i * 7});
  ASSERT_EQ(array.size(), kCount);
  for (uint64_t i = 0; i < kCount; ++i) {
    if (array[i].a != i || array[i].b != ~i * 7) FAIL() << "element " << i;
  }
  uint64_t n = 0;
  for (const Pair& p : array) n += p.a == n ? 1 : 0;
  EXPECT_EQ(n, kCount);
}

TEST(MappedArrayTest, MovesTakeTheElements) {
  MappedArray<Pair> a;
  for (uint64_t i = 0; i < 100'000; ++i) a.push_back({i, i});
  MappedArray<Pair> b(std::move(a));
  EXPECT_TRUE(a.empty());
  ASSERT_EQ(b.size(), 100'000u);
  EXPECT_EQ(b[99'999].a, 99'999u);
  MappedArray<Pair> c;
  c.push_back({1, 2});
  c = std::move(b);
  ASSERT_EQ(c.size(), 100'000u);
  EXPECT_EQ(c[12'345].b, 12'345u);
  a.push_back({5, 6});  // a moved-from array is usable
  EXPECT_EQ(a[0].b, 6u);
}

// What FastBlockCache does when its image changes: the next entries reuse the pages.
TEST(MappedArrayTest, ClearEmptiesItAndKeepsItsMapping) {
  MappedArray<Pair> array;
  for (uint64_t i = 0; i < 1000; ++i) array.push_back({i, i});
  const Pair* mapping = array.data();
  array.clear();
  EXPECT_TRUE(array.empty());
  array.push_back({7, 8});
  ASSERT_EQ(array.size(), 1u);
  EXPECT_EQ(array.data(), mapping);
  // The same pages, not fresh ones (those would read 0): past size(), still in the mapping.
  EXPECT_EQ(array.data()[999].a, 999u);
  array.back().b = 9;
  array[0].a = 6;
  EXPECT_EQ(array[0].a, 6u);
  EXPECT_EQ(array[0].b, 9u);
}

}  // namespace
}  // namespace ptd
