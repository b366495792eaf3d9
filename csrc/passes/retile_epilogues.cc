// Pass "retile_epilogues": Tensor Graph -> Tensor Graph.
//
// Requires: a verified Tensor Graph whose matmuls carry their cube tile.
// Guarantees: every elementwise op (unary, binary, where, cast) that reads a matmul's output, or
// the output of such an op, of the same shape and in the same control region, has the matmul's
// output tile (matmul_output_tile: [1, ..., bb, m, n]) as its tile shape and says so in its `tile_note`; nothing else
// changes. Its loop nest then walks the matmul's tile grid, so the epilogue (bias, activation,
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
  std::map<int, std::pair<std::vector<int64_t>, std::string>> cube;  // value -> (tile, matmul nest name)
  std::map<int, int> region_of;  // value -> region of the op that made it (-1: a parameter)
  for (const TensorOp& op : out.ops) region_of.emplace(op.output, op.region);
  for (size_t i = 0; i < out.ops.size(); ++i) {
    TensorOp& op = out.ops[i];
    const OpInfo& info = op_info(op.kind);
    const TensorValue& result = out.value(op.output);
    if (info.cls == OpClass::Matmul) {
      cube[op.output] = {matmul_output_tile(out, op), fmt::format("{}_{}", info.name, i)};
      continue;
    }
    if (info.cls != OpClass::Unary && info.cls != OpClass::Binary && info.cls != OpClass::Where &&
        info.cls != OpClass::Cast)
      continue;
    for (int in : op.inputs) {
      auto it = cube.find(in);
      if (it == cube.end() || !same_shape(out.value(in).shape, result.shape) || op.region != region_of.at(in))
        continue;
      cube[op.output] = it->second;
      op.tile_shape = it->second.first;
      op.tile_note = fmt::format("retiled to {} (the output tile of @{}) to fuse with it", ints_str(it->second.first),
                                 it->second.second);
      break;
    }
  }
  return out;
}

}  // namespace pypto
