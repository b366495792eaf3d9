// Pass "expand_tiles": matmuls: the output tile grid in parallel, the k tiles in sequence.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

/// Loads the [.., rows, cols] tile of a matmul operand at the given last-two-dim offsets.
int Expander::load_mm(int v, const Space& s, const Expr& ro, const Expr& rv, int64_t rt, const Expr& co, const Expr& cv,
            int64_t ct, DataType compute, std::vector<Stmt>& body, bool keep_bf16) {
  const TensorValue& tv = g_.value(v);
  size_t r = s.shape.size(), rx = tv.shape.size();
  Instr ld{Opcode::TLOAD};
  ld.memref = v;
  std::vector<int64_t> shape;
  for (size_t k = 0; k + 2 < rx; ++k) {
    size_t d = k + (r - rx);
    auto c = tv.shape[k].as_const();
    bool bcast = c && *c == 1 && !(s.shape[d].as_const() && *s.shape[d].as_const() == 1);
    shape.push_back(1);
    ld.offsets.push_back(bcast ? Expr(0) : s.offset[d]);
    ld.valid.push_back(Expr(1));
  }
  shape.push_back(rt);
  shape.push_back(ct);
  ld.offsets.push_back(ro);
  ld.offsets.push_back(co);
  ld.valid.push_back(rv);
  ld.valid.push_back(cv);
  // int8 and int16 operands of an int32 product stay in their own type: the tile matmul widens
  // them as it packs them (a quarter or half of the tile bytes, and a load that can view memory).
  bool narrow = compute == DataType::INT32 && (tv.dtype == DataType::INT8 || tv.dtype == DataType::INT16);
  // A bf16 b of a float b_trans product stays bf16: the product widens it as it reads it (half the
  // bytes, and a load that can view memory).
  narrow = narrow || (keep_bf16 && compute == DataType::FP32 && tv.dtype == DataType::BF16);
  ld.dst = new_tile(shape, narrow ? tv.dtype : compute_dtype(tv.dtype));
  body.push_back(instr(ld));
  return narrow ? ld.dst : convert(ld.dst, compute, body);
}

/// The L0 cube tile `l0` (m, k, n) as blocks of an (mt, kt, nt) L1 tile: each size is the largest
/// divisor of the tile's size that is at most the L0 size; none when they equal the tile (one block).
std::vector<int64_t> Expander::l0_blocks(const std::vector<int64_t>& l0_sizes, int64_t mt, int64_t kt, int64_t nt) {
  if (l0_sizes.size() != 3) return {};
  const int64_t tile[] = {mt, kt, nt};
  std::vector<int64_t> l0(3);
  for (int i = 0; i < 3; ++i) {
    int64_t b = std::max<int64_t>(1, std::min(l0_sizes[i], tile[i]));
    while (tile[i] % b != 0) --b;
    l0[i] = b;
  }
  if (l0[0] == mt && l0[1] == kt && l0[2] == nt) return {};
  return l0;
}

/// TMATMUL of a and b into a new tile of `shape` when `acc` < 0, else TMATMUL_ACC into `acc`;
/// returns the accumulator.
int Expander::product(int a, int b, int acc, const std::vector<int64_t>& shape, DataType dt,
                      const std::vector<int64_t>& l0, std::vector<Stmt>& body, const Expr* rows, bool b_trans,
                      const Expr* cols) {
  Instr mm{acc < 0 ? Opcode::TMATMUL : Opcode::TMATMUL_ACC};
  mm.l0 = l0;
  mm.b_trans = b_trans;
  // Rows that may be fewer than the tile's (a dynamic M): the instruction's valid extents, so the
  // product multiplies only those.
  size_t r = shape.size();
  auto partial = [](const Expr* e, int64_t full) { return e && !(e->as_const() && *e->as_const() >= full); };
  if (dt == DataType::FP32 && (partial(rows, shape[r - 2]) || partial(cols, shape[r - 1]))) {
    mm.valid.assign(r, Expr(1));
    mm.valid[r - 2] = partial(rows, shape[r - 2]) ? *rows : Expr(shape[r - 2]);
    mm.valid[r - 1] = partial(cols, shape[r - 1]) ? *cols : Expr(shape[r - 1]);
  }
  if (acc < 0) {
    mm.dst = new_tile(shape, dt);
    mm.srcs = {a, b};
  } else {
    mm.dst = acc;
    mm.srcs = {acc, a, b};
  }
  body.push_back(instr(mm));
  return mm.dst;
}

/// The tensor `v` is the transpose of (a view swapping its last two dims, at offset 0, of a
/// tensor of its rank), or -1.
int Expander::transposed_base(int v) const {
  const TensorValue& tv = g_.value(v);
  if (!tv.view || tv.view->reshape) return -1;
  const ViewMap& view = *tv.view;
  size_t r = tv.shape.size();
  if (r < 2 || view.map.size() != r || g_.value(view.base).shape.size() != r) return -1;
  for (size_t d = 0; d < r; ++d) {
    size_t want = d + 2 < r ? d : d == r - 2 ? r - 1 : r - 2;
    if (view.map[d] != static_cast<int>(want)) return -1;
  }
  for (const Expr& o : view.offsets)
    if (!(o.as_const() && *o.as_const() == 0)) return -1;
  for (int64_t step : view.steps)
    if (step != 1) return -1;
  return view.base;
}

/// Matmul: the output's tile grid (batch dims one by one, or the innermost batch dim in blocks of
/// matmul_output_tile's batch block of consecutive products, a sequential loop inside; m and n by the cube tile) in
/// parallel; the k tiles in a sequential loop, the first through TMATMUL and the rest through
/// TMATMUL_ACC into one accumulator.
std::vector<Stmt> Expander::matmul(const TensorOp& op, int idx, std::string& note) {
  const TensorValue& outv = g_.value(op.output);
  const TensorValue& av = g_.value(op.inputs[0]);
  size_t r = outv.shape.size();
  const std::vector<int64_t> tile = matmul_output_tile(g_, op);
  const int64_t bb = r >= 3 ? tile[r - 3] : 1;
  Space grid = make_space(outv.shape, tile, idx, outv.valid);
  // With a batch block, the body runs for each of its products: offset j in the block, one element.
  Space s = grid;
  std::string bvar;
  if (bb > 1) {
    bvar = fmt::format("b{}", idx);
    s.offset[r - 3] = grid.offset[r - 3] + Expr::var(bvar);
    s.tile[r - 3] = 1;
    s.valid[r - 3] = Expr(1);
    note += fmt::format("{}batch block {}: {} consecutive products of {}x{}x{} per task", note.empty() ? "" : "; ", bb,
                        bb, tile[r - 2], av.shape.back().str(), tile[r - 1]);
  }
  const Expr& K = av.shape.back();
  const Expr& Kvalid = av.valid.back();
  int64_t kt = clamp(K, op.cube_tile[1]);
  std::string kvar = fmt::format("k{}", idx);
  auto k_off = [&](const Expr& kk) { return kk * Expr(kt); };
  auto k_valid = [&](const Expr& kk) { return valid(Kvalid, kt, k_off(kk)); };
  int64_t mt = s.tile[r - 2], nt = s.tile[r - 1];
  DataType acc_dt = op.compute;
  // A float product of few rows whose b is the transpose of a tensor ([N, K] in memory, as a
  // linear layer's weight): b is loaded as the [N, K] tile it is there and multiplied by dot
  // products (tmatmul ... b_trans), instead of being transposed while it loads.
  const int transposed = acc_dt == DataType::FP32 ? transposed_base(op.inputs[1]) : -1;
  int bt = mt <= kFewRows ? transposed : -1;
  // bf16 a and b of a float product of more rows stay bf16 where the target multiplies them by
  // bf16 dot products (AMX or AVX512-BF16: tmatmul packs b in pairs of k); elsewhere they widen as
  // they load. A transposed b ([N, K] in memory) is then loaded as it lies too: its pairs of k are
  // adjacent there, so the packing reads them as words and no load transposes two-byte elements.
  // With few rows and a transposed b, a stays bf16 too: each output is a dot product of two rows
  // read as they lie, nothing packed.
  const bool bf16_dot = acc_dt == DataType::FP32 && av.dtype == DataType::BF16 &&
                        g_.value(op.inputs[1]).dtype == DataType::BF16 && !target_.bf16_dot_products().empty();
  if (bf16_dot) {
    const bool few = bt >= 0;
    bt = transposed;
    note += fmt::format("{}bf16 operands multiplied by {} dot products{}", note.empty() ? "" : "; ",
                        few ? "avx512" : target_.bf16_dot_products(),
                        few ? " along k of rows as they lie" : bt >= 0 ? ", b packed from its [N, K] layout" : "");
  }
  auto step = [&](const Expr& kk, int acc, std::vector<Stmt>& body) {
    int a = load_mm(op.inputs[0], s, s.offset[r - 2], s.valid[r - 2], mt, k_off(kk), k_valid(kk), kt, acc_dt, body,
                    bf16_dot);
    int b = bt >= 0 ? load_mm(bt, s, s.offset[r - 1], s.valid[r - 1], nt, k_off(kk), k_valid(kk), kt, acc_dt, body,
                              /*keep_bf16=*/true)
                    : load_mm(op.inputs[1], s, k_off(kk), k_valid(kk), kt, s.offset[r - 1], s.valid[r - 1], nt, acc_dt,
                              body, bf16_dot);
    std::vector<int64_t> shape(r, 1);
    shape[r - 2] = mt;
    shape[r - 1] = nt;
    // Float products multiply only the valid columns of b (a dynamic N: the tokens of a W @ x^T),
    // in whole vectors (bf16 operands: by panels of 16).
    const Expr* cols = acc_dt == DataType::FP32 ? &s.valid[r - 1] : nullptr;
    if (bt >= 0) return product(a, b, acc, shape, acc_dt, {}, body, &s.valid[r - 2], true, cols);
    return product(a, b, acc, shape, acc_dt, l0_blocks(op.cube_tile_l0, mt, kt, nt), body, &s.valid[r - 2], false,
                   cols);
  };
  std::vector<Stmt> body;
  int acc = step(Expr(0), -1, body);
  Loop kl = block_loop(kvar, 1, K, kt);
  step(Expr::var(kvar), acc, kl.body);
  if (!(kl.stop.as_const() && *kl.stop.as_const() <= 1)) body.push_back(Stmt{std::move(kl)});
  int res = convert(acc, compute_dtype(outv.dtype), body);
  store(res, op.output, s, body);
  if (bb > 1) {
    Loop products;
    products.var = bvar;
    products.start = Expr(0);
    products.stop = grid.valid[r - 3];  // the block's valid batch elements
    products.step = Expr(1);
    products.dim = -1;
    products.tile = 1;
    products.body = std::move(body);
    body = {Stmt{std::move(products)}};
  }
  std::vector<int> dims;
  for (size_t d = 0; d < r; ++d) dims.push_back(static_cast<int>(d));
  return nest(grid, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

}  // namespace pypto::expand_tiles_impl
