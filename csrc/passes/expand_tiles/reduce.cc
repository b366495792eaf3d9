// Pass "expand_tiles": reductions over one or more dims into an accumulator tile.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

std::vector<Stmt> Expander::reduce(const TensorOp& op, int idx) {
  const TensorValue& inv = g_.value(op.inputs[0]);
  const TensorValue& outv = g_.value(op.output);
  Space s = make_space(inv.shape, op.tile_shape, idx, inv.valid);
  int k = op.dim;
  int r = static_cast<int>(inv.shape.size());
  // Per reduction (from the op table): the binary opcode combining partial results, its row,
  // column and middle-axis reductions, and the accumulator's start value (+-inf stand for the
  // type's highest/lowest value).
  struct Red {
    Opcode row, col, mid, combine;
    double init;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Opcode combine = plain_opcode(op.kind);
  auto variant = [&](OpForm f) {
    auto v = opcode_variant(combine, f);
    if (!v) throw InternalError(fmt::format("reduction {} has no {} opcode", opcode_name(combine), form_name(f)));
    return *v;
  };
  double init = 0.0;
  switch (opcode_info(combine).identity) {
    case Identity::Zero: init = 0.0; break;
    case Identity::One: init = 1.0; break;
    case Identity::Lowest: init = -inf; break;
    case Identity::Highest: init = inf; break;
    case Identity::None: throw InternalError(fmt::format("{} has no identity to start a reduction", opcode_name(combine)));
  }
  const Red red_info{variant(OpForm::RowReduce), variant(OpForm::ColReduce), variant(OpForm::AxisReduce), combine, init};
  std::vector<int> red_dims = op.dims.empty() ? std::vector<int>{k} : op.dims;
  auto is_red = [&](int d) { return std::find(red_dims.begin(), red_dims.end(), d) != red_dims.end(); };
  std::vector<int64_t> acc_shape = s.tile;
  for (int d : red_dims) acc_shape[d] = 1;
  DataType acc_dt = op.compute;
  int acc = new_tile(acc_shape, acc_dt);
  Instr fill{Opcode::TFILL};
  fill.dst = acc;
  fill.scalar = red_info.init;

  std::vector<Stmt> inner;
  int cur = convert(load_box(op.inputs[0], s, inner), acc_dt, inner);
  // Reduce the tile one axis at a time, last axis first.
  std::vector<int64_t> cur_shape = s.tile;
  std::vector<Expr> cur_valid = s.valid;
  for (auto it = red_dims.rbegin(); it != red_dims.rend(); ++it) {
    int d = *it;
    Opcode red = d == r - 1 ? red_info.row : d == 0 ? red_info.col : red_info.mid;
    Instr rd{red};
    rd.srcs = {cur};
    rd.valid = cur_valid;
    if (red == red_info.mid) rd.axis = d;
    cur_shape[d] = 1;
    cur_valid[d] = Expr(1);
    rd.dst = new_tile(cur_shape, acc_dt);
    inner.push_back(instr(rd));
    cur = rd.dst;
  }
  Instr comb{red_info.combine};
  comb.srcs = {acc, cur};
  comb.dst = acc;
  inner.push_back(instr(comb));
  // Sequential loops over the reduced dims, innermost the last.
  std::vector<Stmt> loops = std::move(inner);
  for (auto it = red_dims.rbegin(); it != red_dims.rend(); ++it) {
    Loop l = make_loop(s, *it, false);
    l.body = std::move(loops);
    loops = {Stmt{std::move(l)}};
  }

  // Store the accumulator: keepdim keeps the size-1 dims, otherwise reshape them away.
  std::vector<Stmt> body;
  body.push_back(instr(fill));
  body.insert(body.end(), loops.begin(), loops.end());
  Instr st{Opcode::TSTORE};
  st.memref = op.output;
  int stored = acc;
  for (int d = 0; d < r; ++d) {
    if (is_red(d) && !op.keepdim) continue;
    st.offsets.push_back(is_red(d) ? Expr(0) : s.offset[d]);
    st.valid.push_back(is_red(d) ? Expr(1) : s.valid[d]);
  }
  if (!op.keepdim) {
    std::vector<int64_t> shape;
    for (int d = 0; d < r; ++d)
      if (!is_red(d)) shape.push_back(acc_shape[d]);
    Instr rs{Opcode::TRESHAPE};
    rs.srcs = {acc};
    rs.dst = new_tile(shape, acc_dt);
    body.push_back(instr(rs));
    stored = rs.dst;
  }
  stored = convert(stored, compute_dtype(outv.dtype), body);
  stored = round_to_storage(stored, outv.dtype, body);
  st.srcs = {stored};
  body.push_back(instr(st));

  std::vector<int> dims;
  for (int d = 0; d < r; ++d)
    if (!is_red(d)) dims.push_back(d);
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

}  // namespace pypto::expand_tiles_impl
