// The output block cache: size classes, reuse, the byte limit and eviction order.
#include "runtime/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace pypto::runtime {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(BlockCacheTest, SizeClassesAreMultiplesOfTwoMiB) {
  EXPECT_EQ(BlockCache::size_class(1), 2 * kMiB);
  EXPECT_EQ(BlockCache::size_class(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(BlockCache::size_class(2 * kMiB + 1), 4 * kMiB);
  EXPECT_EQ(BlockCache::size_class(63 * kMiB), 64 * kMiB);
}

TEST(BlockCacheTest, ReleasedBlocksAreReusedWithinTheirSizeClass) {
  BlockCache cache(64 * kMiB);
  void* a = cache.acquire(5 * kMiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % (2 * kMiB), 0u);
  std::memset(a, 1, 6 * kMiB);  // the whole size class is usable
  cache.release(a, 5 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 6 * kMiB);
  void* other = cache.acquire(9 * kMiB);  // another class: a new block
  EXPECT_NE(other, a);
  EXPECT_EQ(cache.acquire(6 * kMiB), a);  // same class (6 MiB): the cached block
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cache.stats().misses, 2);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  cache.release(a, 6 * kMiB);
  cache.release(other, 9 * kMiB);
}

TEST(BlockCacheTest, TheLimitEvictsOldestBlocksFirst) {
  BlockCache cache(8 * kMiB);
  void* a = cache.acquire(4 * kMiB);
  void* b = cache.acquire(4 * kMiB);
  void* c = cache.acquire(2 * kMiB);
  cache.release(a, 4 * kMiB);
  cache.release(b, 4 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 8 * kMiB);
  cache.release(c, 2 * kMiB);  // a (the oldest) goes to make room
  EXPECT_EQ(cache.stats().cached_bytes, 6 * kMiB);
  EXPECT_EQ(cache.acquire(4 * kMiB), b);
  EXPECT_EQ(cache.acquire(2 * kMiB), c);
  cache.release(b, 4 * kMiB);
  cache.release(c, 2 * kMiB);
  // A block larger than the limit is never kept; lowering the limit frees what no longer fits.
  void* big = cache.acquire(10 * kMiB);
  cache.release(big, 10 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 6 * kMiB);
  cache.set_limit(2 * kMiB);
  EXPECT_EQ(cache.stats().cached_bytes, 2 * kMiB);
  cache.set_limit(0);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
}

}  // namespace
}  // namespace pypto::runtime
