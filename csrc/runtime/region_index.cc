#include "runtime/region_index.h"
#include "runtime/region_index_internal.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "runtime/runtime.h"

namespace pypto::runtime {


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

const RegionDesc* RegionIndex::intern(const pypto_region& r) { return lookup(r); }


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
  c.accum = a.accum;
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

// Appends the tasks an access of node `n` must wait for: its writer; when writing, its readers and
// accumulators; when accumulating, its readers; when reading, its accumulators. Short lists are kept
// free of duplicates as they grow (a task has a handful of predecessors, often named by several of
// its accesses); a long one is sorted and deduplicated once, by add_task.
PYPTO_HOT_INLINE void RegionIndex::conflicts(const Node& n, bool write, bool accum, std::vector<int64_t>& preds) {
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
    for (int64_t r : n.readers) add(r < 0 ? ~r : r);
  } else if (accum) {
    for (int64_t r : n.readers) {
      if (r >= 0) add(r);
    }
  } else if (n.accumulated) {
    for (int64_t r : n.readers) {
      if (r < 0) add(~r);
    }
  }
}

// Records task `seq`'s access of node `n`: a reader or an accumulator (once), or the writer that
// supersedes them.
PYPTO_HOT_INLINE void RegionIndex::record(Node& n, bool write, bool accum, int64_t seq) {
  n.run = run_;
  if (!write) {
    const int64_t entry = accum ? ~seq : seq;
    if (n.readers.empty() || n.readers.back() != entry) n.readers.push_back(entry);
    n.accumulated |= accum;
    return;
  }
  n.writer = seq;
  n.readers.clear();
  n.accumulated = false;
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
  c.accum = a.accum;
  c.recalled = true;
  c.exact = node;
  conflicts(n, a.write, a.accum, preds);
  return true;
}

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
    conflicts(n, c.write, c.accum, preds);
  };
  // The candidates: nodes of the primary layout in the rows the access touches, the others in its
  // bytes, and the wide list. An access through another layout touches the rows its bytes lie in.
  // A walk of more buckets than there are nodes visits every node instead.
  const int64_t first_byte = c.lo - b.origin;
  const int64_t last_byte = c.hi - 1 - b.origin;
  const int64_t row_bytes = b.row_bytes();
  int64_t first_row = -1;
  int64_t last_row = -1;
  if (c.layout == 0 && c.ndim > 0) {
    first_row = c.offset[0];
    last_row = c.offset[0] + c.extent[0] - 1;
  } else if (row_bytes > 0 && first_byte >= 0) {
    first_row = first_byte / row_bytes;
    last_row = last_byte / row_bytes;
  }
  const int64_t walk = (first_row >= 0 ? b.rows.buckets(first_row, last_row) : 0) +
                       (first_byte >= 0 ? b.bytes.buckets(first_byte, last_byte) : 0);
  if (first_row < 0 || first_byte < 0 || walk > static_cast<int64_t>(b.nodes.size())) {
    for (uint32_t i = 0; i < b.nodes.size(); ++i) visit(i);
  } else {
    b.rows.scan(first_row, last_row, b.nodes, [&b](uint32_t i) { return b.nodes[i].offset[0]; }, visit);
    b.bytes.scan(first_byte, last_byte, b.nodes, [&b](uint32_t i) { return b.nodes[i].lo - b.origin; }, visit);
    for (uint32_t i : b.wide) visit(i);
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
  record(n, c.write, c.accum, seq);
  if (!c.write) {  // a read or an accumulation supersedes nothing
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
        if (a.mode != PYPTO_ACCESS_IN && a.mode != PYPTO_ACCESS_OUT && a.mode != PYPTO_ACCESS_ACCUM) d = nullptr;
        return RegionAccess{d, a.offset, a.extent, a.mode == PYPTO_ACCESS_OUT, a.mode == PYPTO_ACCESS_ACCUM};
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
  // Reads (and accumulations) first, so a task that reads and writes one box is left as its writer.
  // A recalled access already names its node, which overlaps no other.
  for (int pass = 0; pass < 2; ++pass) {
    const bool write = pass == 1;
    for (size_t i = 0; i < nc; ++i) {
      Canon& c = canon_[i];
      if (c.write != write) continue;
      if (c.recalled) {
        record(c.buf->nodes[static_cast<size_t>(c.exact)], write, c.accum, seq);
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
      n.readers.erase_if(finished_entry());
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
      n.readers.erase_if(finished_entry());
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
