// The region index's layouts and buffers: interning a region's layout (its descriptor), the
// per-allocation buffer records, tensor handles, resetting between runs, and the free predicates
// on regions (see region_index.h).
#include "runtime/region_index_internal.h"

namespace pypto::runtime {

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
  b->origin = address(key);
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

}  // namespace pypto::runtime
