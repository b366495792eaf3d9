// Pass "expand_tiles": gather and scatter (indexed loads and stores), and assemble, full and arange
// (a copy into a view, or a new tensor filled).
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

int Expander::load_row_index(int index, std::vector<int64_t> tile, std::vector<Expr> offsets, std::vector<Expr> valid,
                             std::vector<Stmt>& body) {
  Instr ld{Opcode::TLOAD};
  ld.memref = index;
  tile.back() = 1;
  offsets.back() = Expr(0);
  valid.back() = Expr(1);
  ld.offsets = std::move(offsets);
  ld.valid = std::move(valid);
  ld.dst = new_tile(tile, compute_dtype(g_.value(index).dtype));
  body.push_back(instr(ld));
  return ld.dst;
}

std::optional<std::vector<Stmt>> Expander::scatter_by_destination(const TensorOp& op, int idx) {
  // The serial form writes any row of the destination from every task, so its tasks run one after
  // another. Blocked by destination, the tasks of different blocks are independent, each walks
  // the source blocks in order (so duplicates still accumulate in index order) and touches only the
  // source rows that land in its window. It reads every index once per destination block, and the
  // source rows through views, so it applies where the source box is dense (whole trailing dims)
  // and needs no conversion, and where the destination has more than one block along the dim.
  const int index = op.inputs[0], src = op.inputs[1], data = op.inputs[2];
  const TensorValue& iv = g_.value(index);
  const TensorValue& sv = g_.value(src);
  const TensorValue& dv = g_.value(data);
  const size_t rank = dv.shape.size();
  const size_t dim = static_cast<size_t>(op.dim);
  if (op.dim < 0 || dim + 1 >= rank || iv.shape.size() != rank || sv.shape.size() != rank) return std::nullopt;
  if (!iv.view || iv.view->map.size() != rank || iv.view->map.back() != -1) return std::nullopt;
  // The source in its compute type already (a load that converts would convert all of it again
  // for each destination block).
  if (sv.dtype != compute_dtype(sv.dtype) || sv.dtype != compute_dtype(dv.dtype)) return std::nullopt;
  for (size_t d = 0; d < rank; ++d) {
    if (d == dim) continue;
    if (!iv.shape[d].equals(dv.shape[d]) || !sv.shape[d].equals(dv.shape[d])) return std::nullopt;
    auto c = dv.shape[d].as_const();
    if (d > dim && (!c || op.tile_shape[d] < *c)) return std::nullopt;  // whole trailing dims
    if (d < dim && op.tile_shape[d] != 1) return std::nullopt;          // one block of them
  }
  Space s = make_space(dv.shape, op.tile_shape, idx, dv.valid);
  const auto blocks = ceildiv(dv.shape[dim], Expr(s.tile[dim])).as_const();
  if (blocks && *blocks <= 1) return std::nullopt;
  // Block j of the source along the dim; the other dims as the destination block's.
  const std::string jvar = fmt::format("j{}", idx);
  const Expr joff = Expr::var(jvar) * Expr(s.tile[dim]);
  const Expr& lim = iv.valid.empty() ? iv.shape[dim] : iv.valid[dim];
  const bool cut = !iv.valid.empty() && !iv.valid[dim].equals(iv.shape[dim]);
  Loop jl = block_loop(jvar, 0, iv.shape[dim], s.tile[dim]);
  std::vector<Expr> offsets = s.offset, valid = s.valid;
  offsets[dim] = joff;
  valid[dim] = cut ? min(Expr(s.tile[dim]), lim - joff) : Expander::valid(lim, s.tile[dim], joff);
  const int it = load_row_index(index, s.tile, offsets, valid, jl.body);
  Instr sl{Opcode::TLOAD};
  sl.memref = src;
  sl.offsets = offsets;
  sl.valid = valid;
  sl.dst = new_tile(s.tile, compute_dtype(sv.dtype));
  jl.body.push_back(instr(sl));
  Instr in{Opcode::TSCATTER};
  in.memref = data;
  in.axis = op.dim;
  in.reduce = op.reduce;
  in.valid = valid;
  in.offsets = s.offset;
  in.window = {s.offset[dim], dv.shape[dim]};
  in.srcs = {it, sl.dst};
  jl.body.push_back(instr(in));
  std::vector<Stmt> body;
  body.push_back(Stmt{std::move(jl)});
  std::vector<int> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back(static_cast<int>(d));
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

std::vector<Stmt> Expander::indexed(const TensorOp& op, int idx) {
  const OpInfo& info = op_info(op.kind);
  if (info.cls == OpClass::Scatter)
    if (auto blocked = scatter_by_destination(op, idx)) return std::move(*blocked);
  // Over the index's shape: load index tiles, then read (gather) or write
  // (scatter) the data tensor at the indexed positions of the block.
  bool gather = info.cls == OpClass::Gather;
  int index = gather ? op.inputs[1] : op.inputs[0];
  int data = gather ? op.inputs[0] : op.inputs[2];
  const TensorValue& iv = g_.value(index);
  Space s = make_space(iv.shape, op.tile_shape, idx, iv.valid);
  std::vector<Stmt> body;
  // An index seen through a view that repeats it along the last dim (index_select, index_add):
  // one index per row is loaded, an index tile [..., 1] the instruction reads as the whole row's.
  const size_t last = s.shape.size() - 1;
  const bool per_row =
      iv.view && iv.view->map.size() == s.shape.size() && iv.view->map.back() == -1 && op.dim != static_cast<int>(last);
  const int it = per_row ? load_row_index(index, s.tile, s.offset, s.valid, body) : load_operand(index, s, body);
  Instr in{gather ? Opcode::TGATHER : Opcode::TSCATTER};
  in.memref = data;
  in.axis = op.dim;
  in.reduce = op.reduce;
  in.valid = s.valid;
  for (size_t d = 0; d < s.shape.size(); ++d) in.offsets.push_back(static_cast<int>(d) == op.dim ? Expr(0) : s.offset[d]);
  if (gather) {
    in.srcs = {it};
    in.dst = new_tile(s.tile, compute_dtype(g_.value(data).dtype));
    body.push_back(instr(in));
    store(in.dst, op.output, s, body);
  } else {
    int src = convert(load_operand(op.inputs[1], s, body), compute_dtype(g_.value(data).dtype), body);
    in.srcs = {it, src};
    body.push_back(instr(in));
  }
  std::vector<int> dims;
  for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

std::vector<Stmt> Expander::copy_or_fill(const TensorOp& op, int idx) {
  const TensorValue& outv = g_.value(op.output);
  // Copy src into the target view, or fill a new tensor: over the
  // written tensor's shape, cut at its valid extents.
  const TensorValue& src = g_.value(op.inputs.empty() ? op.output : op.inputs[0]);
  Space s = make_space(src.shape, op.tile_shape, idx, src.valid);
  std::vector<Stmt> body;
  int t;
  if (op_info(op.kind).cls == OpClass::Assemble) {
    t = convert(load_operand(op.inputs[0], s, body), compute_dtype(outv.dtype), body);
  } else if (op.kind == TensorOpKind::Full) {
    Instr f{Opcode::TFILL};
    f.dst = new_tile(s.tile, compute_dtype(outv.dtype));
    f.scalar = op.operands.at(0).constant;
    f.scalar_expr = op.operands.at(0).sym;
    body.push_back(instr(f));
    t = f.dst;
  } else if (op.kind == TensorOpKind::Random) {
    // The tile's first element's position in the flattened tensor, then the stride of each leading
    // dim there (a tile row is a run of consecutive positions).
    Instr r{Opcode::TRANDOM};
    r.dst = new_tile(s.tile, compute_dtype(outv.dtype));
    r.random = op.random;
    const size_t rank = s.shape.size();
    std::vector<Expr> stride(rank, Expr(1));
    for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * s.shape[d + 1];
    Expr base = s.offset[rank - 1];
    for (size_t d = rank - 1; d-- > 0;) base = s.offset[d] * stride[d] + base;
    r.offsets = {base};
    for (size_t d = 0; d + 1 < rank; ++d) r.offsets.push_back(stride[d]);
    r.offsets.push_back(op.operands.empty() ? Expr(0) : *op.operands.at(0).sym);  // the block base
    body.push_back(instr(r));
    t = r.dst;
  } else {
    Instr a{Opcode::TARANGE};
    a.dst = new_tile(s.tile, compute_dtype(outv.dtype));
    a.scalar = op.start;
    a.step = op.step;
    a.offsets = {s.offset[0]};
    body.push_back(instr(a));
    t = a.dst;
  }
  store(t, op.output, s, body, op.kind == TensorOpKind::AtomicAdd);
  std::vector<int> dims;
  for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
  return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
}

}  // namespace pypto::expand_tiles_impl
