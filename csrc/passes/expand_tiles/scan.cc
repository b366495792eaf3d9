// Pass "expand_tiles": inclusive scans (cumsum, cumprod) along one dim.
//
// Parallel loops over the other dims; along the scanned dim a sequential loop over its tiles, which
// carries the combined value of the tiles before (a tile of the source's shape with that dim 1):
//   carry = identity
//   for each tile x along the dim:  y = carry (+) scan(x);  carry = carry (+) reduce(x);  store y
// The carry is the reduction of the valid part of each tile, so tail elements past the valid extent
// never reach the next tile.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

std::vector<Stmt> Expander::scan(const TensorOp& op, int idx) {
  const TensorValue& inv = g_.value(op.inputs[0]);
  Space s = make_space(inv.shape, op.tile_shape, idx, inv.valid);
  const int k = op.dim;
  const int r = static_cast<int>(inv.shape.size());
  const Opcode combine = plain_opcode(op.kind);
  auto variant = [&](OpForm f) {
    auto v = opcode_variant(combine, f);
    if (!v) throw InternalError(fmt::format("scan {} has no {} opcode", opcode_name(combine), form_name(f)));
    return *v;
  };
  const Opcode scan_op = variant(OpForm::Scan);
  const Opcode red_op = k == r - 1 ? variant(OpForm::RowReduce) : k == 0 ? variant(OpForm::ColReduce)
                                                                         : variant(OpForm::AxisReduce);
  double init = 0.0;
  switch (opcode_info(combine).identity) {
    case Identity::Zero: init = 0.0; break;  // +0, as torch: a leading -0 sums to +0
    case Identity::One: init = 1.0; break;
    default: throw InternalError(fmt::format("{} cannot start a scan", opcode_name(combine)));
  }
  const DataType acc_dt = op.compute;
  std::vector<int64_t> carry_shape = s.tile;
  carry_shape[k] = 1;
  const int carry = new_tile(carry_shape, acc_dt);
  Instr fill{Opcode::TFILL};
  fill.dst = carry;
  fill.scalar = init;

  std::vector<Stmt> inner;
  const int x = convert(load_box(op.inputs[0], s, inner), acc_dt, inner);
  Instr sc{scan_op};
  sc.srcs = {x, carry};
  sc.axis = k;
  sc.dst = new_tile(s.tile, acc_dt);
  inner.push_back(instr(sc));
  Instr rd{red_op};
  rd.srcs = {x};
  rd.valid = s.valid;
  if (red_op == variant(OpForm::AxisReduce)) rd.axis = k;
  rd.dst = new_tile(carry_shape, acc_dt);
  inner.push_back(instr(rd));
  Instr comb{combine};
  comb.srcs = {carry, rd.dst};
  comb.dst = carry;
  inner.push_back(instr(comb));
  store(convert(sc.dst, compute_dtype(g_.value(op.output).dtype), inner), op.output, s, inner);

  Loop along = make_loop(s, k, false);
  along.body = std::move(inner);
  std::vector<Stmt> body;
  body.push_back(instr(fill));
  body.push_back(Stmt{std::move(along)});
  std::vector<int> dims;
  for (int d = 0; d < r; ++d)
    if (d != k) dims.push_back(d);
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

}  // namespace pypto::expand_tiles_impl
