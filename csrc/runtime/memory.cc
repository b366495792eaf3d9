#include "runtime/memory.h"

#include "runtime/runtime.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <cstdlib>
#include <new>
#include <string>

namespace pypto::runtime {

bool advise_huge_pages(void* ptr, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (ptr == nullptr || bytes < kHugePageMinBytes) return false;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + bytes) & ~(kHuge - 1);
  if (end <= begin) return false;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
#else
  (void)ptr;
  (void)bytes;
  return false;
#endif
}

namespace {

constexpr size_t kBlockAlign = size_t{2} << 20;
constexpr size_t kDefaultCacheMiB = 1024;

size_t limit_from_environment() {
  auto mib = env_int("PYPTO_OUTPUT_CACHE_MB", 0, int64_t{1} << 30);
  return static_cast<size_t>(mib ? *mib : kDefaultCacheMiB) << 20;
}

}  // namespace

BlockCache& BlockCache::instance() {
  // Intentionally leaked: outputs may be released during interpreter shutdown, after static
  // destructors would have run.
  static BlockCache* cache = new BlockCache(limit_from_environment());
  return *cache;
}

BlockCache::~BlockCache() { clear(); }

size_t BlockCache::size_class(size_t bytes) {
  return std::max<size_t>(kBlockAlign, (bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
}

void* BlockCache::acquire(size_t bytes) {
  const size_t size = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The most recently cached block of this size class: its pages are the likeliest still warm.
    for (auto it = cached_.rbegin(); it != cached_.rend(); ++it) {
      if (it->second != size) continue;
      void* block = it->first;
      cached_.erase(std::next(it).base());
      stats_.cached_bytes -= size;
      ++stats_.hits;
      return block;
    }
    ++stats_.misses;
  }
  void* block = std::aligned_alloc(kBlockAlign, size);
  if (block == nullptr) throw std::bad_alloc();
  advise_huge_pages(block, size);
  return block;
}

void BlockCache::release(void* block, size_t bytes) {
  if (block == nullptr) return;
  const size_t size = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (size <= limit_) {
      evict_until(limit_ - size);
      cached_.emplace_back(block, size);
      stats_.cached_bytes += size;
      return;
    }
  }
  std::free(block);
}

void BlockCache::evict_until(size_t bytes) {
  size_t n = 0;
  while (stats_.cached_bytes > bytes && n < cached_.size()) {
    const auto [block, size] = cached_[n++];
    stats_.cached_bytes -= size;
    std::free(block);
  }
  cached_.erase(cached_.begin(), cached_.begin() + static_cast<std::ptrdiff_t>(n));
}

void BlockCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  evict_until(0);
}

size_t BlockCache::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

void BlockCache::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
  evict_until(bytes);
}

BlockCache::Stats BlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace pypto::runtime
