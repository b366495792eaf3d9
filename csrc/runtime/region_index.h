/// The runtime's dependency tracker: which earlier tasks a new task's regions conflict with.
///
/// Per allocation (a region's `buffer`, or `base` when null) the index keeps the distinct boxes
/// accessed so far, each with its last writer and the readers and accumulators since that write. Boxes are kept in
/// canonical coordinates (dims by decreasing stride, the view's base offset folded in), so views of
/// one tensor compare exactly; boxes of the allocation's primary layout are bucketed by their
/// outermost coordinate and boxes of its other layouts by byte range, so a row-block access, also
/// one through a reshaped or permuted view, looks at a handful of nodes. Tasks are named by their
/// submission number.
#ifndef PYPTO_RUNTIME_REGION_INDEX_H_
#define PYPTO_RUNTIME_REGION_INDEX_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/pypto_abi.h"

static_assert(PYPTO_MAX_DIMS <= 8, "copy_dims handles up to 8 dims");

namespace pypto::runtime {

/// Copies `n` (at most PYPTO_MAX_DIMS) coordinates. Boxes have a handful of dims; a library copy of
/// a run-time length would cost a call per box.
inline void copy_dims(const int64_t* src, int n, int64_t* dst) {
  switch (n) {
    case 8: dst[7] = src[7]; [[fallthrough]];
    case 7: dst[6] = src[6]; [[fallthrough]];
    case 6: dst[5] = src[5]; [[fallthrough]];
    case 5: dst[4] = src[4]; [[fallthrough]];
    case 4: dst[3] = src[3]; [[fallthrough]];
    case 3: dst[2] = src[2]; [[fallthrough]];
    case 2: dst[1] = src[1]; [[fallthrough]];
    case 1: dst[0] = src[0]; [[fallthrough]];
    default: break;
  }
}

/// The layout of a region minus its box, interned per run: task records point to it.
struct alignas(64) RegionDesc {
  // First, in one cache line for boxes of up to two dims: what an access repeating an earlier box
  // of the layout reads.
  int32_t ndim;
  // The layout's table of earlier boxes and their nodes (index into the index's tables, -1 while the
  // layout has seen one box): a tile loop revisiting boxes finds them without a grid walk.
  mutable int32_t box_table;
  void* index_buffer;
  // The box of the last access through this layout, its node's number and its node (null when there
  // is no memo): repeating that access skips canonicalisation and the grid walk. The buffer clears
  // the node pointers of its layouts when its nodes are renumbered or move. The box is stored as
  // pairs: offset k at 2k, extent k at 2k + 1.
  mutable void* memo_ptr;
  mutable uint32_t memo_node;
  // Handle given out by `RegionIndex::handle` (-1 until asked for).
  int32_t handle;
  mutable int64_t memo_box[2 * PYPTO_MAX_DIMS];
  void* base;
  void* buffer;
  int32_t elem_size;
  // Canonical form: dims ordered by decreasing stride, offsets relative to the allocation.
  // `layout` < 0 marks a layout that index-space reasoning cannot handle (byte ranges are used).
  int32_t layout;
  int64_t stride[PYPTO_MAX_DIMS];
  int8_t perm[PYPTO_MAX_DIMS];
  int64_t delta[PYPTO_MAX_DIMS];
  int64_t cstride[PYPTO_MAX_DIMS];
  uint64_t hash;
};

/// One region of a task: its interned layout and its box (`offset` and `extent` point to `desc->ndim`
/// values each, owned by the caller for the duration of the call that takes the access).
struct RegionAccess {
  const RegionDesc* desc;
  const int64_t* offset;
  const int64_t* extent;
  bool write;
  /// Adds into the box with atomic additions (`write` false): ordered against the box's reads and
  /// writes, not against other accumulations.
  bool accum = false;
};

class RegionIndex {
 public:
  RegionIndex();
  ~RegionIndex();
  RegionIndex(const RegionIndex&) = delete;
  RegionIndex& operator=(const RegionIndex&) = delete;

  /// Forgets every task, handle and the finished predicate. When the run that ends used every
  /// allocation the index knows (and stayed within the bounds below), layouts and the boxes of each
  /// allocation whose boxes were all accessed are kept, so that a repeated run finds them again;
  /// otherwise everything is forgotten, keeping allocated memory for the next run (up to bounds on
  /// nodes, buffers and table slots, so one huge run does not pin its peak).
  void reset();

  /// The interned layout of region `r` (validated by the caller); stable for the index's lifetime.
  const RegionDesc* intern(const pypto_region& r);

  /// The handle of region `r`'s interned layout (validated by the caller): the same layout always
  /// gets the same handle, numbered from 0 in order of first request.
  int32_t handle(const pypto_region& r);
  /// The layout of handle `h`, or null when `h` was not given out.
  const RegionDesc* by_handle(int32_t h) const {
    return h >= 0 && static_cast<size_t>(h) < handles_.size() ? handles_[static_cast<size_t>(h)] : nullptr;
  }
  /// Number of handles given out.
  size_t num_handles() const { return handles_.size(); }

  /// Sets the predicate telling which tasks have finished; their accesses may then be dropped.
  /// Without one (recording), nothing is ever dropped and the graph is exact.
  void set_finished(std::function<bool(int64_t)> finished) { finished_ = std::move(finished); }

  /// Fills `preds` with the tasks task `seq` depends on (each once, in no particular order) and records its accesses.
  /// Every access is checked before any is recorded, so a task never depends on itself. Returns -1,
  /// or the index of the first access with a negative extent or a non-empty box of a null base, in
  /// which case nothing is recorded.
  int add_task(const RegionAccess* accesses, size_t n, int64_t seq, std::vector<int64_t>& preds);
  /// As above for the arguments of a task descriptor, resolving their tensor handles on the way: an
  /// argument with an unknown handle or an access mode other than in, out or accum is rejected the
  /// same way.
  int add_task(const pypto_task_arg* args, size_t n, int64_t seq, std::vector<int64_t>& preds);

  /// Drops finished readers of the boxes the last task read and sweeps buffers whose node list has
  /// doubled. Call after the last task's record exists (the predicate may ask about it).
  void prune() {
    if (finished_ || !created_.empty()) prune_slow();
  }

  /// Number of box nodes held (for tests).
  size_t num_nodes() const;

 private:
  struct Node;
  struct KeyGrid;
  struct Layout;
  struct Buffer;
  struct Canon;

  // Layouts of up to this many dims keep a box table.
  static constexpr int kBoxTableDims = 4;
  // A layout's earlier boxes and their nodes, valid while the buffer is at `gen`.
  //
  // Tile loops visit boxes of one extent on a grid: when the first box entered has power-of-two
  // extents and offsets aligned to them, boxes of that extent and alignment go to a dense grid of
  // node numbers, indexed by offset / extent per dim, which grows as tiles further out arrive (up to
  // kMaxGridTiles, beyond which its boxes move to the hash table). Other boxes go to the hash
  // table: open addressing over a power-of-two number of slots, a slot being 1 + 2 ndim words (the
  // node, -1 for an empty slot; the offsets; the extents).
  struct BoxTable {
    // First, in one cache line: what a lookup on the grid reads.
    uint64_t gen = 0;
    bool has_grid = false;
    int8_t grid_shift[kBoxTableDims] = {};
    int32_t grid_dims[kBoxTableDims] = {};
    std::vector<uint32_t> grid;
    std::vector<int64_t> words;
    size_t num_slots = 0;
    size_t used = 0;
  };

  template <typename Access>
  int add_task_impl(Access access, size_t n, int64_t seq, std::vector<int64_t>& preds);
  static bool overlap(const Node& n, const Canon& c);
  static bool same_box(const Node& n, const Canon& c);
  static bool covers(const Canon& c, const Node& n);
  static int canonicalize(const RegionAccess& a, Canon& c);
  bool recall(const RegionAccess& a, Canon& c, std::vector<int64_t>& preds);
  uint32_t lookup_box(const RegionAccess& a, uint64_t gen) const;
  static uint32_t lookup_hash(const BoxTable& t, const RegionAccess& a);
  void remember(const RegionAccess& a, uint32_t node, uint64_t gen);
  static void set_memo(const RegionDesc& d, const RegionAccess& a, uint32_t node, Node* ptr);
  static void insert_box(BoxTable& t, const int64_t* offset, const int64_t* extent, int ndim, uint32_t node);
  static bool grid_tile(const BoxTable& t, const RegionAccess& a, int64_t* tile);
  static void grid_insert(BoxTable& t, const int64_t* tile, int ndim, uint32_t node);
  static void hash_insert(BoxTable& t, const int64_t* offset, const int64_t* extent, int ndim, uint32_t node);
  RegionDesc* lookup(const pypto_region& r);
  static void fill_desc(RegionDesc& d, const pypto_region& r, uint64_t h, Buffer* buf);
  static void conflicts(const Node& n, bool write, bool accum, std::vector<int64_t>& preds);
  void record(Node& n, bool write, bool accum, int64_t seq);
  bool can_keep_geometry() const;
  void reset_all();
  void query(Canon& c, std::vector<int64_t>& preds);
  void update(Canon& c, int64_t seq);
  void sweep(Buffer& b);
  // The finished predicate on reader entries (accumulators are held as ~seq).
  auto finished_entry() const {
    return [this](int64_t r) { return finished_(r < 0 ? ~r : r); };
  }
  void prune_slow();

  struct BufferSlot {
    void* key = nullptr;
    Buffer* buf = nullptr;
  };
  Buffer* buffer(void* key);

  // Records of the allocations seen; the first `num_buffers_` are in use, the rest are kept emptied
  // from earlier runs. `buffer_table_` finds them by allocation (open addressing).
  std::vector<std::unique_ptr<Buffer>> buffers_;
  size_t num_buffers_ = 0;
  std::vector<BufferSlot> buffer_table_;
  // Interned layouts; the first `num_descs_` are in use (the rest are kept from earlier runs).
  std::deque<RegionDesc> descs_;
  std::vector<RegionDesc*> desc_table_;  // open addressing, power-of-two size
  size_t num_descs_ = 0;
  std::vector<RegionDesc*> handles_;
  // Box tables of the layouts; the first `num_box_tables_` are in use.
  std::vector<BoxTable> box_tables_;
  size_t num_box_tables_ = 0;
  uint32_t stamp_ = 0;
  // Numbers the runs between resets, from 1; nodes and buffers note the last run that used them.
  uint32_t run_ = 1;
  std::function<bool(int64_t)> finished_;
  // Scratch of the current task.
  std::vector<Canon> canon_;
  size_t num_canon_ = 0;
  std::vector<uint32_t> matches_;
  std::vector<std::pair<Buffer*, uint32_t>> created_;
};

}  // namespace pypto::runtime

#endif  // PYPTO_RUNTIME_REGION_INDEX_H_
