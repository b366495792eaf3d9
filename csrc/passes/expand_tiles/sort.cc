// Pass "expand_tiles": sorting the last dim (argsort; topk keeps the first k positions).
//
// The sorted dim is one tile (its whole static extent); parallel loops over the other dims, whose
// tile is shrunk so that a tile holds at most kSortTileElems elements. Each tile is loaded, sorted
// (tsortdesc / tsortasc over the valid part) into an i32 tile of the kept positions, and stored.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

namespace {
constexpr int64_t kSortTileElems = 1 << 16;
}

std::vector<Stmt> Expander::sort(const TensorOp& op, int idx) {
  const TensorValue& inv = g_.value(op.inputs[0]);
  const TensorValue& outv = g_.value(op.output);
  const int r = static_cast<int>(inv.shape.size());
  const auto n = inv.shape.back().as_const();
  const auto k = outv.shape.back().as_const();
  if (!n || !k) throw InternalError(fmt::format("{}: the sorted dim must be static", op_info(op.kind).name));
  std::vector<int64_t> tile = op.tile_shape;
  tile.back() = *n;
  int64_t budget = std::max<int64_t>(1, kSortTileElems / *n);
  for (int d = r - 2; d >= 0; --d) {
    tile[d] = std::max<int64_t>(1, std::min(tile[d], budget));
    budget = std::max<int64_t>(1, budget / tile[d]);
  }
  Space s = make_space(inv.shape, tile, idx, inv.valid);
  s.offset.back() = Expr(0);  // one tile along the sorted dim: no loop over it
  std::vector<Stmt> body;
  const int x = load_box(op.inputs[0], s, body);
  Instr so{op.descending ? Opcode::TSORTDESC : Opcode::TSORTASC};
  so.srcs = {x};
  so.valid = s.valid;
  std::vector<int64_t> kept = s.tile;
  kept.back() = *k;
  so.dst = new_tile(kept, DataType::INT32);
  body.push_back(instr(so));
  Space out = s;
  out.valid.back() = Expr(*k);
  store(so.dst, op.output, out, body);
  std::vector<int> dims;
  for (int d = 0; d + 1 < r; ++d) dims.push_back(d);
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

}  // namespace pypto::expand_tiles_impl
