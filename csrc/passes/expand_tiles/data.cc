// Pass "expand_tiles": gather and scatter (indexed loads and stores), and assemble, full and arange
// (a copy into a view, or a new tensor filled).
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

std::vector<Stmt> Expander::indexed(const TensorOp& op, int idx) {
  const OpInfo& info = op_info(op.kind);
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
  int it;
  if (iv.view && iv.view->map.size() == s.shape.size() && iv.view->map.back() == -1 && op.dim != static_cast<int>(last)) {
    Instr ld{Opcode::TLOAD};
    ld.memref = index;
    std::vector<int64_t> shape = s.tile;
    shape.back() = 1;
    ld.offsets = s.offset;
    ld.offsets.back() = Expr(0);
    ld.valid = s.valid;
    ld.valid.back() = Expr(1);
    ld.dst = new_tile(shape, compute_dtype(iv.dtype));
    body.push_back(instr(ld));
    it = ld.dst;
  } else {
    it = load_operand(index, s, body);
  }
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
