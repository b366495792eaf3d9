// Pass "expand_tiles": the loop nest of an elementwise op (unary, binary, where, cast), with
// broadcast operands through row/column expand forms or an expanded copy.
#include "passes/expand_tiles/expander.h"

namespace pypto::expand_tiles_impl {

/// The tile of one elementwise op over iteration `s`; returns the result tile.
int Expander::elementwise(const TensorOp& op, const Space& s, DataType result, std::vector<Stmt>& body) {
  const OpInfo& info = op_info(op.kind);
  if (info.cls == OpClass::Cast) {
    int x = load_operand(op.inputs[0], s, body);
    Instr c{Opcode::TCAST};
    c.srcs = {x};
    c.dst = new_tile(s.tile, result);
    c.round_to = g_.value(op.output).dtype;
    body.push_back(instr(c));
    return c.dst;
  }
  // Load tensor operands, converted to the op's compute dtype (a where's condition stays as it is).
  std::vector<int> tiles;
  Instr in{plain_opcode(op.kind)};
  for (size_t pos = 0; pos < op.operands.size(); ++pos) {
    const Operand& o = op.operands[pos];
    if (!o.is_tensor()) {
      if (in.scalar_pos >= 0)
        throw NotSupportedError(fmt::format("pypto.{} at {}: more than one constant operand is not supported yet",
                                            info.name, op.loc.str()));
      in.scalar_pos = static_cast<int>(pos);
      in.scalar = o.constant;
      in.scalar_expr = o.sym;
      tiles.push_back(-1);
      continue;
    }
    int t = load_operand(o.value, s, body);
    bool is_cond = info.cls == OpClass::Where && pos == 0;
    tiles.push_back(is_cond ? t : convert(t, op.compute, body));
  }
  // A unary test (signbit) computes in its operand's type; its result converts afterwards.
  const bool convert_result = info.cls == OpClass::Unary && op.compute != result;
  in.dst = new_tile(s.tile, convert_result ? op.compute : result);
  // Broadcast operands: the second operand of add/sub/mul/div/maximum may use a
  // row or column expand form; anything else is expanded to the full tile first.
  const auto& te = s.tile;
  size_t r = te.size();
  for (size_t pos = 0; pos < tiles.size(); ++pos) {
    if (tiles[pos] < 0 || out_.tiles[tiles[pos]].shape == te) continue;
    const auto tb = out_.tiles[tiles[pos]].shape;
    bool other_full = tiles.size() == 2 && pos == 1 && tiles[0] >= 0 && out_.tiles[tiles[0]].shape == te;
    if (other_full && in.op == plain_opcode(op.kind)) {
      // The table's row / column expand forms of the op's opcode, where it has them.
      bool row = tb[r - 1] == 1 && te[r - 1] != 1 && std::equal(tb.begin(), tb.end() - 1, te.begin());
      bool col = r == 2 && tb[0] == 1 && te[0] != 1 && tb[1] == te[1];
      auto rowx = opcode_variant(in.op, OpForm::RowExpand), colx = opcode_variant(in.op, OpForm::ColExpand);
      if (row && rowx) {
        in.op = *rowx;
        continue;
      }
      if (col && colx) {
        in.op = *colx;
        continue;
      }
    }
    tiles[pos] = expand_to(tiles[pos], te, out_.tiles[tiles[pos]].dtype, body);
  }
  for (int t : tiles)
    if (t >= 0) in.srcs.push_back(t);
  body.push_back(instr(in));
  if (convert_result) return convert(in.dst, result, body);
  // A narrow integer result (int8, int16, uint8, uint16) is computed in a wider type: wrap it to its
  // own type, as torch's per-op result, before another op reads it (a right shift, a division or a
  // comparison of the unwrapped value would differ).
  const DataType stored = g_.value(op.output).dtype;
  if (stored != result && stored != DataType::BOOL && dtype_is_int(stored))
    return convert(convert(in.dst, stored, body), result, body);
  return in.dst;
}

int Expander::expand_to(int src, const std::vector<int64_t>& shape, DataType dt, std::vector<Stmt>& body) {
  Instr e{Opcode::TEXPAND};
  e.srcs = {src};
  e.dst = new_tile(shape, dt);
  body.push_back(instr(e));
  return e.dst;
}

}  // namespace pypto::expand_tiles_impl
