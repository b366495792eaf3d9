// The region index's internals, shared by its files: region_index.cc (canonical accesses,
// conflicts, query and update: the submission path), region_layouts.cc (interning layouts,
// buffers and tensor handles; the free region predicates) and box_tables.cc (the per-layout
// tables of known boxes). Nothing outside them includes this header.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/region_index.h"

// The submission path is a chain of small steps called from more than one place; GCC would not
// inline them on its own.
#if defined(__GNUC__)
#define PYPTO_HOT_INLINE [[gnu::always_inline]] inline
#else
#define PYPTO_HOT_INLINE inline
#endif

namespace pypto::runtime {

// Buckets per level beyond which a node goes to the buffer's wide list instead.
inline constexpr int64_t kMaxBuckets = int64_t{1} << 22;
inline constexpr int kLevels = 63;
inline constexpr uint32_t kNoNode = UINT32_MAX;
enum : int { kAccessEmpty, kAccessOk, kAccessInvalid };

// The grid level of a box with outermost extent `extent`: buckets of 2^level coordinates, so the
// box spans at most two buckets.
inline int level_of(int64_t extent) {
  if (extent <= 1) return 0;
  const int level = 64 - __builtin_clzll(static_cast<uint64_t>(extent - 1));
  return level < kLevels - 1 ? level : kLevels - 1;
}
inline constexpr size_t kMinSweep = 256;
// Node capacity all reused buffers keep across runs together (about 24 MB), and slots the layout
// table keeps.
inline constexpr size_t kKeepNodes = size_t{1} << 17;
inline constexpr size_t kKeepDescSlots = size_t{1} << 12;
inline constexpr size_t kKeepBuffers = 256;
// Slots of a layout's box table: initial, and the bound beyond which it is emptied instead of grown.
inline constexpr size_t kMinBoxSlots = 16;
inline constexpr size_t kMaxBoxSlots = size_t{1} << 16;
inline constexpr uint32_t kMinReaderPrune = 16;
// Bucket heads per grid level a reused buffer keeps across runs.
inline constexpr size_t kKeepBuckets = size_t{1} << 14;
// Predecessor lists up to this long are deduplicated as they grow.
inline constexpr size_t kShortPreds = 16;

/// The allocation a region belongs to: its `buffer`, or `base` when unset.
inline void* buffer_of(const pypto_region& r) { return r.buffer ? r.buffer : r.base; }

inline int64_t address(const void* p) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(p)); }

// Index-space reasoning is only sound when both regions address memory the same
// way; a zero stride aliases distinct indices, so it is excluded.
inline bool same_layout(const pypto_region& a, const pypto_region& b) {
  if (a.ndim != b.ndim || a.elem_size != b.elem_size) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.stride[d] != b.stride[d] || a.stride[d] == 0) return false;
  }
  return true;
}

// Half-open byte range [lo, hi) spanned by a non-empty region, as addresses
// (views of one buffer have different bases).
inline std::pair<int64_t, int64_t> byte_range(const pypto_region& r) {
  int64_t lo = 0;
  int64_t hi = 0;
  for (int d = 0; d < r.ndim; ++d) {
    int64_t first = r.offset[d] * r.stride[d];
    int64_t last = (r.offset[d] + r.extent[d] - 1) * r.stride[d];
    lo += std::min(first, last);
    hi += std::max(first, last);
  }
  const int64_t origin = address(r.base);
  return {origin + lo * r.elem_size, origin + (hi + 1) * r.elem_size};
}

// The 64-bit finaliser of MurmurHash3: every input bit affects every output bit.
inline uint64_t finalize(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

inline void insert(std::vector<RegionDesc*>& table, RegionDesc* d) {
  const size_t mask = table.size() - 1;
  size_t i = d->hash & mask;
  while (table[i] != nullptr) i = (i + 1) & mask;
  table[i] = d;
}

inline size_t pointer_slot(const void* key, size_t mask) {
  return static_cast<size_t>(((reinterpret_cast<uintptr_t>(key) >> 4) * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

// Tiles a box table's grid holds at most (64 KB of node numbers; the hash table holds twice as many boxes).
inline constexpr int64_t kMaxGridTiles = int64_t{1} << 14;

// Index of tile `tile` in a row-major grid of `dims` tiles per dim (each coordinate below its dim).
template <typename Dim>
inline size_t grid_slot(const Dim* dims, const int64_t* tile, int ndim) {
  size_t i = 0;
  for (int k = 0; k < ndim; ++k) i = i * static_cast<size_t>(dims[k]) + static_cast<size_t>(tile[k]);
  return i;
}

// Slot of box (`offset`, `extent`) in a box table of `mask + 1` slots.
inline size_t box_slot(const int64_t* offset, int ndim, uint64_t mask) {
  uint64_t h = 0;
  for (int k = 0; k < ndim; ++k) h = (h + static_cast<uint64_t>(offset[k])) * 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>((h >> 40) & mask);
}

// Freed reader-list blocks, by power-of-two capacity, for reuse by the next list that grows: a
// graph's lists grow again the same way every run, and this keeps that off the allocator. Per
// thread, so that indexes on different threads never share state; bounded in bytes.
class ReaderBlocks {
 public:
  ReaderBlocks() = default;
  ReaderBlocks(const ReaderBlocks&) = delete;
  ReaderBlocks& operator=(const ReaderBlocks&) = delete;
  ~ReaderBlocks() {
    for (auto& blocks : free_) {
      for (int64_t* p : blocks) delete[] p;
    }
  }

  static ReaderBlocks& local() {
    thread_local ReaderBlocks blocks;
    return blocks;
  }

  int64_t* take(uint32_t cap) {
    auto& blocks = free_[__builtin_ctz(cap)];
    if (blocks.empty()) return new int64_t[cap];
    int64_t* p = blocks.back();
    blocks.pop_back();
    kept_bytes_ -= cap * sizeof(int64_t);
    return p;
  }

  void give(int64_t* p, uint32_t cap) {
    const size_t bytes = cap * sizeof(int64_t);
    if (kept_bytes_ + bytes > kMaxKeptBytes) {
      delete[] p;
      return;
    }
    free_[__builtin_ctz(cap)].push_back(p);
    kept_bytes_ += bytes;
  }

 private:
  static constexpr size_t kMaxKeptBytes = size_t{16} << 20;
  std::vector<int64_t*> free_[32];
  size_t kept_bytes_ = 0;
};

// The readers of a box since its last write: most boxes have one or two, kept inline.
class ReaderList {
 public:
  ReaderList() = default;
  ReaderList(const ReaderList&) = delete;
  ReaderList& operator=(const ReaderList&) = delete;
  ReaderList(ReaderList&& o) noexcept { *this = std::move(o); }
  ReaderList& operator=(ReaderList&& o) noexcept {
    if (this != &o) {
      release();
      size_ = o.size_;
      cap_ = o.cap_;
      heap_ = o.heap_;
      std::copy(o.inline_, o.inline_ + kInline, inline_);
      o.heap_ = nullptr;
      o.size_ = 0;
      o.cap_ = kInline;
    }
    return *this;
  }
  ~ReaderList() { release(); }

  const int64_t* begin() const { return heap_ != nullptr ? heap_ : inline_; }
  const int64_t* end() const { return begin() + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t back() const { return begin()[size_ - 1]; }
  void clear() { size_ = 0; }

  void push_back(int64_t v) {
    if (size_ == cap_) {
      const uint32_t cap = cap_ * 2;
      int64_t* heap = ReaderBlocks::local().take(cap);
      std::copy(begin(), end(), heap);
      if (heap_ != nullptr) ReaderBlocks::local().give(heap_, cap_);
      heap_ = heap;
      cap_ = cap;
    }
    int64_t* d = data();
    d[size_++] = v;
    // The next push to this list comes many tasks later; have its cache line fetched by then.
    __builtin_prefetch(d + size_ + 7, 1, 3);
  }

  // Empties the list, keeping its storage only while it is small.
  void reset() {
    if (cap_ > kKeepCap) release();
    size_ = 0;
  }

  // Frees the storage.
  void release() {
    if (heap_ != nullptr) ReaderBlocks::local().give(heap_, cap_);
    heap_ = nullptr;
    size_ = 0;
    cap_ = kInline;
  }

  template <typename Pred>
  void erase_if(Pred&& pred) {
    int64_t* d = data();
    size_ = static_cast<uint32_t>(std::remove_if(d, d + size_, pred) - d);
  }

 private:
  static constexpr uint32_t kInline = 2;
  static constexpr uint32_t kKeepCap = 16;
  int64_t* data() { return heap_ != nullptr ? heap_ : inline_; }

  int64_t inline_[kInline] = {};
  int64_t* heap_ = nullptr;
  uint32_t size_ = 0;
  uint32_t cap_ = kInline;
};

struct alignas(64) RegionIndex::Node {
  // User-provided, so that creating a node does not first zero its boxes (the creator fills them).
  Node() {}  // NOLINT(modernize-use-equals-default)
  // First, in one cache line: what an access of a known box reads and writes.
  int64_t writer = -1;
  // The run that last accessed the node (`RegionIndex::run_`).
  uint32_t run = 0;
  uint32_t prune_at = kMinReaderPrune;
  ReaderList readers;
  bool live = true;
  // No other live node overlaps this one (conservative: set false when one might).
  bool isolated = true;
  // Some entry of `readers` may be an accumulator, held as ~seq (negative): reads wait for those,
  // accumulations only for the plain readers.
  bool accumulated = false;
  uint32_t stamp = 0;
  int32_t layout;
  int32_t ndim;
  // Next node in each grid bucket the node is in (a node spans at most two buckets of its level).
  uint32_t next[2];
  int64_t lo;
  int64_t hi;
  int64_t offset[PYPTO_MAX_DIMS];
  int64_t extent[PYPTO_MAX_DIMS];
};

struct RegionIndex::Layout {
  int32_t elem_size;
  int32_t ndim;
  int64_t stride[PYPTO_MAX_DIMS];
};

// Nodes by an interval of keys [first, last] (rows of the allocation's primary layout, or bytes
// from its start), on a grid per size class: level L holds intervals of length in (2^(L-1), 2^L] in
// buckets of 2^L keys, so an interval spans at most two buckets. A bucket is an intrusive list: its
// head here, the links in the nodes (`Node::next`, one grid per node).
struct RegionIndex::KeyGrid {
  std::vector<std::vector<uint32_t>> levels;
  uint64_t used = 0;

  // Puts node `i` (its links `next`) in the buckets of [first, last]; false (nothing done) when
  // they lie beyond kMaxBuckets or before key 0.
  bool place(int64_t first, int64_t last, uint32_t i, uint32_t* next) {
    if (first < 0 || last < first) return false;
    const int level = level_of(last - first + 1);
    const int64_t b0 = first >> level;
    const int64_t b1 = last >> level;
    if (b1 >= kMaxBuckets) return false;
    if (levels.size() <= static_cast<size_t>(level)) levels.resize(static_cast<size_t>(level) + 1);
    auto& heads = levels[static_cast<size_t>(level)];
    if (static_cast<int64_t>(heads.size()) <= b1) {
      // Geometric growth: boxes usually arrive in increasing order, one new bucket at a time.
      heads.resize(std::max(static_cast<size_t>(b1) + 1, std::min(2 * heads.size(), static_cast<size_t>(kMaxBuckets))),
                   kNoNode);
    }
    for (int64_t b = b0; b <= b1; ++b) {
      next[b - b0] = heads[static_cast<size_t>(b)];
      heads[static_cast<size_t>(b)] = i;
    }
    used |= uint64_t{1} << level;
    return true;
  }

  // The number of buckets a scan of [first, last] walks.
  int64_t buckets(int64_t first, int64_t last) const {
    int64_t n = 0;
    for (uint64_t u = used; u != 0; u &= u - 1) {
      const int level = __builtin_ctzll(u);
      const int64_t b1 = std::min<int64_t>(static_cast<int64_t>(levels[static_cast<size_t>(level)].size()) - 1,
                                           last >> level);
      n += std::max<int64_t>(0, b1 - (first >> level) + 1);
    }
    return n;
  }

  // Calls `visit(i)` for every node in a bucket that [first, last] (first >= 0) touches (a node in
  // two such buckets twice); `key(i)` is node i's first key.
  template <typename Key, typename Visit>
  void scan(int64_t first, int64_t last, const std::vector<Node>& nodes, Key key, Visit visit) const;

  // Empties every bucket; with `keep` > 0, releases the levels of more than `keep` buckets.
  void empty(size_t keep = 0) {
    for (auto& heads : levels) {
      if (keep > 0 && heads.size() > keep) {
        std::vector<uint32_t>().swap(heads);
      } else {
        std::fill(heads.begin(), heads.end(), kNoNode);
      }
    }
    used = 0;
  }
};

struct RegionIndex::Buffer {
  // First: what a lookup in a layout's box table reads.
  std::vector<Node> nodes;
  // Bumped whenever node indices change (a sweep, a clear), which invalidates the box tables.
  uint64_t gen = 0;
  std::vector<Layout> layouts;
  // Nodes superseded by a covering write, dropped at the next sweep.
  size_t dead = 0;
  // The allocation's address (the key its record was found by).
  int64_t origin = 0;
  // Nodes of the primary layout by their outermost coordinates (`rows`), the other nodes by their
  // byte ranges from `origin` (`bytes`), and those neither grid holds (`wide`). A node of the primary
  // layout lies within its rows' bytes (canonicalisation keeps each coordinate inside the next
  // outer stride), so an access through any layout finds its candidates in both grids.
  KeyGrid rows;
  KeyGrid bytes;
  std::vector<uint32_t> wide;
  size_t sweep_at = kMinSweep;
  // Nodes created since the last sweep check of the current submission.
  bool dirty = false;
  // The last run that looked up a layout of the buffer.
  uint32_t run = 0;
  // The interned layouts of the allocation, whose memos point into `nodes`.
  std::vector<const RegionDesc*> descs;

  // Drops the layouts' memos: node numbers changed or the node array moved.
  void forget_memos() {
    for (const RegionDesc* d : descs) d->memo_ptr = nullptr;
  }

  // Node numbers changed: box tables and memos no longer hold.
  void renumbered() {
    ++gen;
    forget_memos();
  }

  int32_t layout_id(int32_t elem_size, int32_t ndim, const int64_t* stride) {
    for (size_t i = 0; i < layouts.size(); ++i) {
      const Layout& l = layouts[i];
      if (l.elem_size == elem_size && l.ndim == ndim && std::equal(stride, stride + ndim, l.stride)) {
        return static_cast<int32_t>(i);
      }
    }
    Layout l{elem_size, ndim, {}};
    std::copy(stride, stride + ndim, l.stride);
    layouts.push_back(l);
    return static_cast<int32_t>(layouts.size() - 1);
  }

  // The row length in bytes of the primary layout (its outermost canonical stride), or 0 when
  // there is none.
  int64_t row_bytes() const {
    if (layouts.empty() || layouts[0].ndim == 0) return 0;
    return layouts[0].stride[0] * layouts[0].elem_size;
  }

  // Registers node `i` in the grid of its layout, or the wide list.
  void place(uint32_t i) {
    Node& n = nodes[i];
    const bool placed = n.layout == 0 && n.ndim > 0
                            ? rows.place(n.offset[0], n.offset[0] + n.extent[0] - 1, i, n.next)
                            : bytes.place(n.lo - origin, n.hi - 1 - origin, i, n.next);
    if (!placed) wide.push_back(i);
  }

  // Empties the buffer for reuse by another allocation; its node array keeps its capacity only
  // while that fits in `keep_nodes`, which is reduced by what it keeps.
  void clear(size_t& keep_nodes) {
    clear_nodes(keep_nodes);
    layouts.clear();
    descs.clear();
  }

  // Drops every node (as `clear`), keeping the layouts, which interned layouts still name.
  void clear_nodes(size_t& keep_nodes) {
    if (nodes.capacity() > keep_nodes) {
      std::vector<Node>().swap(nodes);
    } else {
      nodes.clear();
      keep_nodes -= nodes.capacity();
    }
    dead = 0;
    // Bucket heads keep their size (emptied), so the next run does not grow them again bucket by
    // bucket; only large ones are released.
    rows.empty(kKeepBuckets);
    bytes.empty(kKeepBuckets);
    wide.clear();
    sweep_at = kMinSweep;
    renumbered();
    dirty = false;
  }

  // Whether the buffer's nodes can be kept for the next run: none was superseded and the run that
  // ends (`run`) accessed every one, so a run repeating this one finds all its boxes again.
  bool reusable(uint32_t run) const {
    if (dead != 0) return false;
    for (const Node& n : nodes) {
      if (n.run != run) return false;
    }
    return true;
  }

  // Forgets the tasks of the nodes, keeping the nodes (their boxes, grid links and isolation), so
  // that the layouts' memos and box tables stay valid.
  void forget_tasks() {
    for (Node& n : nodes) {
      n.writer = -1;
      n.readers.reset();
      n.prune_at = kMinReaderPrune;
    }
    dirty = false;
  }

  void rebuild() {
    rows.empty();
    bytes.empty();
    wide.clear();
    for (uint32_t i = 0; i < nodes.size(); ++i) place(i);
  }
};

template <typename Key, typename Visit>
void RegionIndex::KeyGrid::scan(int64_t first, int64_t last, const std::vector<Node>& nodes, Key key,
                                Visit visit) const {
  for (uint64_t u = used; u != 0; u &= u - 1) {
    const int level = __builtin_ctzll(u);
    const auto& heads = levels[static_cast<size_t>(level)];
    const int64_t b1 = std::min<int64_t>(static_cast<int64_t>(heads.size()) - 1, last >> level);
    for (int64_t k = first >> level; k <= b1; ++k) {
      for (uint32_t i = heads[static_cast<size_t>(k)]; i != kNoNode;) {
        visit(i);
        // The node's first bucket links through next[0], its second through next[1].
        i = nodes[i].next[(key(i) >> level) == k ? 0 : 1];
      }
    }
  }
}

// A region of a task in canonical form.
struct RegionIndex::Canon {
  RegionAccess src;
  Buffer* buf;
  int32_t layout;
  int32_t ndim;
  int64_t offset[PYPTO_MAX_DIMS];
  int64_t extent[PYPTO_MAX_DIMS];
  int64_t lo;
  int64_t hi;
  bool write;
  bool accum;
  // Found by `recall`: the memo's node, no other node overlaps.
  bool recalled;
  // Filled by `query`: the node with exactly this box (or -1) and the overlapping nodes.
  int64_t exact;
  size_t first_match;
  size_t num_matches;
};

}  // namespace pypto::runtime
