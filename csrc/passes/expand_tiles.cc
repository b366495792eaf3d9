// Pass "expand_tiles": Tensor Graph -> Tile Graph.
//
// Requires: a verified Tensor Graph whose ops each carry a vec tile shape of
// the rank of their iteration space.
// Guarantees: one loop nest per tensor op, parallel loops over the op's outer
// tile grid outermost, each iteration loading input tiles (broadcast dims load
// a size-1 tile), computing with PTO tile instructions and storing the output
// tile; tail tiles carry `min(tile, remaining)` valid extents; a reduction
// walks the reduced axis in an inner sequential loop into an accumulator tile
// initialised before it and stored after it.
#include "passes/expand_tiles.h"

#include "passes/expand_tiles/expander.h"
#include "passes/util.h"

namespace pypto {

namespace expand_tiles_impl {

void Expander::run() {
  out_.name = g_.name;
  out_.dyn_dims = g_.dyn_dims;
  out_.regions = g_.regions;
  out_.reads = g_.reads;
  for (const TensorValue& v : g_.values) {
    MemRef m;
    m.id = v.id;
    m.name = v.name;
    m.dtype = v.dtype;
    m.shape = v.shape;
    m.kind = v.view ? MemKind::View : MemKind::Workspace;
    m.view = v.view;
    out_.memrefs.push_back(m);
  }
  for (int p : g_.params) out_.memrefs[p].kind = MemKind::Input;
  std::set<int> seen;
  for (int o : g_.outputs) {
    if (out_.memrefs[o].kind == MemKind::View)
      throw NotSupportedError(fmt::format("function '{}' returns a view of another tensor; not supported yet "
                                          "(return a computed tensor, e.g. x * 1)", g_.name));
    if (out_.memrefs[o].kind == MemKind::Input)
      throw NotSupportedError(fmt::format("function '{}' returns its parameter '{}' unchanged; not supported yet",
                                          g_.name, out_.memrefs[o].name));
    if (!seen.insert(o).second)
      throw NotSupportedError(fmt::format("function '{}' returns the same tensor twice; not supported yet", g_.name));
    out_.memrefs[o].kind = MemKind::Output;
  }
  out_.params = g_.params;
  out_.outputs = g_.outputs;
  for (size_t i = 0; i < g_.ops.size(); ++i) expand(static_cast<int>(i));
  address_identity_views_by_base();
}

/// A view that is its base (zero offsets, the identity dims, unit steps, the base's shape), as a
/// copy into a fresh tensor writes (`assemble` at offset 0): its memory instructions address the
/// base, so later passes see one tensor and can give the copy and the ops that read or update
/// what it wrote one task per block (a scatter by destination after index_add's copy).
void Expander::address_identity_views_by_base() {
  auto identity = [&](const MemRef& m) {
    if (!m.view || m.view->reshape || m.view->base < 0) return false;
    const MemRef& b = out_.memrefs[static_cast<size_t>(m.view->base)];
    if (b.dtype != m.dtype || b.shape.size() != m.shape.size() || m.view->map.size() != m.shape.size()) return false;
    for (size_t d = 0; d < m.shape.size(); ++d) {
      auto off = m.view->offsets.at(d).as_const();
      const int64_t step = d < m.view->steps.size() ? m.view->steps[d] : 1;
      if (!off || *off != 0 || m.view->map[d] != static_cast<int>(d) || step != 1 || !m.shape[d].equals(b.shape[d]))
        return false;
    }
    return true;
  };
  std::vector<int> canon(out_.memrefs.size());
  for (size_t m = 0; m < canon.size(); ++m) {
    int c = static_cast<int>(m);
    while (identity(out_.memrefs[static_cast<size_t>(c)])) c = out_.memrefs[static_cast<size_t>(c)].view->base;
    canon[m] = c;
  }
  for (TileNest& n : out_.nests)
    for_each_instr(n.body, [&](Instr& in) {
      if ((reads_memory(in.op) || writes_memory(in.op)) && in.memref >= 0) in.memref = canon[static_cast<size_t>(in.memref)];
    });
}

bool Expander::stores_every_element(const TensorOp& op) const {
  switch (op_info(op.kind).cls) {
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Where:
    case OpClass::Cast:
    case OpClass::Reduce:
    case OpClass::Matmul:
      break;
    default:
      return false;
  }
  // A loop may run no iteration, a branch may not be taken.
  return op.region < 0 && !has_tail(g_.value(op.output));
}

void Expander::expand(int idx) {
  const TensorOp& op = g_.ops[idx];
  const OpInfo& info = op_info(op.kind);
  const TensorValue& outv = g_.value(op.output);
  TileNest n;
  n.name = fmt::format("{}_{}", info.name, idx);
  n.source_op = idx;
  n.region = op.region;
  n.note = op.tile_note;
  if (info.cls == OpClass::View) return;  // views move no data
  // A covered fill (copies write every element next: no fill nest) or an output its nest stores
  // whole: no zeroing of the memory.
  if (op.covered || stores_every_element(op)) {
    MemRef& m = out_.memrefs[static_cast<size_t>(op.output)];
    if (m.kind == MemKind::Workspace) m.zeroed = false;
  }
  if (op.covered) return;
  if (info.cls == OpClass::Matmul) {
    n.body = matmul(op, idx, n.note);
  } else if (info.cls == OpClass::Conv) {
    n.body = conv(op, idx);
    // Fused with the padding copy before it, the grid would be the copy's.
    n.alone = true;
    n.note = "alone: one task per block of output channels and rows";
  } else if (info.cls == OpClass::Attention) {
    n.body = attention(op, idx);
    // Fused with the key copy, the grid would shrink to the batch dims (one task per head).
    n.alone = true;
    n.note = "alone: one task per block of query rows";
  } else if (info.cls == OpClass::Gather || info.cls == OpClass::Scatter) {
    n.body = indexed(op, idx);
  } else if (info.cls == OpClass::Reduce) {
    n.body = reduce(op, idx);
  } else if (info.cls == OpClass::Sort) {
    n.body = sort(op, idx);
  } else if (info.cls == OpClass::Scan) {
    n.body = scan(op, idx);
  } else if (info.cls == OpClass::Assemble || info.cls == OpClass::Create) {
    n.body = copy_or_fill(op, idx);
  } else {
    Space s = make_space(outv.shape, op.tile_shape, idx, outv.valid);
    std::vector<Stmt> body;
    int res = elementwise(op, s, compute_dtype(outv.dtype), body);
    store(res, op.output, s, body);
    std::vector<int> dims;
    for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
    n.body = nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
  }
  out_.nests.push_back(std::move(n));
}

}  // namespace expand_tiles_impl

TileGraph ExpandTiles(const TensorGraph& g, const PassOptions& opts) {
  TileGraph out;
  expand_tiles_impl::Expander(g, out, opts.target).run();
  return out;
}

}  // namespace pypto
