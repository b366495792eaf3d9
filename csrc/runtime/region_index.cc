#include "runtime/region_index.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "runtime/runtime.h"

// The submission path is a chain of small steps called from more than one place; GCC would not
// inline them on its own.
#if defined(__GNUC__)
#define PYPTO_HOT_INLINE [[gnu::always_inline]] inline
#else
#define PYPTO_HOT_INLINE inline
#endif

namespace pypto::runtime {

namespace {

// Buckets per level beyond which a node goes to the buffer's wide list instead.
constexpr int64_t kMaxBuckets = int64_t{1} << 22;
constexpr int kLevels = 63;
constexpr uint32_t kNoNode = UINT32_MAX;
enum : int { kAccessEmpty, kAccessOk, kAccessInvalid };

// The grid level of a box with outermost extent `extent`: buckets of 2^level coordinates, so the
// box spans at most two buckets.
int level_of(int64_t extent) {
  if (extent <= 1) return 0;
  const int level = 64 - __builtin_clzll(static_cast<uint64_t>(extent - 1));
  return level < kLevels - 1 ? level : kLevels - 1;
}
constexpr size_t kMinSweep = 256;
// Node capacity all reused buffers keep across runs together (about 24 MB), and slots the layout
// table keeps.
constexpr size_t kKeepNodes = size_t{1} << 17;
constexpr size_t kKeepDescSlots = size_t{1} << 12;
constexpr size_t kKeepBuffers = 256;
// Slots of a layout's box table: initial, and the bound beyond which it is emptied instead of grown.
constexpr size_t kMinBoxSlots = 16;
constexpr size_t kMaxBoxSlots = size_t{1} << 16;
constexpr uint32_t kMinReaderPrune = 16;
// Bucket heads per grid level a reused buffer keeps across runs.
constexpr size_t kKeepBuckets = size_t{1} << 14;
// Predecessor lists up to this long are deduplicated as they grow.
constexpr size_t kShortPreds = 16;

/// The allocation a region belongs to: its `buffer`, or `base` when unset.
void* buffer_of(const pypto_region& r) { return r.buffer ? r.buffer : r.base; }

int64_t address(const void* p) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(p)); }

// Index-space reasoning is only sound when both regions address memory the same
// way; a zero stride aliases distinct indices, so it is excluded.
bool same_layout(const pypto_region& a, const pypto_region& b) {
  if (a.ndim != b.ndim || a.elem_size != b.elem_size) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.stride[d] != b.stride[d] || a.stride[d] == 0) return false;
  }
  return true;
}

// Half-open byte range [lo, hi) spanned by a non-empty region, as addresses
// (views of one buffer have different bases).
std::pair<int64_t, int64_t> byte_range(const pypto_region& r) {
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
uint64_t finalize(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

void insert(std::vector<RegionDesc*>& table, RegionDesc* d) {
  const size_t mask = table.size() - 1;
  size_t i = d->hash & mask;
  while (table[i] != nullptr) i = (i + 1) & mask;
  table[i] = d;
}

}  // namespace

bool region_is_empty(const pypto_region& r) {
  for (int d = 0; d < r.ndim; ++d) {
    if (r.extent[d] <= 0) return true;
  }
  return false;
}

bool regions_overlap(const pypto_region& a, const pypto_region& b) {
  if (buffer_of(a) != buffer_of(b) || region_is_empty(a) || region_is_empty(b)) return false;
  if (a.base == b.base && same_layout(a, b)) {
    for (int d = 0; d < a.ndim; ++d) {
      int64_t lo = std::max(a.offset[d], b.offset[d]);
      int64_t hi = std::min(a.offset[d] + a.extent[d], b.offset[d] + b.extent[d]);
      if (lo >= hi) return false;
    }
    return true;
  }
  auto ra = byte_range(a);
  auto rb = byte_range(b);
  return ra.first < rb.second && rb.first < ra.second;
}

bool region_covers(const pypto_region& outer, const pypto_region& inner) {
  if (outer.base != inner.base || buffer_of(outer) != buffer_of(inner)) return false;
  if (region_is_empty(inner)) return true;
  if (region_is_empty(outer) || !same_layout(outer, inner)) return false;
  for (int d = 0; d < outer.ndim; ++d) {
    if (inner.offset[d] < outer.offset[d]) return false;
    if (inner.offset[d] + inner.extent[d] > outer.offset[d] + outer.extent[d]) return false;
  }
  return true;
}

namespace {

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

}  // namespace

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

struct RegionIndex::Buffer {
  // First: what a lookup in a layout's box table reads.
  std::vector<Node> nodes;
  // Bumped whenever node indices change (a sweep, a clear), which invalidates the box tables.
  uint64_t gen = 0;
  std::vector<Layout> layouts;
  // Nodes superseded by a covering write, dropped at the next sweep.
  size_t dead = 0;
  // Nodes of the primary layout by outermost coordinate, on a grid per size class: level L holds
  // boxes of outermost extent in (2^(L-1), 2^L] in buckets of 2^L coordinates. A bucket is an
  // intrusive list: its head here, the links in the nodes.
  std::vector<std::vector<uint32_t>> levels;
  uint64_t used_levels = 0;
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

  // Registers node `i` in its grid level (primary layout) or the wide list.
  void place(uint32_t i) {
    Node& n = nodes[i];
    if (n.layout == 0 && n.ndim > 0) {
      const int level = level_of(n.extent[0]);
      const int64_t b0 = n.offset[0] >> level;
      const int64_t b1 = (n.offset[0] + n.extent[0] - 1) >> level;
      if (b1 < kMaxBuckets) {
        if (levels.size() <= static_cast<size_t>(level)) levels.resize(static_cast<size_t>(level) + 1);
        auto& heads = levels[static_cast<size_t>(level)];
        if (static_cast<int64_t>(heads.size()) <= b1) {
          // Geometric growth: boxes usually arrive in increasing order, one new bucket at a time.
          heads.resize(std::max(static_cast<size_t>(b1) + 1, std::min(2 * heads.size(), static_cast<size_t>(kMaxBuckets))), kNoNode);
        }
        for (int64_t b = b0; b <= b1; ++b) {
          n.next[b - b0] = heads[static_cast<size_t>(b)];
          heads[static_cast<size_t>(b)] = i;
        }
        used_levels |= uint64_t{1} << level;
        return;
      }
    }
    wide.push_back(i);
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
    for (auto& heads : levels) {
      if (heads.size() > kKeepBuckets) {
        std::vector<uint32_t>().swap(heads);
      } else {
        std::fill(heads.begin(), heads.end(), kNoNode);
      }
    }
    used_levels = 0;
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
    for (auto& heads : levels) std::fill(heads.begin(), heads.end(), kNoNode);
    wide.clear();
    for (uint32_t i = 0; i < nodes.size(); ++i) place(i);
  }
};

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
  // Found by `recall`: the memo's node, no other node overlaps.
  bool recalled;
  // Filled by `query`: the node with exactly this box (or -1) and the overlapping nodes.
  int64_t exact;
  size_t first_match;
  size_t num_matches;
};


bool RegionIndex::overlap(const Node& n, const Canon& c) {
  if (n.layout >= 0 && n.layout == c.layout) {
    for (int d = 0; d < c.ndim; ++d) {
      if (std::max(n.offset[d], c.offset[d]) >= std::min(n.offset[d] + n.extent[d], c.offset[d] + c.extent[d])) {
        return false;
      }
    }
    return true;
  }
  return n.lo < c.hi && c.lo < n.hi;
}

bool RegionIndex::same_box(const Node& n, const Canon& c) {
  if (n.layout != c.layout) return false;
  if (c.layout < 0) return n.lo == c.lo && n.hi == c.hi;
  for (int d = 0; d < c.ndim; ++d) {
    if (n.offset[d] != c.offset[d] || n.extent[d] != c.extent[d]) return false;
  }
  return true;
}

bool RegionIndex::covers(const Canon& c, const Node& n) {
  if (c.layout < 0 || n.layout != c.layout) return false;
  for (int d = 0; d < c.ndim; ++d) {
    if (n.offset[d] < c.offset[d] || n.offset[d] + n.extent[d] > c.offset[d] + c.extent[d]) return false;
  }
  return true;
}


RegionIndex::RegionIndex() : buffer_table_(64), desc_table_(64, nullptr) {}

RegionIndex::~RegionIndex() = default;

bool RegionIndex::can_keep_geometry() const {
  if (num_buffers_ > kKeepBuffers || desc_table_.size() > kKeepDescSlots || buffer_table_.size() > kKeepDescSlots) {
    return false;
  }
  size_t nodes = 0;
  for (size_t i = 0; i < num_buffers_; ++i) {
    const Buffer& b = *buffers_[i];
    if (b.run != run_) return false;
    nodes += b.nodes.size();
  }
  return nodes <= kKeepNodes;
}

void RegionIndex::reset() {
  if (can_keep_geometry()) {
    // Every allocation was used by the run that ends: keep layouts, buffers and the nodes of every
    // buffer whose boxes the run accessed in full, forgetting only their tasks. A run that repeats
    // it (the same program on the same tensors) then recalls each box from its first access.
    for (size_t i = 0; i < num_buffers_; ++i) {
      Buffer& b = *buffers_[i];
      if (b.reusable(run_)) {
        b.forget_tasks();
      } else {
        size_t keep_nodes = kKeepNodes;
        b.clear_nodes(keep_nodes);
      }
    }
    for (RegionDesc* d : handles_) d->handle = -1;
  } else {
    reset_all();
  }
  handles_.clear();
  finished_ = nullptr;
  num_canon_ = 0;
  matches_.clear();
  created_.clear();
  ++run_;
}

void RegionIndex::reset_all() {
  if (buffers_.size() > kKeepBuffers) buffers_.resize(kKeepBuffers);
  size_t keep_nodes = kKeepNodes;
  for (size_t i = 0; i < std::min(num_buffers_, buffers_.size()); ++i) buffers_[i]->clear(keep_nodes);
  num_buffers_ = 0;
  if (buffer_table_.size() > kKeepDescSlots) {
    std::vector<BufferSlot>(64).swap(buffer_table_);
  } else {
    std::fill(buffer_table_.begin(), buffer_table_.end(), BufferSlot{});
  }
  num_descs_ = 0;
  if (desc_table_.size() > kKeepDescSlots) {
    std::vector<RegionDesc*>(64, nullptr).swap(desc_table_);
    descs_.clear();
  } else {
    std::fill(desc_table_.begin(), desc_table_.end(), nullptr);
  }
  num_box_tables_ = 0;
  if (box_tables_.size() > kKeepBuffers) box_tables_.clear();
}

const RegionDesc* RegionIndex::intern(const pypto_region& r) { return lookup(r); }

RegionDesc* RegionIndex::lookup(const pypto_region& r) {
  // A cheap hash: descriptors differ mostly in their base, and the full key is compared anyway.
  // Bases are aligned (large allocations to pages), so the key is finalised to spread its low bits
  // over the slot index.
  const uint64_t h = finalize(static_cast<uint64_t>(address(r.base)) ^ (static_cast<uint64_t>(address(r.buffer)) << 7) ^
                              (static_cast<uint64_t>(r.ndim > 0 ? r.stride[0] : 0) << 17) ^
                              (static_cast<uint64_t>(r.ndim > 1 ? r.stride[r.ndim - 1] : r.elem_size) << 29) ^
                              static_cast<uint64_t>(r.ndim));
  const size_t mask = desc_table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    RegionDesc* d = desc_table_[i];
    if (d == nullptr) break;
    if (d->hash == h && d->base == r.base && d->buffer == r.buffer && d->ndim == r.ndim &&
        d->elem_size == r.elem_size && std::equal(r.stride, r.stride + r.ndim, d->stride)) {
      static_cast<Buffer*>(d->index_buffer)->run = run_;
      return d;
    }
  }
  Buffer* buf = buffer(buffer_of(r));
  buf->run = run_;
  // Layout records of earlier runs are reused in place.
  RegionDesc& d = num_descs_ < descs_.size() ? descs_[num_descs_] : descs_.emplace_back();
  fill_desc(d, r, h, buf);
  buf->descs.push_back(&d);
  if (2 * (num_descs_ + 1) > desc_table_.size()) {
    std::vector<RegionDesc*> table(desc_table_.size() * 2, nullptr);
    for (RegionDesc* e : desc_table_) {
      if (e != nullptr) insert(table, e);
    }
    desc_table_.swap(table);
  }
  insert(desc_table_, &d);
  ++num_descs_;
  return &d;
}


namespace {

size_t pointer_slot(const void* key, size_t mask) {
  return static_cast<size_t>(((reinterpret_cast<uintptr_t>(key) >> 4) * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

}  // namespace

// The index's record of allocation `key`, created (or taken from an earlier run) on first use.
RegionIndex::Buffer* RegionIndex::buffer(void* key) {
  size_t mask = buffer_table_.size() - 1;
  size_t i = pointer_slot(key, mask);
  for (; buffer_table_[i].key != nullptr; i = (i + 1) & mask) {
    if (buffer_table_[i].key == key) return buffer_table_[i].buf;
  }
  if (num_buffers_ == buffers_.size()) buffers_.push_back(std::make_unique<Buffer>());
  Buffer* b = buffers_[num_buffers_++].get();
  if (2 * num_buffers_ > buffer_table_.size()) {
    std::vector<BufferSlot> table(buffer_table_.size() * 2);
    table.swap(buffer_table_);
    mask = buffer_table_.size() - 1;
    for (const BufferSlot& e : table) {
      if (e.key == nullptr) continue;
      size_t j = pointer_slot(e.key, mask);
      while (buffer_table_[j].key != nullptr) j = (j + 1) & mask;
      buffer_table_[j] = e;
    }
    i = pointer_slot(key, mask);
    while (buffer_table_[i].key != nullptr) i = (i + 1) & mask;
  }
  buffer_table_[i] = BufferSlot{key, b};
  return b;
}

int32_t RegionIndex::handle(const pypto_region& r) {
  RegionDesc* d = lookup(r);
  if (d->handle < 0) {
    d->handle = static_cast<int32_t>(handles_.size());
    handles_.push_back(d);
  }
  return d->handle;
}

// Sets every field a layout of `r` reads (the arrays up to its ndim) in place.
void RegionIndex::fill_desc(RegionDesc& d, const pypto_region& r, uint64_t h, Buffer* buf) {
  d.base = r.base;
  d.buffer = r.buffer;
  d.ndim = r.ndim;
  d.elem_size = r.elem_size;
  std::copy(r.stride, r.stride + r.ndim, d.stride);
  d.hash = h;
  d.index_buffer = buf;
  d.handle = -1;
  d.memo_node = kNoNode;
  d.memo_ptr = nullptr;
  d.box_table = -1;
  d.layout = -1;
  const int64_t delta_bytes = address(r.base) - address(buffer_of(r));
  bool regular = r.ndim > 0 && delta_bytes >= 0 && delta_bytes % r.elem_size == 0;
  for (int k = 0; k < r.ndim; ++k) regular = regular && r.stride[k] > 0;
  if (!regular) return;
  for (int k = 0; k < r.ndim; ++k) d.perm[k] = static_cast<int8_t>(k);
  // Dims by decreasing stride, ties in dim order (an insertion sort: a handful of dims, and no
  // temporary buffer as std::stable_sort takes).
  for (int k = 1; k < r.ndim; ++k) {
    const int8_t p = d.perm[k];
    int j = k;
    for (; j > 0 && r.stride[d.perm[j - 1]] < r.stride[p]; --j) d.perm[j] = d.perm[j - 1];
    d.perm[j] = p;
  }
  int64_t delta = delta_bytes / r.elem_size;
  for (int k = 0; k < r.ndim; ++k) {
    d.cstride[k] = r.stride[d.perm[k]];
    // Most layouts start at their allocation: no division then.
    d.delta[k] = delta != 0 ? delta / d.cstride[k] : 0;
    delta -= d.delta[k] * d.cstride[k];
  }
  if (delta != 0) return;
  d.layout = buf->layout_id(r.elem_size, r.ndim, d.cstride);
}

// The canonical form of access `a`: kAccessEmpty for an empty box (no dependencies), kAccessInvalid
// for a negative extent or a non-empty box of a null base, kAccessOk otherwise.
int RegionIndex::canonicalize(const RegionAccess& a, Canon& c) {
  const RegionDesc& d = *a.desc;
  bool empty = false;
  for (int k = 0; k < d.ndim; ++k) {
    if (a.extent[k] < 0) return kAccessInvalid;
    empty |= a.extent[k] == 0;
  }
  if (empty) return kAccessEmpty;
  if (d.base == nullptr) return kAccessInvalid;
  c.src = a;
  c.buf = static_cast<Buffer*>(d.index_buffer);
  c.write = a.write;
  c.recalled = false;
  c.ndim = d.ndim;
  c.layout = d.layout;
  if (d.layout >= 0) {
    int64_t lo = 0;
    int64_t span = 0;
    for (int k = d.ndim - 1; k >= 0; --k) {
      const int p = d.perm[k];
      c.offset[k] = a.offset[p] + d.delta[k];
      c.extent[k] = a.extent[p];
      // Each coordinate must stay inside the next outer stride, so that distinct coordinates
      // never name the same element; otherwise fall back to byte ranges.
      if (c.offset[k] < 0 || (k > 0 && span + (c.offset[k] + c.extent[k] - 1) * d.cstride[k] >= d.cstride[k - 1])) {
        c.layout = -1;
      }
      span += (c.offset[k] + c.extent[k] - 1) * d.cstride[k];
      lo += c.offset[k] * d.cstride[k];
    }
    const int64_t origin = address(d.buffer != nullptr ? d.buffer : d.base);
    c.lo = origin + lo * d.elem_size;
    c.hi = origin + (span + 1) * d.elem_size;
    if (c.layout >= 0) return kAccessOk;
  }
  pypto_region r{};
  r.base = d.base;
  r.ndim = d.ndim;
  r.elem_size = d.elem_size;
  for (int k = 0; k < d.ndim; ++k) {
    r.offset[k] = a.offset[k];
    r.extent[k] = a.extent[k];
    r.stride[k] = d.stride[k];
  }
  auto range = byte_range(r);
  c.lo = range.first;
  c.hi = range.second;
  c.layout = -1;
  return kAccessOk;
}

// Appends the tasks an access of node `n` must wait for: its writer, and its readers when writing.
// Short lists are kept free of duplicates as they grow (a task has a handful of predecessors, often
// named by several of its accesses); a long one is sorted and deduplicated once, by add_task.
PYPTO_HOT_INLINE void RegionIndex::conflicts(const Node& n, bool write, std::vector<int64_t>& preds) {
  auto add = [&preds](int64_t p) {
    if (preds.size() <= kShortPreds) {
      for (int64_t q : preds) {
        if (q == p) return;
      }
    }
    preds.push_back(p);
  };
  if (n.writer >= 0) add(n.writer);
  if (write) {
    for (int64_t r : n.readers) add(r);
  }
}

// Records task `seq`'s access of node `n`: a reader (once), or the writer that supersedes them.
PYPTO_HOT_INLINE void RegionIndex::record(Node& n, bool write, int64_t seq) {
  n.run = run_;
  if (!write) {
    if (n.readers.empty() || n.readers.back() != seq) n.readers.push_back(seq);
    return;
  }
  n.writer = seq;
  n.readers.clear();
  n.prune_at = kMinReaderPrune;
}

// The fast path: access `a` repeats the last access through its layout (so its box is valid and
// non-empty), and that box's node is live and overlaps no other live node, so the node alone gives
// the predecessors. Fills only the fields of `c` that `update` and `prune` read for a recalled access.
PYPTO_HOT_INLINE bool RegionIndex::recall(const RegionAccess& a, Canon& c, std::vector<int64_t>& preds) {
  const RegionDesc& d = *a.desc;
  auto* np = static_cast<Node*>(d.memo_ptr);
  if (np == nullptr) return false;
  uint32_t node = d.memo_node;
  for (int k = 0; k < d.ndim; ++k) {
    if ((a.offset[k] ^ d.memo_box[2 * k]) | (a.extent[k] ^ d.memo_box[2 * k + 1])) {
      // Not the last box: maybe an earlier one of this layout.
      Buffer& b = *static_cast<Buffer*>(d.index_buffer);
      node = lookup_box(a, b.gen);
      if (node == kNoNode) return false;
      np = &b.nodes[node];
      break;
    }
  }
  Node& n = *np;
  if (!(n.live & n.isolated)) return false;
  if (node != d.memo_node) set_memo(d, a, node, np);
  c.buf = static_cast<Buffer*>(d.index_buffer);
  c.write = a.write;
  c.recalled = true;
  c.exact = node;
  conflicts(n, a.write, preds);
  return true;
}

namespace {

// Tiles a box table's grid holds at most (64 KB of node numbers; the hash table holds twice as many boxes).
constexpr int64_t kMaxGridTiles = int64_t{1} << 14;

// Index of tile `tile` in a row-major grid of `dims` tiles per dim (each coordinate below its dim).
template <typename Dim>
size_t grid_slot(const Dim* dims, const int64_t* tile, int ndim) {
  size_t i = 0;
  for (int k = 0; k < ndim; ++k) i = i * static_cast<size_t>(dims[k]) + static_cast<size_t>(tile[k]);
  return i;
}

// Slot of box (`offset`, `extent`) in a box table of `mask + 1` slots.
size_t box_slot(const int64_t* offset, int ndim, uint64_t mask) {
  uint64_t h = 0;
  for (int k = 0; k < ndim; ++k) h = (h + static_cast<uint64_t>(offset[k])) * 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>((h >> 40) & mask);
}

}  // namespace

// The node an earlier access of `a`'s layout with `a`'s box resolved to, while the buffer is at
// generation `gen`; kNoNode when unknown.
PYPTO_HOT_INLINE uint32_t RegionIndex::lookup_box(const RegionAccess& a, uint64_t gen) const {
  const RegionDesc& d = *a.desc;
  if (d.box_table < 0) return kNoNode;
  const BoxTable& t = box_tables_[static_cast<size_t>(d.box_table)];
  if (t.gen != gen) return kNoNode;
  const int nd = d.ndim;
  if (t.has_grid) {
    int64_t tile[kBoxTableDims];
    if (grid_tile(t, a, tile)) {
      for (int k = 0; k < nd; ++k) {
        if (tile[k] >= t.grid_dims[k]) return kNoNode;
      }
      return t.grid[grid_slot(t.grid_dims, tile, nd)];
    }
  }
  return lookup_hash(t, a);
}

// The node of `a`'s box in the hash table of `t`, or kNoNode.
uint32_t RegionIndex::lookup_hash(const BoxTable& t, const RegionAccess& a) {
  const int nd = a.desc->ndim;
  const size_t stride = static_cast<size_t>(1 + 2 * nd);
  const uint64_t mask = t.num_slots - 1;
  for (size_t i = box_slot(a.offset, nd, mask);; i = (i + 1) & mask) {
    const int64_t* e = &t.words[i * stride];
    if (e[0] < 0) return kNoNode;
    bool same = true;
    for (int k = 0; k < nd; ++k) same &= (e[1 + k] == a.offset[k]) & (e[1 + nd + k] == a.extent[k]);
    if (same) return static_cast<uint32_t>(e[0]);
  }
}

void RegionIndex::set_memo(const RegionDesc& d, const RegionAccess& a, uint32_t node, Node* ptr) {
  d.memo_node = node;
  d.memo_ptr = ptr;
  for (int k = 0; k < d.ndim; ++k) {
    d.memo_box[2 * k] = a.offset[k];
    d.memo_box[2 * k + 1] = a.extent[k];
  }
}

// Enters `a`'s box and its node in the box table of `a`'s layout (layouts of up to kBoxTableDims
// dims), creating the table on first use.
void RegionIndex::remember(const RegionAccess& a, uint32_t node, uint64_t gen) {
  const RegionDesc& d = *a.desc;
  const int nd = d.ndim;
  if (nd > kBoxTableDims) return;
  const size_t stride = static_cast<size_t>(1 + 2 * nd);
  if (d.box_table < 0) {
    if (num_box_tables_ == box_tables_.size()) box_tables_.emplace_back();
    d.box_table = static_cast<int32_t>(num_box_tables_++);
    BoxTable& t = box_tables_[static_cast<size_t>(d.box_table)];
    t.num_slots = kMinBoxSlots;
    t.words.assign(kMinBoxSlots * stride, -1);
    t.used = 0;
    t.gen = gen;
    // The first box sets the grid's extent, when a grid can hold it.
    t.has_grid = nd > 0;
    for (int k = 0; k < nd; ++k) {
      const int64_t e = a.extent[k];
      t.has_grid &= e > 0 && (e & (e - 1)) == 0;
      t.grid_shift[k] = static_cast<int8_t>(t.has_grid ? __builtin_ctzll(static_cast<uint64_t>(e)) : 0);
      t.grid_dims[k] = 0;
    }
    t.grid.clear();
  }
  BoxTable& t = box_tables_[static_cast<size_t>(d.box_table)];
  if (t.gen != gen) {
    // Node numbers changed (a sweep): start over.
    std::fill(t.words.begin(), t.words.end(), -1);
    std::fill(t.grid.begin(), t.grid.end(), kNoNode);
    t.used = 0;
    t.gen = gen;
  }
  if (t.has_grid) {
    int64_t tile[kBoxTableDims];
    if (grid_tile(t, a, tile)) {
      grid_insert(t, tile, nd, node);
      if (t.has_grid) return;
    }
  }
  hash_insert(t, a.offset, a.extent, nd, node);
}

// Enters a box in the hash table of `t`, growing it, or emptying it when full at its bound (the
// table only saves grid walks: a box it forgets is found again by a query).
void RegionIndex::hash_insert(BoxTable& t, const int64_t* offset, const int64_t* extent, int nd, uint32_t node) {
  const size_t stride = static_cast<size_t>(1 + 2 * nd);
  if (2 * (t.used + 1) > t.num_slots && t.num_slots >= kMaxBoxSlots) {
    std::fill(t.words.begin(), t.words.end(), -1);
    t.used = 0;
  } else if (2 * (t.used + 1) > t.num_slots) {
    std::vector<int64_t> old(t.words.size() * 2, -1);
    old.swap(t.words);
    t.num_slots *= 2;
    t.used = 0;
    for (size_t i = 0; i < old.size(); i += stride) {
      if (old[i] >= 0) insert_box(t, &old[i + 1], &old[i + 1 + nd], nd, static_cast<uint32_t>(old[i]));
    }
  }
  insert_box(t, offset, extent, nd, node);
}

// Whether access `a` is a box of the grid of table `t` (its extents, offsets aligned to them), and
// its tile coordinates.
bool RegionIndex::grid_tile(const BoxTable& t, const RegionAccess& a, int64_t* tile) {
  const int nd = a.desc->ndim;
  bool on_grid = true;
  for (int k = 0; k < nd; ++k) {
    const int shift = t.grid_shift[k];
    tile[k] = a.offset[k] >> shift;
    on_grid &= (a.extent[k] == int64_t{1} << shift) & (a.offset[k] >= 0) &
               ((a.offset[k] & ((int64_t{1} << shift) - 1)) == 0);
  }
  return on_grid;
}

// Enters tile `tile`'s node in the grid, growing the grid to reach it. Past kMaxGridTiles the grid
// is given up: its boxes move to the hash table, and `t.has_grid` turns false.
void RegionIndex::grid_insert(BoxTable& t, const int64_t* tile, int nd, uint32_t node) {
  bool fits = true;
  for (int k = 0; k < nd; ++k) fits &= tile[k] < t.grid_dims[k];
  if (!fits) {
    int64_t dims[kBoxTableDims];
    int64_t total = 1;
    for (int k = 0; k < nd; ++k) {
      dims[k] = tile[k] < t.grid_dims[k] ? t.grid_dims[k] : std::max<int64_t>(tile[k] + 1, 2 * int64_t{t.grid_dims[k]});
      total = dims[k] > kMaxGridTiles ? kMaxGridTiles + 1 : std::min(total * dims[k], kMaxGridTiles + 1);
    }
    std::vector<uint32_t> grid(total > kMaxGridTiles ? 0 : static_cast<size_t>(total), kNoNode);
    // Re-enter the tiles held so far, in the larger grid or (when it is too large) the hash table.
    int64_t at[kBoxTableDims] = {};
    for (size_t i = 0; i < t.grid.size(); ++i) {
      if (t.grid[i] != kNoNode) {
        if (total > kMaxGridTiles) {
          int64_t offset[kBoxTableDims], extent[kBoxTableDims];
          for (int k = 0; k < nd; ++k) {
            extent[k] = int64_t{1} << t.grid_shift[k];
            offset[k] = at[k] << t.grid_shift[k];
          }
          hash_insert(t, offset, extent, nd, t.grid[i]);
        } else {
          grid[grid_slot(dims, at, nd)] = t.grid[i];
        }
      }
      for (int k = nd - 1; k >= 0 && ++at[k] == t.grid_dims[k]; --k) at[k] = 0;
    }
    t.grid.swap(grid);
    if (total > kMaxGridTiles) {
      t.has_grid = false;
      return;
    }
    for (int k = 0; k < nd; ++k) t.grid_dims[k] = static_cast<int32_t>(dims[k]);
  }
  t.grid[grid_slot(t.grid_dims, tile, nd)] = node;
}

void RegionIndex::insert_box(BoxTable& t, const int64_t* offset, const int64_t* extent, int nd, uint32_t node) {
  const size_t stride = static_cast<size_t>(1 + 2 * nd);
  const uint64_t mask = t.num_slots - 1;
  for (size_t i = box_slot(offset, nd, mask);; i = (i + 1) & mask) {
    int64_t* e = &t.words[i * stride];
    bool same = e[0] >= 0;
    for (int k = 0; k < nd && same; ++k) same = e[1 + k] == offset[k] && e[1 + nd + k] == extent[k];
    if (e[0] < 0 || same) {
      if (e[0] < 0) ++t.used;
      e[0] = node;
      copy_dims(offset, nd, e + 1);
      copy_dims(extent, nd, e + 1 + nd);
      return;
    }
  }
}

// Collects the predecessors of access `c` into `preds` and its overlapping nodes into `matches`.
void RegionIndex::query(Canon& c, std::vector<int64_t>& preds) {
  Buffer& b = *c.buf;
  if (++stamp_ == 0) {
    // Nodes outlive runs: after a wrap an old stamp could pass for this query's.
    for (size_t i = 0; i < num_buffers_; ++i) {
      for (Node& n : buffers_[i]->nodes) n.stamp = 0;
    }
    stamp_ = 1;
  }
  c.exact = -1;
  c.first_match = matches_.size();
  auto visit = [&](uint32_t i) {
    Node& n = b.nodes[i];
    if (n.stamp == stamp_) return;
    n.stamp = stamp_;
    if (!n.live || !overlap(n, c)) return;
    matches_.push_back(i);
    if (c.exact < 0 && same_box(n, c)) c.exact = i;
    conflicts(n, c.write, preds);
  };
  if (c.layout == 0 && c.ndim > 0) {
    for (uint64_t used = b.used_levels; used != 0; used &= used - 1) {
      const int level = __builtin_ctzll(used);
      const auto& heads = b.levels[static_cast<size_t>(level)];
      const int64_t b0 = c.offset[0] >> level;
      const int64_t b1 = std::min<int64_t>(static_cast<int64_t>(heads.size()) - 1,
                                           (c.offset[0] + c.extent[0] - 1) >> level);
      for (int64_t k = b0; k <= b1; ++k) {
        for (uint32_t i = heads[static_cast<size_t>(k)]; i != kNoNode;) {
          visit(i);
          const Node& n = b.nodes[i];
          i = n.next[(n.offset[0] >> level) == k ? 0 : 1];
        }
      }
    }
    for (uint32_t i : b.wide) visit(i);
  } else {
    for (uint32_t i = 0; i < b.nodes.size(); ++i) visit(i);
  }
  c.num_matches = matches_.size() - c.first_match;
}

// Records access `c` of task `seq` (not recalled). Reads are recorded before writes, so a task that
// reads and writes one box leaves itself as the box's writer.
void RegionIndex::update(Canon& c, int64_t seq) {
  Buffer& b = *c.buf;
  const RegionDesc& d = *c.src.desc;
  int64_t e = c.exact;
  if (e < 0) {
    for (const auto& [buf, i] : created_) {
      if (buf == &b && same_box(b.nodes[i], c)) e = i;
    }
  }
  const bool created = e < 0;
  if (created) {
    // A node array that grows moves: the memos' pointers into it go.
    if (b.nodes.size() == b.nodes.capacity()) b.forget_memos();
    Node& n = b.nodes.emplace_back();
    copy_dims(c.offset, c.ndim, n.offset);
    copy_dims(c.extent, c.ndim, n.extent);
    n.lo = c.lo;
    n.hi = c.hi;
    n.layout = c.layout;
    n.ndim = c.ndim;
    e = static_cast<int64_t>(b.nodes.size() - 1);
    b.place(static_cast<uint32_t>(e));
    // Nodes created earlier by this task were not seen by its queries.
    for (const auto& [buf, i] : created_) {
      Node& o = b.nodes[i];
      if (buf == &b && overlap(o, c)) {
        o.isolated = false;
        b.nodes[static_cast<size_t>(e)].isolated = false;
      }
    }
    created_.emplace_back(&b, static_cast<uint32_t>(e));
    b.dirty = true;
  }
  c.exact = e;
  Node& n = b.nodes[static_cast<size_t>(e)];
  set_memo(d, c.src, static_cast<uint32_t>(e), &n);
  // A box seen before (its node existed) is likely to come back: tile loops revisit boxes. Boxes
  // touched once, such as the row blocks of a streaming pass, stay out of the table.
  if (!created) remember(c.src, static_cast<uint32_t>(e), b.gen);
  record(n, c.write, seq);
  if (!c.write) {
    if (created) {
      for (size_t k = 0; k < c.num_matches; ++k) b.nodes[matches_[c.first_match + k]].isolated = false;
      if (c.num_matches > 0) n.isolated = false;
    }
    return;
  }
  // Any later access overlapping a covered node also overlaps this write, which already depends
  // on the node's tasks, so the ordering is kept transitively.
  for (size_t k = 0; k < c.num_matches; ++k) {
    const uint32_t m = matches_[c.first_match + k];
    Node& o = b.nodes[m];
    if (static_cast<int64_t>(m) != e && covers(c, o)) {
      o.live = false;
      o.writer = -1;
      o.readers.release();
      ++b.dead;
    } else if (created && static_cast<int64_t>(m) != e) {
      o.isolated = false;
      n.isolated = false;
    }
  }
}

int RegionIndex::add_task(const RegionAccess* accesses, size_t n, int64_t seq, std::vector<int64_t>& preds) {
  return add_task_impl([accesses](size_t i) { return accesses[i]; }, n, seq, preds);
}

int RegionIndex::add_task(const pypto_task_arg* args, size_t n, int64_t seq, std::vector<int64_t>& preds) {
  return add_task_impl(
      [this, args](size_t i) {
        const pypto_task_arg& a = args[i];
        const RegionDesc* d = by_handle(a.tensor);
        // An unknown handle or mode gives a null layout, which the caller reports.
        if (a.mode != PYPTO_ACCESS_IN && a.mode != PYPTO_ACCESS_OUT) d = nullptr;
        return RegionAccess{d, a.offset, a.extent, a.mode == PYPTO_ACCESS_OUT};
      },
      n, seq, preds);
}

// `access(i)` gives access i by value; one with a null layout is rejected like an invalid box.
template <typename Access>
int RegionIndex::add_task_impl(Access access, size_t n, int64_t seq, std::vector<int64_t>& preds) {
  preds.clear();
  matches_.clear();
  created_.clear();
  num_canon_ = 0;
  if (canon_.size() < n) canon_.resize(n);
  size_t nc = 0;
  for (size_t i = 0; i < n; ++i) {
    Canon& c = canon_[nc];
    const RegionAccess a = access(i);
    if (a.desc == nullptr) return static_cast<int>(i);
    if (recall(a, c, preds)) {
      ++nc;
      continue;
    }
    const int kind = canonicalize(a, c);
    if (kind == kAccessEmpty) continue;
    if (kind == kAccessInvalid) return static_cast<int>(i);
    query(c, preds);
    ++nc;
  }
  num_canon_ = nc;
  if (preds.size() > kShortPreds) {
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  }
  // Reads first, so a task that reads and writes one box is left as its writer. A recalled access
  // already names its node, which overlaps no other.
  for (int pass = 0; pass < 2; ++pass) {
    const bool write = pass == 1;
    for (size_t i = 0; i < nc; ++i) {
      Canon& c = canon_[i];
      if (c.write != write) continue;
      if (c.recalled) {
        record(c.buf->nodes[static_cast<size_t>(c.exact)], write, seq);
      } else {
        update(c, seq);
      }
    }
  }
  return -1;
}

void RegionIndex::prune_slow() {
  if (finished_) {
    // Readers of a box that is never written accumulate; finished ones are dropped as the list doubles.
    for (size_t i = 0; i < num_canon_; ++i) {
      const Canon& c = canon_[i];
      if (c.write) continue;
      Node& n = c.buf->nodes[static_cast<size_t>(c.exact)];
      if (n.readers.size() < n.prune_at) continue;
      n.readers.erase_if(finished_);
      n.prune_at = std::max<uint32_t>(kMinReaderPrune, 2 * static_cast<uint32_t>(n.readers.size()));
    }
  }
  for (const auto& created : created_) {
    Buffer& b = *created.first;
    if (!b.dirty) continue;
    b.dirty = false;
    // With tasks finishing, sweep as the node list doubles; otherwise only superseded nodes can go.
    if (finished_ ? b.nodes.size() > b.sweep_at : 2 * b.dead > b.nodes.size() && b.nodes.size() > kMinSweep) {
      sweep(b);
    }
  }
}

// Drops superseded boxes and, when tasks can finish, boxes whose tasks all have.
void RegionIndex::sweep(Buffer& b) {
  size_t kept = 0;
  for (Node& n : b.nodes) {
    if (!n.live) continue;
    if (finished_) {
      if (n.writer >= 0 && finished_(n.writer)) n.writer = -1;
      n.readers.erase_if(finished_);
      if (n.writer < 0 && n.readers.empty()) continue;
    }
    if (&b.nodes[kept] != &n) b.nodes[kept] = std::move(n);
    ++kept;
  }
  b.nodes.resize(kept);
  b.dead = 0;
  b.renumbered();
  b.rebuild();
  b.sweep_at = std::max(kMinSweep, 2 * b.nodes.size());
}

size_t RegionIndex::num_nodes() const {
  size_t n = 0;
  for (size_t i = 0; i < num_buffers_; ++i) n += buffers_[i]->nodes.size();
  return n;
}

}  // namespace pypto::runtime
