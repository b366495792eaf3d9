// Pass "fast_forms": fused fp32 sines, cosines and tangents by their fast forms.
//
// Requires: a verified Block Graph after fuse_chains.
// Guarantees: in a Fused run whose chain values all stay in registers, every fp32 chain instruction
// whose opcode has a fast form is listed in Fused::fast (has_fast_form: a form exact only over a
// narrower domain, for the trigonometric functions |x| below 2^17 or 2^28, where the argument
// reduction needs no Payne-Hanek step; tile_ops/vector_math.h). The emitted strip loop evaluates
// those with the fast forms and flags an element outside the domain (or inf or nan); a flagged
// strip is evaluated again with the full forms, its row sums reset to their values before it. The
// second pass reads what the first read because no chain value is written back to a tile. A run
// with write-backs keeps the full forms. Printed as `fast=[...]` on FUSED, with a note per run in
// dump("passes").
#include "passes/fast_forms.h"

#include <fmt/format.h>

#include <set>

#include "ir/errors.h"
#include "passes/util.h"

namespace pypto {

namespace {

void mark(Fused& f, const InCoreFunction& fn) {
  f.fast.clear();
  const std::set<int> in_registers(f.registers.begin(), f.registers.end());
  std::vector<int> candidates;
  bool all_registers = true;
  for (const Stmt& b : f.body) {
    const Instr& in = std::get<Instr>(b.node);
    if (fuse_role(f, in) != FuseRole::Chain) continue;
    if (!in_registers.count(in.dst)) all_registers = false;
    if (has_fast_form(in.op) && tile_of(fn, in.dst).dtype == DataType::FP32) candidates.push_back(in.dst);
  }
  if (candidates.empty()) return;
  std::string names;
  for (int t : candidates) names += (names.empty() ? "%" : ", %") + tile_of(fn, t).name;
  if (!all_registers) {
    pass_note(fmt::format("@{}: {} keep their full forms (a chain value is written back to its tile, so a "
                          "strip cannot be evaluated twice)", fn.name, names));
    return;
  }
  f.fast = candidates;
  pass_note(fmt::format("@{}: {} by fast forms (a strip with an element outside their domain is redone)", fn.name,
                        names));
}

}  // namespace

BlockGraph FastForms(const BlockGraph& g, const PassOptions&) {
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) for_each_fused(f.body, [&](Fused& run) { mark(run, f); });
  return out;
}

}  // namespace pypto
