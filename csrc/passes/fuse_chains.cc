// Pass "fuse_chains": elementwise chains as strip-mined loops.
//
// Requires: a verified Block Graph after plan_buffers (tile offsets set).
// Guarantees: a run of consecutive statements of an InCore function becomes one Fused statement
// when it holds at least two of: elementwise instructions over tiles of one shape and type (rank 1
// or 2), row sums of their values right after them, and a store of a chain value into a returned
// tensor right after those. Loads and reshapes between chain instructions that touch nothing the
// chain touched join the run (role Before, or Alias for a reshape only the chain reads, which the
// loop reads through its source). The loop walks rows x cols elements in strips of strip_elems()
// (a divisor of cols); a chain value every reader of which is a later chain instruction, a row sum
// or the store is kept in registers (Fused::registers). Where the planned offsets would let the loop
// overwrite a value before reading it, the tile written gets bytes of its own past the arena
// (tile_offsets, buffer_bytes); a run that would take the arena past the buffer budget is left
// unfused. Accesses checked where they run (ir/bounds.h) never join a run. Runs are printed as
// FUSED ... ENDFUSED, with notes in dump("passes").
#include "passes/fuse_chains.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ir/bounds.h"
#include "ir/errors.h"
#include "passes/util.h"

namespace pypto {

int64_t strip_elems(const Target& t) {
  // Strip arrays of a few chain values stay in L1: a 64th of it per array, a power of two.
  int64_t s = 64;
  while (s * 2 <= t.l1d_bytes / 64) s *= 2;
  return s;
}

namespace {

/// The statements of `body` with every Fused run replaced by its instructions.
std::vector<Stmt> unfused(const std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  for (const Stmt& s : body) {
    if (auto* f = std::get_if<Fused>(&s.node)) {
      for (const Stmt& x : unfused(f->body)) out.push_back(x);
    } else if (auto* l = std::get_if<Loop>(&s.node)) {
      Loop n = *l;
      n.body = unfused(l->body);
      out.push_back(Stmt{std::move(n)});
    } else if (auto* c = std::get_if<IfThen>(&s.node)) {
      IfThen n = *c;
      n.then_body = unfused(c->then_body);
      n.else_body = unfused(c->else_body);
      out.push_back(Stmt{std::move(n)});
    } else {
      out.push_back(s);
    }
  }
  return out;
}

class ChainFuser {
 public:
  ChainFuser(const InCoreFunction& src, InCoreFunction& out, const std::vector<MemRef>& memrefs,
             const PassOptions& opts)
      : src_(src), out_(out), memrefs_(memrefs), strip_(strip_elems(opts.target)),
        budget_(buffer_budget_bytes(opts)), checked_(access_bounds(src, memrefs).checked_where_run) {
    for_each_instr(src_.body, [&](const Instr& in) {
      for (int s : in.srcs) readers_[s].push_back(&in);
      if (reads_memory(in.op)) {
        read_memrefs_.insert(in.memref);
        reads_view_ = reads_view_ || memrefs_.at(in.memref).kind == MemKind::View;
      }
    });
    arena_end_ = (out_.buffer_bytes + 63) / 64 * 64;
  }

  void run() {
    out_.body = rewrite(src_.body);
    if (relocated_) out_.buffer_bytes = arena_end_;
  }

 private:
  std::vector<Stmt> rewrite(const std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (size_t i = 0; i < body.size();) {
      const Stmt& s = body[i];
      if (auto* l = std::get_if<Loop>(&s.node)) {
        Loop n = *l;
        n.body = rewrite(l->body);
        out.push_back(Stmt{std::move(n)});
        ++i;
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        IfThen n = *c;
        n.then_body = rewrite(c->then_body);
        n.else_body = rewrite(c->else_body);
        out.push_back(Stmt{std::move(n)});
        ++i;
      } else if (Fused f; size_t n = chain_at(body, i, f)) {
        out.push_back(Stmt{std::move(f)});
        i += n;
      } else {
        out.push_back(s);
        ++i;
      }
    }
    return out;
  }

  const TileDecl& tile(int id) const {
    for (const auto& t : src_.tiles)
      if (t.id == id) return t;
    throw InternalError(fmt::format("fuse_chains @{}: tile {} is not declared", src_.name, id));
  }

  /// The row or column broadcast operand of `in`, or -1.
  static int broadcast_operand(const Instr& in) {
    return (is_row_expand(in.op) || is_col_expand(in.op)) && in.srcs.size() == 2 ? in.srcs[1] : -1;
  }

  /// True when `in` computes each element of its destination from the same element of its tile
  /// operands (or a row / column broadcast operand, or a constant), all of the destination's type,
  /// on a tile of rank 1 or 2.
  bool elementwise(const Instr& in) const {
    switch (opcode_info(in.op).form) {
      case OpForm::Unary: case OpForm::Binary: case OpForm::RowExpand: case OpForm::ColExpand: break;
      default: return false;
    }
    if (in.dst < 0) return false;
    const TileDecl& t = tile(in.dst);
    if (t.shape.empty() || t.shape.size() > 2) return false;
    for (int src : in.srcs)
      if (tile(src).dtype != t.dtype) return false;
    if (is_row_expand(in.op) || is_col_expand(in.op)) return in.srcs.size() == 2 && t.shape.size() == 2;
    const int arity = opcode_num_srcs(in.op);
    if (arity == 1) return in.srcs.size() == 1 && tile(in.srcs[0]).shape == t.shape;
    if (arity != 2) return false;
    if (in.scalar_pos == 0 || in.scalar_pos == 1) return in.srcs.size() == 1 && tile(in.srcs[0]).shape == t.shape;
    return in.srcs.size() == 2 && tile(in.srcs[0]).shape == t.shape && tile(in.srcs[1]).shape == t.shape;
  }

  /// True when `in` sums the rows of a float, double or 32/64-bit integer tile shaped like
  /// `shape_tile` (the whole row valid) into a tile of one element per row, of the same type.
  bool row_sum_of(const Instr& in, const TileDecl& shape_tile) const {
    if (in.op != Opcode::TROWSUM || in.srcs.size() != 1) return false;
    const TileDecl& src = tile(in.srcs[0]);
    const TileDecl& d = tile(in.dst);
    const int64_t C = shape_tile.shape.back();
    if (src.shape != shape_tile.shape || src.dtype != shape_tile.dtype || d.dtype != src.dtype) return false;
    // The accumulator is reduced by `omp simd`, which takes arithmetic types only.
    if (src.dtype != DataType::FP32 && src.dtype != DataType::DOUBLE && src.dtype != DataType::INT32 &&
        src.dtype != DataType::INT64)
      return false;
    if (numel(d.shape) != numel(src.shape) / C) return false;
    if (in.valid.empty()) return true;
    const Expr& valid = in.valid.at(src.shape.size() - 1);
    return valid.is_const() && valid.value() >= C;
  }

  /// True when `in` stores a whole tile the chain defines, of the chain's shape, into a returned
  /// tensor of the same rank and type that this function never reads (nor any view): writing it
  /// strip by strip cannot change what the chain reads.
  bool fusible_store(const Instr& in, const std::vector<const Instr*>& chain) const {
    if (in.op != Opcode::TSTORE || in.srcs.size() != 1 || in.atomic) return false;
    const TileDecl& t = tile(in.srcs[0]);
    const TileDecl& first = tile(chain[0]->dst);
    bool defined = false;
    for (const Instr* c : chain) defined = defined || c->dst == in.srcs[0];
    if (!defined || t.shape != first.shape || t.dtype != first.dtype) return false;
    const MemRef& m = memrefs_.at(in.memref);
    if (m.kind != MemKind::Output || m.dtype != t.dtype || in.offsets.size() != t.shape.size()) return false;
    for (size_t d = 0; d < in.valid.size(); ++d)
      if (!in.valid[d].is_const() || in.valid[d].value() != t.shape[d]) return false;
    return !read_memrefs_.count(in.memref) && !reads_view_;
  }

  /// True when reshape `in` only renumbers its source's elements (same type and count).
  bool reshape_alias(const Instr& in) const {
    if (in.op != Opcode::TRESHAPE || in.srcs.size() != 1) return false;
    const TileDecl& d = tile(in.dst);
    const TileDecl& src = tile(in.srcs[0]);
    return d.dtype == src.dtype && numel(d.shape) == numel(src.shape);
  }

  /// Arena bytes [offset, offset + size) of a tile's buffer.
  std::optional<std::pair<int64_t, int64_t>> arena_range(int id) const {
    auto it = out_.tile_offsets.find(id);
    if (it == out_.tile_offsets.end()) return std::nullopt;
    return std::make_pair(it->second, it->second + tile_bytes(tile(id)));
  }

  /// Forms the run starting at `body[i]` into `f`; returns the number of statements it covers (0:
  /// no run starts there).
  size_t chain_at(const std::vector<Stmt>& body, size_t i, Fused& f) {
    std::vector<const Instr*> chain, hoisted;
    std::set<int> touched;
    size_t consumed = 0;
    // Tiles that get bytes of their own if the run forms; until then they overlap nothing.
    std::set<int> relocating;
    auto range = [&](int t) { return relocating.count(t) ? std::nullopt : arena_range(t); };
    auto overlaps_touched = [&](int t) {
      auto rt = range(t);
      for (int u : touched) {
        auto ru = range(u);
        if (u == t || (rt && ru && rt->first < ru->second && ru->first < rt->second)) return true;
      }
      return false;
    };
    for (size_t j = i; j < body.size(); ++j) {
      auto* in = std::get_if<Instr>(&body[j].node);
      if (in == nullptr || checked_.count(in)) break;
      if (!elementwise(*in)) {
        // A load must not overwrite what the chain touched; a reshape only the chain reads is read
        // through its source and writes nothing.
        const bool writes = in->op == Opcode::TLOAD || !reshape_alias(*in);
        const bool movable = !chain.empty() && (in->op == Opcode::TLOAD || in->op == Opcode::TRESHAPE) &&
                             std::none_of(in->srcs.begin(), in->srcs.end(), [&](int t) { return touched.count(t); });
        if (!movable) break;
        if (writes && overlaps_touched(in->dst) && arena_range(in->dst)) relocating.insert(in->dst);
        hoisted.push_back(in);
        continue;
      }
      if (!chain.empty()) {
        const TileDecl& first = tile(chain[0]->dst);
        const TileDecl& t = tile(in->dst);
        if (t.shape != first.shape || t.dtype != first.dtype) break;
      }
      bool clash = false;
      for (const Instr* h : hoisted) clash = clash || h->dst == in->dst;
      // A broadcast operand is read once per row or column, before the loop over it: the chain ends
      // before an instruction that reads one an earlier instruction wrote, or that writes one it or
      // an earlier instruction reads.
      const int bsrc = broadcast_operand(*in);
      clash = clash || (bsrc >= 0 && in->dst == bsrc);
      for (const Instr* c : chain) clash = clash || c->dst == bsrc || broadcast_operand(*c) == in->dst;
      if (clash) break;
      chain.push_back(in);
      touched.insert(in->dst);
      touched.insert(in->srcs.begin(), in->srcs.end());
      consumed = j - i + 1;
    }
    if (chain.empty()) return 0;
    // Row sums of chain values right after the chain accumulate inside its loop.
    std::vector<const Instr*> sums;
    const TileDecl& shape_tile = tile(chain[0]->dst);
    {
      std::set<int> defined;
      for (const Instr* in : chain) defined.insert(in->dst);
      for (size_t j = i + consumed; j < body.size(); ++j) {
        auto* in = std::get_if<Instr>(&body[j].node);
        if (in == nullptr || !row_sum_of(*in, shape_tile) || !defined.count(in->srcs[0]) || defined.count(in->dst)) break;
        bool clash = false;
        for (const Instr* q : sums) clash = clash || q->dst == in->dst;
        if (clash) break;
        sums.push_back(in);
        consumed = j - i + 1;
      }
    }
    // A store of a chain value into a returned tensor right after them writes each strip.
    const Instr* store = nullptr;
    if (i + consumed < body.size()) {
      auto* in = std::get_if<Instr>(&body[i + consumed].node);
      if (in != nullptr && !checked_.count(in) && fusible_store(*in, chain)) {
        store = in;
        ++consumed;
      }
    }
    if (chain.size() + sums.size() + (store ? 1 : 0) < 2) return 0;
    // Reshapes (of those before the chain's end) only the chain reads are read through their sources.
    std::map<int, int> alias;
    for (size_t j = i; j < i + consumed; ++j) {
      const Instr* in = &std::get<Instr>(body[j].node);
      if (std::find(hoisted.begin(), hoisted.end(), in) == hoisted.end() || in->op != Opcode::TRESHAPE ||
          !reshape_alias(*in))
        continue;
      bool chain_only = true;
      for (const Instr* r : readers_[in->dst]) chain_only = chain_only && std::count(chain.begin(), chain.end(), r) > 0;
      if (chain_only) alias[in->dst] = in->srcs[0];
    }
    auto through = [&](int t) {
      auto it = alias.find(t);
      return it == alias.end() ? t : it->second;
    };
    for (const auto& [dst, src] : alias)
      for (const Instr* in : chain)
        if (in->dst == src) return 0;  // a reshape read through its source needs that source unchanged
    const int64_t C = shape_tile.shape.back();
    const int64_t R = numel(shape_tile.shape) / C;
    // Chain values whose every reader is a later chain instruction, a row sum or the store stay in
    // registers.
    std::set<int> local;
    for (size_t k = 0; k < chain.size(); ++k) {
      const int d = chain[k]->dst;
      bool ok = true;
      for (const Instr* r : readers_[d]) {
        auto pos = std::find(chain.begin(), chain.end(), r);
        const bool fused_reader = std::find(sums.begin(), sums.end(), r) != sums.end() || r == store;
        ok = ok && (fused_reader || (pos != chain.end() && pos > chain.begin() + static_cast<std::ptrdiff_t>(k)));
      }
      for (size_t q = 0; q < chain.size() && ok; ++q) ok = q == k || chain[q]->dst != d;
      if (ok) local.insert(d);
    }
    // Every element is read and written at one index, so a written buffer may share its bytes with a
    // read one only exactly; a broadcast operand must not share bytes with a written buffer.
    std::set<int> written, same_index, broadcast, row_broadcast, in_registers;
    for (const Instr* in : chain) {
      if (!local.count(in->dst)) written.insert(in->dst);
      for (size_t k = 0; k < in->srcs.size(); ++k) {
        if (in_registers.count(in->srcs[k])) continue;
        const bool b = (is_row_expand(in->op) || is_col_expand(in->op)) && k == 1;
        (b ? broadcast : same_index).insert(through(in->srcs[k]));
        if (is_row_expand(in->op) && k == 1) row_broadcast.insert(through(in->srcs[k]));
      }
      in_registers.insert(in->dst);
    }
    // Without broadcasts or sums the tile is one flat row.
    bool flat = sums.empty() && store == nullptr;
    for (const Instr* in : chain) flat = flat && !is_row_expand(in->op) && !is_col_expand(in->op);
    const int64_t cols = flat ? R * C : C, rows = flat ? 1 : R;
    int64_t S = 0;
    if (cols <= strip_) {
      S = cols;
    } else {
      for (int64_t d = strip_; d >= 64 && S == 0; d /= 2) S = cols % d == 0 ? d : 0;
    }
    if (S == 0) return 0;
    // A row sum is stored at the end of its row, after the row's broadcast operands were read at its
    // start: it may take exactly the bytes of a row operand, and no other chain tile's.
    for (const Instr* q : sums) {
      auto rq = range(q->dst);
      bool clash = false;
      for (const std::set<int>* tiles : {&same_index, &broadcast, &written}) {
        for (int t : *tiles) {
          auto rt = range(t);
          if (!rq || !rt || rq->second <= rt->first || rt->second <= rq->first) continue;
          if (tiles == &broadcast && row_broadcast.count(t) && *rq == *rt) continue;
          clash = true;
        }
      }
      if (clash) relocating.insert(q->dst);
    }
    for (int w : written) {
      auto rw = range(w);
      if (!rw) continue;
      bool clash = false;
      for (const std::set<int>* reads : {&same_index, &broadcast}) {
        for (int r : *reads) {
          auto rr = range(r);
          if (r == w || !rr || rr->second <= rw->first || rw->second <= rr->first) continue;
          clash = clash || reads == &broadcast || *rr != *rw;
        }
      }
      if (clash) relocating.insert(w);
    }
    // Bytes of their own for the tiles that need them, within the budget.
    int64_t end = arena_end_;
    for (int t : relocating) end += (tile_bytes(tile(t)) + 63) / 64 * 64;
    if (end > budget_ && end > arena_end_) {
      pass_note(fmt::format("@{}: left a chain at {} unfused: giving {} tile(s) bytes of their own would take the "
                            "arena to {} bytes, past the budget of {}",
                            src_.name, opcode_name(chain[0]->op), relocating.size(), end, budget_));
      return 0;
    }
    for (int t : relocating) {
      out_.tile_offsets[t] = arena_end_;
      relocated_ = true;
      pass_note(fmt::format("@{}: tile %{} moved to arena offset {} (its planned bytes overlap what the fused "
                            "loop still reads)", src_.name, tile(t).name, arena_end_));
      arena_end_ += (tile_bytes(tile(t)) + 63) / 64 * 64;
    }
    for (size_t j = i; j < i + consumed; ++j) f.body.push_back(body[j]);
    f.rows = rows;
    f.cols = cols;
    f.strip = S;
    for (const Instr* in : chain)
      if (local.count(in->dst) && std::find(f.registers.begin(), f.registers.end(), in->dst) == f.registers.end())
        f.registers.push_back(in->dst);
    for (const auto& [dst, src] : alias) f.aliases.push_back(dst);
    std::string ops;
    for (const Stmt& s : f.body) {
      const Instr& in = std::get<Instr>(s.node);
      const FuseRole role = fuse_role(f, in);
      if (role == FuseRole::Before || role == FuseRole::Alias) continue;
      ops += (ops.empty() ? "" : ", ") + std::string(opcode_name(in.op));
    }
    pass_note(fmt::format("@{}: fused {} over {} x {} in strips of {}", src_.name, ops, rows, cols, S));
    return consumed;
  }

  const InCoreFunction& src_;
  InCoreFunction& out_;
  const std::vector<MemRef>& memrefs_;
  const int64_t strip_, budget_;
  const std::set<const Instr*> checked_;  // accesses checked where they run: never fused
  std::map<int, std::vector<const Instr*>> readers_;
  std::set<int> read_memrefs_;
  bool reads_view_ = false;
  bool relocated_ = false;  // some tile got bytes past the planned arena
  int64_t arena_end_ = 0;
};

}  // namespace

BlockGraph FuseChains(const BlockGraph& g, const PassOptions& opts) {
  BlockGraph out = g;
  for (size_t k = 0; k < g.functions.size(); ++k) {
    // Runs a module's text already fused are formed again from their instructions.
    InCoreFunction src = g.functions[k];
    src.body = unfused(src.body);
    ChainFuser(src, out.functions[k], out.memrefs, opts).run();
  }
  return out;
}

}  // namespace pypto
