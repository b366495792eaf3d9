// Pass "plan_matmul_panels": the b operands of float matmuls, loaded in column panels.
//
// Requires: a verified Block Graph.
// Guarantees: a TLOAD and the TMATMUL / TMATMUL_ACC instructions reading its tile get
// `panels=W`, W = target.matmul_panel_cols() (the micro-kernel's register block width), exactly
// when: the tile is written only by TLOADs (outside fused runs) from fp32, fp16 or bf16 memory into
// an fp32 tile whose columns W divides; it is read only as the b operand of matmuls that are not
// b_trans, whose result is fp32, whose a has at least kPanelMinRows rows, whose b has at least
// kPanelMinPanels panels and whose L0 n (the tile's n without one) W divides. Such a load loses
// `view` (panels are a copy). Every other TLOAD and matmul gets panels=0.
//
// Why: the micro-kernel walks b one row of kVecFloats * 2 floats after another. In a row-major tile
// those rows lie a tile's width apart, so they share a few sets of the first-level cache and evict
// each other before the next register block comes back to them; in panels they are one contiguous
// run. The load writes the panels in the same pass over the source as a row-major copy (a
// transposed source is transposed straight into them, fp16 / bf16 are widened on the way), so the
// layout costs no extra copy. Products of few rows keep b by rows: their b may be a view of the
// source, no copy at all, and each b element serves too few rows to repay one. So do b tiles of one
// or two panels: their rows lie at most two panels apart, every line the micro-kernel fetches is
// used whole by the two panels, and a dense one (the transposed activations of an expert product)
// is read where it lies.
#include "passes/plan_matmul_panels.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "ir/errors.h"
#include "passes/util.h"

namespace pypto {

namespace {

bool is_matmul(Opcode op) { return op == Opcode::TMATMUL || op == Opcode::TMATMUL_ACC; }

/// The position of a matmul's b among its sources.
size_t b_pos(const Instr& in) { return in.op == Opcode::TMATMUL_ACC ? 2 : 1; }

/// Whether `mm` may read its b in panels of `w` columns.
bool takes_panels(const InCoreFunction& f, const Instr& mm, int64_t w) {
  if (mm.b_trans || tile_of(f, mm.dst).dtype != DataType::FP32) return false;
  const TileDecl& a = tile_of(f, mm.srcs[b_pos(mm) - 1]);
  const TileDecl& b = tile_of(f, mm.srcs[b_pos(mm)]);
  const int64_t n = b.shape.back(), n0 = mm.l0.size() == 3 ? mm.l0[2] : n;
  return b.dtype == DataType::FP32 && a.shape.size() >= 2 && a.shape[a.shape.size() - 2] >= kPanelMinRows &&
         n >= kPanelMinPanels * w && n % w == 0 && n0 % w == 0;
}

void plan(InCoreFunction& f, const std::vector<MemRef>& memrefs, int64_t w) {
  std::set<int> fused;  // tiles a fused run writes or reads: left by rows
  for_each_fused(f.body, [&](Fused& run) {
    for_each_instr(run.body, [&](const Instr& in) {
      if (in.dst >= 0) fused.insert(in.dst);
      fused.insert(in.srcs.begin(), in.srcs.end());
    });
  });
  std::map<int, bool> ok;  // tile -> may be laid out in panels (so far)
  for_each_instr(f.body, [&](const Instr& in) {
    if (in.dst < 0 || writes_memory(in.op)) return;
    bool loads = false;
    if (in.op == Opcode::TLOAD) {
      const TileDecl& t = tile_of(f, in.dst);
      const DataType src = memrefs.at(in.memref).dtype;
      loads = t.dtype == DataType::FP32 && t.shape.size() >= 2 && t.shape.back() % w == 0 &&
              (src == DataType::FP32 || src == DataType::FP16 || src == DataType::BF16);
    }
    auto [it, fresh] = ok.emplace(in.dst, loads);
    if (!fresh) it->second = it->second && loads;
  });
  for_each_instr(f.body, [&](const Instr& in) {
    for (size_t i = 0; i < in.srcs.size(); ++i) {
      auto it = ok.find(in.srcs[i]);
      if (it == ok.end() || !it->second) continue;
      it->second = is_matmul(in.op) && i == b_pos(in) && takes_panels(f, in, w);
    }
  });
  for (int t : fused) ok[t] = false;
  int products = 0;
  for_each_instr(f.body, [&](Instr& in) {
    if (in.op == Opcode::TLOAD) {
      auto it = ok.find(in.dst);
      in.panels = it != ok.end() && it->second ? w : 0;
      if (in.panels > 0) in.view = false;
    } else if (is_matmul(in.op)) {
      auto it = ok.find(in.srcs[b_pos(in)]);
      in.panels = it != ok.end() && it->second ? w : 0;
      products += in.panels > 0;
    } else {
      in.panels = 0;
    }
  });
  if (products > 0) pass_note(fmt::format("@{}: b of {} matmul(s) loaded in panels of {} columns", f.name, products, w));
}

}  // namespace

BlockGraph PlanMatmulPanels(const BlockGraph& g, const PassOptions& opts) {
  BlockGraph out = g;
  const int64_t w = opts.target.matmul_panel_cols();
  for (InCoreFunction& f : out.functions) plan(f, out.memrefs, w);
  return out;
}

}  // namespace pypto
