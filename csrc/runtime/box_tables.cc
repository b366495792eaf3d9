// The region index's box tables: per layout, the boxes earlier accesses used and the nodes they
// resolved to, as a grid of aligned tiles or a hash table, so a repeated access skips the search.
#include "runtime/region_index_internal.h"

namespace pypto::runtime {

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

}  // namespace pypto::runtime
