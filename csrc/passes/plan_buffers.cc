// Pass "plan_buffers": on-chip buffer placement of InCore functions.
//
// Requires: a verified Block Graph.
// Guarantees: every tile and static local buffer of an InCore function gets
// an offset in the function's arena; buffers whose live ranges overlap never
// share bytes, others may (liveness over the statement order, a buffer used
// both inside and outside a loop being live across the whole loop). Sizes
// are rounded to 64 bytes; `buffer_bytes` is the arena's size. Locals sized
// by a symbolic dim are allocated at run time and not counted.
#include "passes/plan_buffers.h"


#include <fmt/format.h>

#include "ir/errors.h"

#include <algorithm>
#include <climits>
#include <map>

namespace pypto {

namespace {

/// A buffer to place: a tile (id >= 0) or a local memref (~id), its size and live range.
struct Buf {
  int key;
  int64_t bytes;
  int64_t first = INT64_MAX, last = -1;
  int64_t offset = 0;
};

class Liveness {
 public:
  std::map<int, Buf> bufs;

  void walk(const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        int64_t begin = pos_;
        walk(l->body);
        loops_.push_back({begin, pos_ - 1});
      } else if (auto* f = std::get_if<Fused>(&s.node)) {
        walk(f->body);
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        // Both branches in order: a buffer live across the IF spans both.
        walk(c->then_body);
        walk(c->else_body);
      } else if (auto* in = std::get_if<Instr>(&s.node)) {
        int64_t p = pos_++;
        auto touch = [&](int key) {
          auto it = bufs.find(key);
          if (it == bufs.end()) return;
          it->second.first = std::min(it->second.first, p);
          it->second.last = std::max(it->second.last, p);
        };
        if (in->dst >= 0) touch(in->dst);
        for (int t : in->srcs) touch(t);
        if (in->memref >= 0) touch(~in->memref);
      }
    }
  }

  /// A buffer used inside a loop and outside it is live across the whole loop.
  void extend_over_loops() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto& [key, b] : bufs) {
        for (auto [lo, hi] : loops_) {
          bool inside = b.first <= hi && b.last >= lo;
          bool outside = b.first < lo || b.last > hi;
          if (inside && outside && (b.first > lo || b.last < hi)) {
            b.first = std::min(b.first, lo);
            b.last = std::max(b.last, hi);
            changed = true;
          }
        }
      }
    }
  }

 private:
  int64_t pos_ = 0;
  std::vector<std::pair<int64_t, int64_t>> loops_;
};

/// First-fit placement in order of first use; returns the arena size.
int64_t place(std::map<int, Buf>& bufs) {
  std::vector<Buf*> order;
  for (auto& [k, b] : bufs) order.push_back(&b);
  std::sort(order.begin(), order.end(), [](const Buf* a, const Buf* b) {
    return a->first != b->first ? a->first < b->first : a->key < b->key;
  });
  std::vector<Buf*> placed;
  int64_t peak = 0;
  for (Buf* b : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (Buf* p : placed)
      if (p->last >= b->first && p->first <= b->last) busy.push_back({p->offset, p->offset + p->bytes});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (auto [lo, hi] : busy) {
      if (off + b->bytes <= lo) break;
      off = std::max(off, hi);
    }
    b->offset = off;
    placed.push_back(b);
    peak = std::max(peak, off + b->bytes);
  }
  return peak;
}

/// The buffers of `f` with their live ranges, placed; returns the arena size.
int64_t plan(const InCoreFunction& f, const std::vector<MemRef>& memrefs, bool reuse, std::map<int, Buf>& bufs) {
  Liveness live;
  for (const TileDecl& t : f.tiles) live.bufs[t.id] = Buf{t.id, tile_bytes(t)};
  for (int l : f.locals)
    if (!local_is_dynamic(memrefs.at(l))) live.bufs[~l] = Buf{~l, local_bytes(memrefs.at(l))};
  live.walk(f.body);
  live.extend_over_loops();
  for (auto& [k, b] : live.bufs)
    if (b.last < 0) b.first = b.last = 0;  // declared, never touched: still gets a slot
  if (!reuse)
    for (auto& [k, b] : live.bufs) b.first = 0, b.last = INT64_MAX;
  const int64_t bytes = place(live.bufs);
  bufs = std::move(live.bufs);
  return bytes;
}

}  // namespace

int64_t planned_arena_bytes(const InCoreFunction& f, const std::vector<MemRef>& memrefs, bool reuse) {
  std::map<int, Buf> bufs;
  return plan(f, memrefs, reuse, bufs);
}

BlockGraph PlanBuffers(const BlockGraph& g, const PassOptions& opts) {
  // Disabled by name: every buffer lives throughout, so none shares bytes.
  const bool reuse = !opts.disabled.count("plan_buffers");
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) {
    std::map<int, Buf> bufs;
    f.buffer_bytes = plan(f, out.memrefs, reuse, bufs);
    f.tile_offsets.clear();
    f.local_offsets.clear();
    for (auto& [k, b] : bufs) {
      if (k >= 0) f.tile_offsets[k] = b.offset;
      else f.local_offsets[~k] = b.offset;
    }
  }
  return out;
}

}  // namespace pypto
