// Pass "expand_tiles": the stride-1 2-D convolution as an implicit GEMM.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

/// Conv (conv2d_tiles): out[b, co, y, x] = sum over taps (dy, dx) and channels c of
/// w[co, (dy kw + dx) Cin + c] * p[b, c, y + dy dh, x + dx dw], with p the padded input and w the
/// weight with its taps outermost. Per block of output channels and of whole output rows (and batch
/// index), in parallel, a sequential loop over (tap, channel block) pairs loads the weight tile
/// [co block, c block] and the input rows the tap reads, [1, c block, rows, OW], which the matmul
/// reads as [c block, rows * OW] (the rows are whole, so that is their layout): an im2col product
/// with no im2col tensor.
std::vector<Stmt> Expander::conv(const TensorOp& op, int idx) {
  const TensorValue& outv = g_.value(op.output);
  const TensorValue& pv = g_.value(op.inputs[0]);
  const TensorValue& wv = g_.value(op.inputs[1]);
  auto cin_c = pv.shape[1].as_const(), ow_c = outv.shape[3].as_const();
  if (!cin_c || !ow_c || op.conv.size() != 4 || op.cube_tile.size() != 3)
    throw InternalError("conv with a symbolic channel count or width, or without its geometry");
  const int64_t cin = *cin_c, ow = *ow_c, kh = op.conv[0], kw = op.conv[1], dh = op.conv[2], dw = op.conv[3];
  const int64_t taps = kh * kw;
  // The output tile: one batch index, a block of channels, a block of whole rows.
  Space s = make_space(outv.shape, {1, op.cube_tile[0], op.cube_tile[2], ow}, idx, outv.valid);
  const int64_t cot = s.tile[1], rows = s.tile[2];
  const int64_t cb = clamp(pv.shape[1], op.cube_tile[1]);
  const int64_t chunks = (cin + cb - 1) / cb;
  const DataType acc_dt = op.compute;
  const std::string var = fmt::format("k{}", idx);
  auto step = [&](const Expr& k, int acc, std::vector<Stmt>& body) {
    const Expr tap = floordiv(k, Expr(chunks));
    const Expr c0 = mod(k, Expr(chunks)) * Expr(cb);
    const Expr cvalid = valid(pv.shape[1], cb, c0);
    const Expr dy = floordiv(tap, Expr(kw)), dx = mod(tap, Expr(kw));
    // The weight tile [co block, c block] at column tap * Cin + c0.
    Instr wa{Opcode::TLOAD};
    wa.memref = op.inputs[1];
    wa.offsets = {s.offset[1], tap * Expr(cin) + c0};
    wa.valid = {s.valid[1], cvalid};
    wa.dst = new_tile({cot, cb}, compute_dtype(wv.dtype));
    body.push_back(instr(wa));
    // The input rows of the tap: [1, c block, rows, OW] from (b, c0, y0 + dy dh, dx dw).
    Instr xb{Opcode::TLOAD};
    xb.memref = op.inputs[0];
    xb.offsets = {s.offset[0], c0, s.offset[2] + dy * Expr(dh), dx * Expr(dw)};
    xb.valid = {s.valid[0], cvalid, s.valid[2], Expr(ow)};
    xb.dst = new_tile({1, cb, rows, ow}, compute_dtype(pv.dtype));
    body.push_back(instr(xb));
    int a = convert(wa.dst, acc_dt, body), b = convert(xb.dst, acc_dt, body);
    return product(a, b, acc, {cot, rows * ow}, acc_dt, l0_blocks(op.cube_tile_l0, cot, cb, rows * ow), body);
  };
  std::vector<Stmt> body;
  int acc = step(Expr(0), -1, body);
  if (taps * chunks > 1) {
    Loop kl = block_loop(var, 1, Expr(taps * chunks), 1);
    step(Expr::var(var), acc, kl.body);
    body.push_back(Stmt{std::move(kl)});
  }
  Instr rs{Opcode::TRESHAPE};
  rs.srcs = {acc};
  rs.dst = new_tile({1, cot, rows, ow}, acc_dt);
  body.push_back(instr(rs));
  int res = convert(rs.dst, compute_dtype(outv.dtype), body);
  store(res, op.output, s, body);
  return nest(s, {0, 1, 2, 3}, {true, true, true, true}, std::move(body));
}

}  // namespace pypto::expand_tiles_impl
