/// Memory for large arrays the runtime's callers allocate: huge-page advice, and a cache that
/// recycles the blocks of large kernel outputs.
#ifndef PYPTO_RUNTIME_MEMORY_H_
#define PYPTO_RUNTIME_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace pypto::runtime {

/// Arrays at least this large are worth backing with transparent huge pages.
constexpr size_t kHugePageMinBytes = size_t{4} << 20;

/// Asks the kernel to back the 2 MiB-aligned part of [ptr, ptr + bytes) with transparent huge
/// pages before it is first touched, so filling a fresh output costs a few page faults instead of
/// one per 4 KiB. Returns false when nothing was advised (too small, or the system refused);
/// the memory stays valid either way.
bool advise_huge_pages(void* ptr, size_t bytes);

/// Recycles the memory of large outputs. A fresh block's pages are mapped and zeroed by the kernel
/// as they are first written (for a 64 MiB output that costs about as much as the kernel that
/// fills it); a block released here is kept, up to a byte limit, and handed out again for the
/// next request of its size class, so a kernel called in a loop writes into mapped memory.
/// Blocks are 2 MiB aligned, advised into huge pages, and sized in multiples of 2 MiB.
/// Thread-safe.
class BlockCache {
 public:
  /// The process-wide cache; its limit starts from PYPTO_OUTPUT_CACHE_MB (default 1024; 0 turns
  /// recycling off; an invalid value keeps the default).
  static BlockCache& instance();

  explicit BlockCache(size_t limit_bytes) : limit_(limit_bytes) {}
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  /// The size class of a request: `bytes` rounded up to a multiple of 2 MiB.
  static size_t size_class(size_t bytes);
  /// A block of at least `bytes` (a cached one of the same size class when there is one); its
  /// contents are unspecified. Throws std::bad_alloc when memory is exhausted.
  void* acquire(size_t bytes);
  /// Gives back a block from `acquire(bytes)`: kept while the cached total stays within the limit
  /// (older blocks are freed first to make room), freed otherwise.
  void release(void* block, size_t bytes);
  /// Frees every cached block.
  void clear();

  size_t limit() const;
  /// Sets the byte limit of cached blocks (freeing blocks beyond it).
  void set_limit(size_t bytes);

  struct Stats {
    size_t cached_bytes = 0;
    int64_t hits = 0;
    int64_t misses = 0;
  };
  Stats stats() const;

 private:
  void evict_until(size_t bytes);  // with mu_ held: frees oldest blocks until cached <= bytes

  mutable std::mutex mu_;
  size_t limit_;
  // Cached blocks and their size classes, oldest first (evicted first). At most limit / 2 MiB.
  std::vector<std::pair<void*, size_t>> cached_;
  Stats stats_;
};

}  // namespace pypto::runtime

#endif  // PYPTO_RUNTIME_MEMORY_H_
