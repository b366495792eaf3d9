// Pass "retile_epilogues": Tensor Graph -> Tensor Graph.
//
// Requires: a verified Tensor Graph whose matmuls carry their cube tile.
// Guarantees: every elementwise op (unary, binary, where, cast) that reads a matmul's output, or
// the output of such an op, of the same shape and in the same control region, has the matmul's
// output tile (matmul_output_tile: [1, ..., bb, m, n]) as its tile shape, says so in its `tile_note` and names
// the matmul in `retiled_from` (the pipeline shrinks that matmul's cube tile when the epilogue is over the
// buffer budget); nothing else changes. Its loop nest then walks the matmul's tile grid, so the epilogue (bias, activation,
// gating) fuses with the product instead of reading it back from memory.
#include "passes/retile_epilogues.h"
#include "passes/util.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <utility>

namespace pypto {

namespace {

bool same_shape(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d)
    if (!a[d].equals(b[d])) return false;
  return true;
}

}  // namespace

TensorGraph RetileEpilogues(const TensorGraph& g, const PassOptions&) {
  TensorGraph out = g;
  std::map<int, int> matmul_of;  // value -> index of the matmul whose output tile it takes
  std::map<int, int> region_of;  // value -> region of the op that made it (-1: a parameter)
  for (const TensorOp& op : out.ops) region_of.emplace(op.output, op.region);
  for (size_t i = 0; i < out.ops.size(); ++i) {
    TensorOp& op = out.ops[i];
    const OpInfo& info = op_info(op.kind);
    const TensorValue& result = out.value(op.output);
    if (info.cls == OpClass::Matmul) {
      matmul_of[op.output] = static_cast<int>(i);
      continue;
    }
    if (info.cls != OpClass::Unary && info.cls != OpClass::Binary && info.cls != OpClass::Where &&
        info.cls != OpClass::Cast)
      continue;
    for (int in : op.inputs) {
      auto it = matmul_of.find(in);
      if (it == matmul_of.end() || !same_shape(out.value(in).shape, result.shape) || op.region != region_of.at(in))
        continue;
      const TensorOp& mm = out.ops[it->second];
      matmul_of[op.output] = it->second;
      op.tile_shape = matmul_output_tile(out, mm);
      op.retiled_from = it->second;
      op.tile_note = fmt::format("retiled to {} (the output tile of @{}_{}) to fuse with it", ints_str(op.tile_shape),
                                 op_info(mm.kind).name, it->second);
      break;
    }
  }
  return out;
}

}  // namespace pypto
