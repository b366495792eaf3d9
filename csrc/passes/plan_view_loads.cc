// Pass "plan_view_loads": loads that need not copy.
//
// Requires: a verified Block Graph.
// Guarantees: a TLOAD gets `view` (its tile may point at the source memory, where the box lies
// there densely, instead of copying it; pto::tload_view decides at run time) exactly when its tile
// is written by loads only, none of them in panels, has the source's element type, is never read before a load defines it
// (no value carried around a loop), and no instruction writes memory between the load and the last
// read of what it loaded (except that last reader when it is a TSTORE or TSCATTER into another global
// tensor), nor, for a load from a local buffer, a tile plan_buffers placed over that buffer's bytes.
// Every other TLOAD loses the flag. A viewing load whose tile is bf16 and read only as an operand (a or
// b) of matmuls also gets `strided`: its box need be dense only along its rows, the tile taking the
// source's row pitch (the bf16 dot-product kernels read their operands with a pitch), so a tile of a
// weight's or an activation's rows is read where it lies instead of copied.
#include "passes/plan_view_loads.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "passes/util.h"

namespace pypto {

namespace {

/// The memref whose memory `m` addresses (itself unless a view).
int root_of(int m, const std::vector<MemRef>& memrefs) {
  while (memrefs.at(m).view) m = memrefs.at(m).view->base;
  return m;
}

/// Whether `w`, the last reader of a load from `loaded`, is a TSTORE or TSCATTER into other global
/// memory: where it writes cannot be the loaded memory (distinct global tensors do not overlap: the
/// runtime refuses a written argument sharing memory with another unless the call writes exactly the
/// box it reads, where a store of what was loaded rewrites the same values). Local buffers are excluded
/// (the arena may place two in one place).
bool writes_elsewhere(const Instr& w, bool last_reader, int loaded, const std::vector<MemRef>& memrefs) {
  if (!last_reader || (w.op != Opcode::TSCATTER && w.op != Opcode::TSTORE)) return false;
  const int a = root_of(w.memref, memrefs), b = root_of(loaded, memrefs);
  return a != b && memrefs[a].kind != MemKind::Local && memrefs[b].kind != MemKind::Local;
}

/// Whether `w` writes a tile that plan_buffers placed over the local buffer `loaded` addresses: the
/// buffer's bytes are free once its last load ran, so a tile defined while a view of them is still
/// read would overwrite what the view reads.
bool overwrites_local(const InCoreFunction& f, const Instr& w, int loaded, const std::vector<MemRef>& memrefs) {
  const int root = root_of(loaded, memrefs);
  if (memrefs[root].kind != MemKind::Local || w.dst < 0) return false;
  auto lo = f.local_offsets.find(root);
  auto to = f.tile_offsets.find(w.dst);
  if (lo == f.local_offsets.end() || to == f.tile_offsets.end()) return false;
  for (const TileDecl& t : f.tiles) {
    if (t.id != w.dst) continue;
    const int64_t a0 = lo->second, a1 = a0 + local_bytes(memrefs[root]);
    const int64_t b0 = to->second, b1 = b0 + tile_bytes(t);
    return a0 < b1 && b0 < a1;
  }
  return false;
}

void plan(InCoreFunction& f, const std::vector<MemRef>& memrefs) {
  std::vector<Instr*> seq;
  for_each_instr(f.body, [&](Instr& in) { seq.push_back(&in); });
  auto dtype_of = [&](int tile) {
    for (const TileDecl& t : f.tiles)
      if (t.id == tile) return t.dtype;
    return DataType::FP32;
  };
  std::set<int> excluded;
  for (const Instr* in : seq) {
    if (in->op == Opcode::TLOAD) {
      // A load in panels (plan_matmul_panels) lays its tile out otherwise than the source.
      if (dtype_of(in->dst) != memrefs.at(in->memref).dtype || in->panels > 0) excluded.insert(in->dst);
    } else if (in->dst >= 0) {
      excluded.insert(in->dst);
    }
  }
  // The load that defines each tile at each position; a read with none is loop-carried.
  std::map<int, size_t> current;
  std::map<size_t, size_t> last_read;  // load position -> position of the last read of its value
  for (size_t q = 0; q < seq.size(); ++q) {
    for (int src : seq[q]->srcs) {
      auto it = current.find(src);
      if (it == current.end()) excluded.insert(src);
      else last_read[it->second] = q;
    }
    if (seq[q]->op == Opcode::TLOAD) current[seq[q]->dst] = q;
  }
  // Tiles read only as the a or b operand of matmuls of two bf16 operands (whose kernels take a row
  // pitch; a float a with a bf16 b widens b through the float kernel, which does not).
  std::set<int> pitched;
  for (const TileDecl& t : f.tiles)
    if (t.dtype == DataType::BF16 && t.shape.size() >= 2) pitched.insert(t.id);
  for (const Instr* in : seq)
    for (size_t i = 0; i < in->srcs.size(); ++i)
      if (!reads_with_row_pitch(*in, i, dtype_of)) pitched.erase(in->srcs[i]);
  int views = 0, strided = 0;
  for (size_t p = 0; p < seq.size(); ++p) {
    Instr& in = *seq[p];
    if (in.op != Opcode::TLOAD) continue;
    in.view = false;
    in.strided = false;
    if (excluded.count(in.dst)) continue;
    const size_t end = last_read.count(p) ? last_read.at(p) : p;
    bool stored = false;
    for (size_t q = p + 1; q <= end && !stored; ++q)
      stored = (writes_memory(seq[q]->op) && !writes_elsewhere(*seq[q], q == end, in.memref, memrefs)) ||
               overwrites_local(f, *seq[q], in.memref, memrefs);
    in.view = !stored;
    in.strided = in.view && pitched.count(in.dst) > 0;
    views += in.view;
    strided += in.strided;
  }
  if (views > 0)
    pass_note(fmt::format("@{}: {} load(s) may view their source{}", f.name, views,
                          strided > 0 ? fmt::format(", {} of them strided (bf16 matmul operands)", strided) : ""));
}

}  // namespace

BlockGraph PlanViewLoads(const BlockGraph& g, const PassOptions&) {
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) plan(f, out.memrefs);
  return out;
}

}  // namespace pypto
