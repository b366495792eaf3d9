// Pass "plan_matmul_panels": the b operands of float matmuls, loaded in column panels.
//
// Requires: a verified Block Graph.
// Guarantees: a TLOAD and the TMATMUL / TMATMUL_ACC instructions reading its tile get
// `panels=W`, W = target.matmul_panel_cols() (the micro-kernel's register block width), exactly
// when: the tile is written only by TLOADs (outside fused runs) from fp32, fp16 or bf16 memory into
// an fp32 tile whose columns W divides; it is read only as the b operand of matmuls that are not
// b_trans, whose result is fp32, whose a has at least kPanelMinRows rows, whose b has at least
// kPanelMinPanels panels and whose L0 n (the tile's n without one) W divides, and whose L0 block of
// b rows (the L0 k rows of the tile's n) exceeds the target's first-level cache; and, when a load of the
// tile may view its source (an fp32 tensor that is no view, rows spanned whole), whose a has at least
// kPanelMinRowsInPlace rows and b at least kPanelMinColsInPlace columns. Such a load loses `view`
// (panels are a copy). Every other TLOAD and matmul gets panels=0.
//
// Why: the micro-kernel walks b one row of kVecFloats * 2 floats after another. In a row-major tile
// those rows lie a tile's width apart, so they share a few sets of the first-level cache and, once
// the block of b rows is larger than that cache, evict each other before the next register block
// comes back to them; in panels they are one contiguous run. The load writes the panels in the same pass over the source as a row-major copy (a
// transposed source is transposed straight into them, fp16 / bf16 are widened on the way), so the
// layout costs no extra copy where the load copies anyway (a tile of a wider tensor, a transposed
// view, a conversion). A b the load may view in place (no copy at all) is laid out in panels only
// for products of many rows, over which the copy is spread, and rows of at least 512 bytes, which
// are the ones that share too few cache sets (an attention block's values, [128 keys, 64], stay a
// view: in panels that kernel ran up to 1.35x slower). Products of few rows keep b by rows: each b
// element serves too few rows to repay a copy. So do b tiles of one
// or two panels: their rows lie at most two panels apart, every line the micro-kernel fetches is
// used whole by the two panels, and a dense one (the transposed activations of an expert product)
// is read where it lies.
//
// Where the first-level data cache is larger than kPanelMaxL1dBytes the pass leaves every b by rows
// unless PassOptions::matmul_panels asks for panels: there the row-major b measured as fast or
// faster, and the panel copy is a cost with nothing to repay it.
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

/// Whether `mm` may read its b in panels of `w` columns on `target`; `in_place`: a load of b may
/// view its source instead.
bool takes_panels(const InCoreFunction& f, const Instr& mm, const Target& target, bool in_place) {
  if (mm.b_trans || tile_of(f, mm.dst).dtype != DataType::FP32) return false;
  const int64_t w = target.matmul_panel_cols();
  const TileDecl& a = tile_of(f, mm.srcs[b_pos(mm) - 1]);
  const TileDecl& b = tile_of(f, mm.srcs[b_pos(mm)]);
  const int64_t n = b.shape.back(), n0 = mm.l0.size() == 3 ? mm.l0[2] : n;
  const int64_t m = a.shape.size() >= 2 ? a.shape[a.shape.size() - 2] : 0;
  const int64_t k0 = mm.l0.size() == 3 ? mm.l0[1] : a.shape.empty() ? 0 : a.shape.back();
  // The rows of b one L0 block's register blocks walk, k0 rows of the tile's n: within the
  // first-level cache they stay there by rows too.
  if (k0 * n * static_cast<int64_t>(sizeof(float)) <= target.l1d_bytes) return false;
  if (in_place && (m < kPanelMinRowsInPlace || n < kPanelMinColsInPlace)) return false;
  return b.dtype == DataType::FP32 && m >= kPanelMinRows && n >= kPanelMinPanels * w && n % w == 0 && n0 % w == 0;
}

/// Whether load `in` of a tile may find its box dense in memory at run time, and so view it
/// (pto::tload_view) instead of copying: an fp32 tensor that is no view, whose rows the tile spans
/// whole. Any other load copies whatever its layout.
bool may_view(const Instr& in, const TileDecl& t, const std::vector<MemRef>& memrefs) {
  const MemRef& m = memrefs.at(in.memref);
  auto cols = m.shape.back().as_const();
  return m.dtype == DataType::FP32 && !m.view && cols && *cols == t.shape.back();
}

void plan(InCoreFunction& f, const std::vector<MemRef>& memrefs, const Target& target) {
  const int64_t w = target.matmul_panel_cols();
  std::set<int> fused;  // tiles a fused run writes or reads: left by rows
  for_each_fused(f.body, [&](Fused& run) {
    for_each_instr(run.body, [&](const Instr& in) {
      if (in.dst >= 0) fused.insert(in.dst);
      fused.insert(in.srcs.begin(), in.srcs.end());
    });
  });
  std::map<int, bool> ok;  // tile -> may be laid out in panels (so far)
  std::set<int> viewable;  // tiles some load of which may view its source
  for_each_instr(f.body, [&](const Instr& in) {
    if (in.dst < 0 || writes_memory(in.op)) return;
    bool loads = false;
    if (in.op == Opcode::TLOAD) {
      const TileDecl& t = tile_of(f, in.dst);
      const DataType src = memrefs.at(in.memref).dtype;
      loads = t.dtype == DataType::FP32 && t.shape.size() >= 2 && t.shape.back() % w == 0 &&
              (src == DataType::FP32 || src == DataType::FP16 || src == DataType::BF16);
      if (loads && may_view(in, t, memrefs)) viewable.insert(in.dst);
    }
    auto [it, fresh] = ok.emplace(in.dst, loads);
    if (!fresh) it->second = it->second && loads;
  });
  for_each_instr(f.body, [&](const Instr& in) {
    for (size_t i = 0; i < in.srcs.size(); ++i) {
      auto it = ok.find(in.srcs[i]);
      if (it == ok.end() || !it->second) continue;
      it->second = is_matmul(in.op) && i == b_pos(in) && takes_panels(f, in, target, viewable.count(in.srcs[i]) > 0);
    }
  });
  for (int t : fused) ok[t] = false;
  int products = 0;
  for_each_instr(f.body, [&](Instr& in) {
    if (in.op == Opcode::TLOAD) {
      auto it = ok.find(in.dst);
      in.panels = it != ok.end() && it->second ? w : 0;
      if (in.panels > 0) in.view = in.strided = false;
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
  const bool fits = opts.target.l1d_bytes <= kPanelMaxL1dBytes;
  if (!opts.matmul_panels.value_or(fits)) {
    for (InCoreFunction& f : out.functions) for_each_instr(f.body, [](Instr& in) { in.panels = 0; });
    pass_note(opts.matmul_panels ? "matmul_panels=False: b stays by rows"
                                 : fmt::format("the target's L1d is {} KiB (panels pay up to {} KiB): b stays by rows",
                                               opts.target.l1d_bytes >> 10, kPanelMaxL1dBytes >> 10));
    return out;
  }
  for (InCoreFunction& f : out.functions) plan(f, out.memrefs, opts.target);
  return out;
}

}  // namespace pypto
