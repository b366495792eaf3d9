// Pass "expand_tiles": the attention op (made by fuse_attention) as an online softmax.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

/// Attention (made by fuse_attention): per block of query rows (and batch index), in parallel, an
/// online softmax over blocks of keys, with the running row max m, row sum l and output
/// accumulator acc in tiles:
///   m = lowest finite float (a fully masked key block leaves it finite), l = 0, acc = 0
///   for each key block j:  s = (q * scale) @ kt_j (+ mask_j);  mn = max(m, rowmax(s));  alpha = exp(m - mn)
///                          m = mn;  p = exp(s - m);  l = l * alpha + rowsum(p)
///                          acc = acc * alpha + p @ v_j
///   out = acc / l
/// Key columns past the end of a tail block load as zero scores: the row max and row sum leave them
/// out through their valid extents, they are clamped to exp(0) so they cannot overflow, and they
/// meet the zero rows of the tail block of v in the product. Leading dims of 1 in kt, v or the
/// mask are read at index 0 for every batch index (grouped-query attention, one mask for all).
std::vector<Stmt> Expander::attention(const TensorOp& op, int idx) {
  const TensorValue& outv = g_.value(op.output);
  const TensorValue& ktv = g_.value(op.inputs[1]);
  size_t r = outv.shape.size();
  auto d_const = ktv.shape[r - 2].as_const(), dv_const = outv.shape[r - 1].as_const();
  if (!d_const || !dv_const) throw InternalError("attention with a symbolic head size");
  int64_t d = *d_const, dv = *dv_const;
  auto shape2 = [&](int64_t rows, int64_t cols) {
    std::vector<int64_t> v(r, 1);
    v[r - 2] = rows;
    v[r - 1] = cols;
    return v;
  };
  Space s = make_space(outv.shape, shape2(op.cube_tile[0], dv), idx, outv.valid);
  const Expr& T = ktv.shape[r - 1];
  int64_t br = s.tile[r - 2], bc = clamp(T, op.cube_tile[2]);
  const DataType f32 = DataType::FP32;
  std::string jvar = fmt::format("j{}", idx);
  Expr joff = Expr::var(jvar) * Expr(bc);
  Expr jvalid = valid(T, bc, joff);
  std::vector<Expr> score_valid(r, Expr(1));
  score_valid[r - 2] = s.valid[r - 2];
  score_valid[r - 1] = jvalid;
  auto emit = [&](Opcode opc, std::vector<int> srcs, int dst, std::vector<Stmt>& body) {
    Instr in{opc};
    in.srcs = std::move(srcs);
    in.dst = dst;
    if (is_reduction(opc)) in.valid = score_valid;
    body.push_back(instr(in));
    return dst;
  };
  auto fill = [&](int tile, double value, std::vector<Stmt>& body) {
    Instr f{Opcode::TFILL};
    f.dst = tile;
    f.scalar = value;
    body.push_back(instr(f));
    return tile;
  };
  auto with_scalar = [&](Opcode opc, int src, int dst, double value, std::vector<Stmt>& body) {
    Instr in{opc};
    in.srcs = {src};
    in.dst = dst;
    in.scalar = value;
    in.scalar_pos = 1;
    body.push_back(instr(in));
  };
  std::vector<Stmt> body;
  int q = load_mm(op.inputs[0], s, s.offset[r - 2], s.valid[r - 2], br, Expr(0), Expr(d), d, f32, body);
  if (op.scale != 1.0) {  // q * scale once per row block instead of every score
    int scaled = new_tile(shape2(br, d), f32);
    with_scalar(Opcode::TMUL, q, scaled, op.scale, body);
    q = scaled;
  }
  // The running max starts at the lowest finite float, not -inf: a row whose first key blocks are
  // all masked (-inf scores) keeps m finite, so alpha = exp(m - mn) and p = exp(s - m) are 1 and
  // 0 instead of exp(-inf + inf) = NaN.
  int m = fill(new_tile(shape2(br, 1), f32), -static_cast<double>(std::numeric_limits<float>::max()), body);
  int l = fill(new_tile(shape2(br, 1), f32), 0.0, body);
  int acc = fill(new_tile(shape2(br, dv), f32), 0.0, body);

  std::vector<Stmt> jb;
  int kt = load_mm(op.inputs[1], s, Expr(0), Expr(d), d, joff, jvalid, bc, f32, jb);
  Instr qk{Opcode::TMATMUL};
  qk.srcs = {q, kt};
  qk.dst = new_tile(shape2(br, bc), f32);
  qk.l0 = l0_blocks(op.cube_tile_l0, br, d, bc);
  jb.push_back(instr(qk));
  int scores = qk.dst;
  if (op.inputs.size() == 4) {  // the additive mask's block: rows of this task, columns of key block j
    int mk = load_mm(op.inputs[3], s, s.offset[r - 2], s.valid[r - 2], br, joff, jvalid, bc, f32, jb);
    if (g_.value(op.inputs[3]).shape.size() < r) {  // a mask of lower rank: the scores' tile shape
      Instr rs{Opcode::TRESHAPE};
      rs.srcs = {mk};
      rs.dst = mk = new_tile(shape2(br, bc), f32);
      jb.push_back(instr(rs));
    }
    emit(Opcode::TADD, {scores, mk}, scores, jb);
  }
  int rmax = emit(Opcode::TROWMAX, {scores}, new_tile(shape2(br, 1), f32), jb);
  int mn = emit(Opcode::TMAX, {m, rmax}, new_tile(shape2(br, 1), f32), jb);
  int alpha = emit(Opcode::TSUB, {m, mn}, new_tile(shape2(br, 1), f32), jb);
  emit(Opcode::TEXP, {alpha}, alpha, jb);
  emit(Opcode::TMAX, {m, rmax}, m, jb);  // m = mn: a [rows, 1] max costs what a copy would
  emit(Opcode::TMUL, {l, alpha}, l, jb);
  int p = emit(Opcode::TROWEXPANDSUB, {scores, m}, new_tile(shape2(br, bc), f32), jb);
  if (!jvalid.as_const()) with_scalar(Opcode::TMIN, p, p, 0.0, jb);
  emit(Opcode::TEXP, {p}, p, jb);
  int rsum = emit(Opcode::TROWSUM, {p}, new_tile(shape2(br, 1), f32), jb);
  emit(Opcode::TADD, {l, rsum}, l, jb);
  emit(Opcode::TROWEXPANDMUL, {acc, alpha}, acc, jb);
  int vt = load_mm(op.inputs[2], s, joff, jvalid, bc, Expr(0), Expr(dv), dv, f32, jb);
  Instr pv{Opcode::TMATMUL_ACC};
  pv.srcs = {acc, p, vt};
  pv.dst = acc;
  const std::vector<int64_t>& l0 = op.cube_tile_l0;
  pv.l0 = l0.size() == 3 ? l0_blocks({l0[0], l0[2], l0[1]}, br, bc, dv) : std::vector<int64_t>{};
  jb.push_back(instr(pv));
  // A causal mask: the key blocks that start past the last row's bound (column > row + causal for
  // every row of the task, all -inf) add nothing to the softmax and are not visited.
  Loop jl = block_loop(jvar, 0, op.causal ? min(T, max(Expr(0), s.offset[r - 2] + Expr(br) + *op.causal)) : T, bc);
  jl.body = std::move(jb);
  body.push_back(Stmt{std::move(jl)});
  int res = emit(Opcode::TROWEXPANDDIV, {acc, l}, new_tile(shape2(br, dv), f32), body);
  res = convert(res, compute_dtype(outv.dtype), body);
  store(res, op.output, s, body);
  std::vector<int> dims;
  for (size_t i = 0; i < r; ++i) dims.push_back(static_cast<int>(i));
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

}  // namespace pypto::expand_tiles_impl
