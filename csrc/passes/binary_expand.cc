// Pass "binary_expand": binary expansion of dynamic orchestration loops.
//
// Requires: a verified Execution Graph. A loop to expand carries `range`
// (LoopRange) and has the constant step 1; max_range M and min_range m are
// powers of two with 1 <= m <= M; tile_levels, when given, has key 0 (the
// base rows, used by the residual), positive values, other keys powers of two
// in [m, M], and for each block size b the scale rows(b) / rows(0) is an
// integer that divides b. Tile-level variants `<callee>_<rows>` exist in the
// graph's functions with the callee's number of region and scalar params.
// Violations raise UserError naming the loop variable and the bad value.
//
// Guarantees: every orchestration loop with `range` (inside loops, IF
// branches and the bodies this pass produces, so nested ranged loops too) is
// replaced by statements without `range` that run the body once for each
// value of the loop variable in [start, stop), in increasing order. With
// n = max(stop - start, 0), r = n % m and q = n - r:
//   FOR v_blk in [0, q // M)                      (blocks of M, n >= 2M)
//     FOR v_M in [0, M / scale_M)                 v := start + v_blk*M + v_M*scale_M
//   IF ((q // b) % 2) == 1  for b = M/2 .. m      (one fixed-size block per bit of q)
//     FOR v_b in [0, b / scale_b)                 v := start + (q // 2b)*2b + v_b*scale_b
//   IF 0 < r                                      (residual, the base rows)
//     FOR v_r in [0, r)                           v := start + q + v_r
// Conditions and trip counts that fold to constants drop their dead parts.
// A view a call passes whose offsets or shape mention the loop variable is
// copied (a new memref `<view>_<block variable>`) with the block's expression.
// In a block whose scale is not 1, every CALL below it switches to the
// variant `<callee>_<rows(b)>` with the variant's block shape as extents;
// calls keep a variant an enclosing expanded block picked (nested loops must
// agree on the rows). Everything else, functions included, is unchanged: a
// graph without ranged loops comes back identical.
//
// Limits: a variant's block shape applies to every region argument of the
// call. In nested expansions a call below a scaled block of one loop and a
// scale-1 block (the residual) of another keeps the scaled variant, whose
// extents along the other loop's dims exceed that loop's step. Nested tile
// levels are exact when no scale-1 block of one loop runs inside or around a
// scaled block of another (e.g. every trip count a multiple of min_range).
#include "passes/binary_expand.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/errors.h"
#include "passes/util.h"

namespace pypto {

namespace {

bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

/// The tile variant an enclosing expanded block picked for the calls below it.
struct VariantCtx {
  int64_t rows = 0;   ///< 0: calls keep their callee
  std::string var;    ///< the loop variable that picked it (for messages)
  int64_t block = 0;  ///< its block size
};

/// Every variable name `body` mentions or binds.
void collect_names(const std::vector<Stmt>& body, std::set<std::string>& out) {
  auto add = [&](const Expr& e) {
    for (const std::string& v : vars_of(e)) out.insert(v);
  };
  auto add_all = [&](const std::vector<Expr>& v) {
    for (const Expr& e : v) add(e);
  };
  for (const Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) {
      add_all(in->offsets);
      add_all(in->valid);
      add_all(in->window);
      if (in->scalar_expr) add(*in->scalar_expr);
    } else if (auto* l = std::get_if<Loop>(&s.node)) {
      out.insert(l->var);
      add(l->start);
      add(l->stop);
      add(l->step);
      collect_names(l->body, out);
    } else if (auto* i = std::get_if<IfThen>(&s.node)) {
      add(i->cond);
      collect_names(i->then_body, out);
      collect_names(i->else_body, out);
    } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
      out.insert(r->var);
      add_all(r->index);
    } else {
      const Call& c = std::get<Call>(s.node);
      for (const CallArg& a : c.args) {
        add_all(a.offsets);
        add_all(a.extents);
      }
      add_all(c.scalars);
    }
  }
}

class Expander {
 public:
  Expander(const ExecutionGraph& g, std::vector<MemRef>& memrefs) : g_(g), memrefs_(memrefs) {
    for (size_t i = 0; i < g.functions.size(); ++i) by_name_.emplace(g.functions[i].name, static_cast<int>(i));
    scope_.insert(g.dyn_dims.begin(), g.dyn_dims.end());
  }

  std::vector<Stmt> stmts(const std::vector<Stmt>& in, const VariantCtx& ctx) {
    std::vector<Stmt> out;
    for (const Stmt& s : in) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        if (l->range) {
          expand(*l, ctx, out);
          continue;
        }
        Loop copy = *l;
        scope_.insert(l->var);
        copy.body = stmts(l->body, ctx);
        scope_.erase(l->var);
        out.push_back(Stmt{std::move(copy)});
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        out.push_back(Stmt{IfThen{c->cond, stmts(c->then_body, ctx), stmts(c->else_body, ctx)}});
      } else if (auto* c = std::get_if<Call>(&s.node)) {
        out.push_back(Stmt{switch_call(*c, ctx)});
      } else {
        out.push_back(s);
      }
    }
    return out;
  }

 private:
  const ExecutionGraph& g_;
  std::vector<MemRef>& memrefs_;  ///< the output graph's: views rebound to a block's variable are added
  std::map<std::string, int> by_name_;
  std::set<std::string> scope_;  ///< variables bound around the statement being rewritten

  /// `want`, or `want_1`, `want_2`, ... when that name is already taken.
  static std::string fresh(const std::string& want, const std::set<std::string>& taken) {
    if (!taken.count(want)) return want;
    for (int k = 1;; ++k) {
      std::string s = fmt::format("{}_{}", want, k);
      if (!taken.count(s)) return s;
    }
  }

  Call switch_call(Call c, const VariantCtx& ctx) const {
    if (ctx.rows == 0) return c;
    const InCoreFunction& f = g_.functions.at(c.callee);
    std::string name = fmt::format("{}_{}", f.name, ctx.rows);
    auto it = by_name_.find(name);
    if (it == by_name_.end())
      throw UserError(fmt::format(
          "binary_expand: FOR %{} with tile_levels: block {} uses {} rows but function @{} is not defined", ctx.var,
          ctx.block, ctx.rows, name));
    const InCoreFunction& v = g_.functions[it->second];
    if (v.params.size() != f.params.size() || v.scalar_params.size() != f.scalar_params.size())
      throw UserError(fmt::format(
          "binary_expand: FOR %{} with tile_levels: variant @{} takes {} regions and {} scalars, @{} takes {} and {}",
          ctx.var, name, v.params.size(), v.scalar_params.size(), f.name, f.params.size(), f.scalar_params.size()));
    if (c.args.size() != v.params.size())
      throw InternalError(fmt::format("binary_expand: CALL @{} passes {} regions, the function takes {}", f.name,
                                      c.args.size(), f.params.size()));
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (v.params[i].max_extents.size() != c.args[i].extents.size())
        throw UserError(fmt::format("binary_expand: FOR %{} with tile_levels: parameter %{} of variant @{} has rank {}, "
                                    "the call passes rank {}",
                                    ctx.var, v.params[i].name, name, v.params[i].max_extents.size(),
                                    c.args[i].extents.size()));
      c.args[i].extents = v.params[i].max_extents;
    }
    c.callee = it->second;
    return c;
  }

  /// `body` with `var` := `value`: its expressions (substitute), and the views its calls pass whose
  /// offsets or shape (or those of the views they are built on) mention `var`, which are copied with
  /// the substitution (a view is materialized at each call, so the copy sees the block's variable).
  /// A copy is named `<view>_<block>` (`block`: the block's loop variable), made unique.
  void substitute_var(std::vector<Stmt>& body, const std::string& var, const Expr& value, const std::string& block) {
    substitute(body, {{var, value}});
    const std::map<std::string, Expr> env{{var, value}};
    std::map<int, int> rebound;
    std::function<int(int)> rebind = [&](int id) -> int {
      if (auto it = rebound.find(id); it != rebound.end()) return it->second;
      if (!memrefs_[id].view) return rebound[id] = id;
      const int base = rebind(memrefs_[id].view->base);
      bool mentions = base != memrefs_[id].view->base;
      for (const Expr& e : memrefs_[id].shape) mentions = mentions || vars_of(e).count(var) > 0;
      for (const Expr& e : memrefs_[id].view->offsets) mentions = mentions || vars_of(e).count(var) > 0;
      if (!mentions) return rebound[id] = id;
      MemRef copy = memrefs_[id];
      std::set<std::string> names;
      for (const MemRef& m : memrefs_) names.insert(m.name);
      copy.name = fresh(copy.name + "_" + block, names);
      copy.id = static_cast<int>(memrefs_.size());
      copy.view->base = base;
      for (Expr& e : copy.shape) e = e.substitute(env);
      for (Expr& e : copy.view->offsets) e = e.substitute(env);
      memrefs_.push_back(std::move(copy));
      return rebound[id] = memrefs_.back().id;
    };
    for_each_call(body, [&](Call& c) {
      for (CallArg& a : c.args) a.memref = rebind(a.memref);
    });
  }

  /// Checks a ranged loop; returns the scale (rows(b) / rows(0)) of each block size b.
  static std::map<int64_t, int64_t> validate(const Loop& l) {
    const LoopRange& R = *l.range;
    const std::string& v = l.var;
    auto step = l.step.as_const();
    if (!step || *step != 1)
      throw UserError(fmt::format("binary_expand: FOR %{} with max_range needs step 1, found {}", v, l.step.str()));
    if (!is_pow2(R.max_range))
      throw UserError(fmt::format("binary_expand: FOR %{}: max_range {} is not a power of two", v, R.max_range));
    if (!is_pow2(R.min_range))
      throw UserError(fmt::format("binary_expand: FOR %{}: min_range {} is not a power of two", v, R.min_range));
    if (R.min_range > R.max_range)
      throw UserError(fmt::format("binary_expand: FOR %{}: min_range {} is larger than max_range {}", v, R.min_range,
                                  R.max_range));
    std::map<int64_t, int64_t> scale;
    for (int64_t b = R.max_range; b >= R.min_range; b /= 2) scale[b] = 1;
    const auto& L = R.tile_levels;
    if (L.empty()) return scale;
    auto base = L.find(0);
    if (base == L.end())
      throw UserError(fmt::format("binary_expand: FOR %{}: tile_levels has no key 0 (the residual's tile rows)", v));
    for (const auto& [key, rows] : L) {
      if (rows <= 0)
        throw UserError(fmt::format("binary_expand: FOR %{}: tile_levels {}:{} has non-positive rows {}", v, key, rows, rows));
      if (key != 0 && (!is_pow2(key) || key < R.min_range || key > R.max_range))
        throw UserError(fmt::format("binary_expand: FOR %{}: tile_levels key {} is not a power of two in [{}, {}]", v,
                                    key, R.min_range, R.max_range));
    }
    for (auto& [b, s] : scale) {
      auto it = L.find(b);
      if (it == L.end()) continue;  // a block without an entry uses the base rows
      if (it->second % base->second != 0)
        throw UserError(fmt::format(
            "binary_expand: FOR %{}: tile_levels block {} uses {} rows, not a multiple of the base {} rows", v, b,
            it->second, base->second));
      s = it->second / base->second;
      if (b % s != 0)
        throw UserError(fmt::format("binary_expand: FOR %{}: tile_levels block {} uses {} rows, scale {} does not divide {}",
                                    v, b, it->second, s, b));
    }
    return scale;
  }

  /// `FOR name in [0, b / scale)` over a copy of `l`'s body with
  /// l.var := origin + name * scale, itself expanded.
  Loop block(const Loop& l, int64_t b, int64_t scale, const std::string& name, const Expr& origin,
             const VariantCtx& ctx) {
    Loop out;
    out.var = name;
    out.start = Expr(0);
    out.stop = Expr(b / scale);
    out.step = Expr(1);
    out.parallel = l.parallel;
    out.dim = l.dim;
    out.tile = l.tile * scale;
    std::vector<Stmt> body = l.body;
    substitute_var(body, l.var, origin + Expr::var(name) * Expr(scale), name);
    VariantCtx inner = ctx;
    if (scale != 1) {
      int64_t rows = l.range->tile_levels.at(b);
      if (ctx.rows != 0 && ctx.rows != rows)
        throw UserError(fmt::format(
            "binary_expand: FOR %{} with tile_levels: block {} uses {} rows inside block {} of FOR %{}, which uses {} "
            "rows; nested tile_levels must agree",
            l.var, b, rows, ctx.block, ctx.var, ctx.rows));
      inner = VariantCtx{rows, l.var, b};
    }
    scope_.insert(name);
    out.body = stmts(body, inner);
    scope_.erase(name);
    return out;
  }

  /// Appends the statements that replace `body` under `cond` (folded when constant).
  static void guarded(const Expr& cond, std::vector<Stmt> body, std::vector<Stmt>& out) {
    if (auto c = cond.as_const()) {
      if (*c) out.insert(out.end(), body.begin(), body.end());
      return;
    }
    out.push_back(Stmt{IfThen{cond, std::move(body), {}}});
  }

  void expand(const Loop& l, const VariantCtx& ctx, std::vector<Stmt>& out) {
    std::map<int64_t, int64_t> scale = validate(l);
    const int64_t M = l.range->max_range, m = l.range->min_range;
    std::set<std::string> taken = scope_;
    collect_names(l.body, taken);
    taken.insert(l.var);
    auto name = [&](const std::string& suffix) {
      std::string s = fresh(fmt::format("{}_{}", l.var, suffix), taken);
      taken.insert(s);
      return s;
    };

    Expr n = max(l.stop - l.start, Expr(0));
    Expr r = mod(n, Expr(m));
    Expr q = n - r;

    // Blocks of M, as many as q holds.
    Expr trips = floordiv(q, Expr(M));
    std::string blk = name("blk");
    std::string vM = name(std::to_string(M));
    if (auto t = trips.as_const(); !t || *t > 0) {
      Loop outer;
      outer.var = blk;
      outer.start = Expr(0);
      outer.stop = trips;
      outer.step = Expr(1);
      scope_.insert(blk);
      outer.body = {Stmt{block(l, M, scale.at(M), vM, l.start + Expr::var(blk) * Expr(M), ctx)}};
      scope_.erase(blk);
      out.push_back(Stmt{std::move(outer)});
    }
    // One block per remaining bit of q, largest first.
    for (int64_t b = M / 2; b >= m; b /= 2) {
      Expr cond = cmp_eq(mod(floordiv(q, Expr(b)), Expr(2)), Expr(1));
      std::string vb = name(std::to_string(b));
      if (auto c = cond.as_const(); c && !*c) continue;
      Expr origin = l.start + floordiv(q, Expr(2 * b)) * Expr(2 * b);
      guarded(cond, {Stmt{block(l, b, scale.at(b), vb, origin, ctx)}}, out);
    }
    // Residual iterations (fewer than m) at the base rows.
    Expr has_rest = cmp_lt(Expr(0), r);
    std::string vr = name("r");
    if (auto c = has_rest.as_const(); c && !*c) return;
    Loop rest;
    rest.var = vr;
    rest.start = Expr(0);
    rest.stop = r;
    rest.step = Expr(1);
    rest.parallel = l.parallel;
    rest.dim = l.dim;
    rest.tile = l.tile;
    std::vector<Stmt> body = l.body;
    substitute_var(body, l.var, l.start + q + Expr::var(vr), vr);
    scope_.insert(vr);
    rest.body = stmts(body, ctx);
    scope_.erase(vr);
    guarded(has_rest, {Stmt{std::move(rest)}}, out);
  }
};

}  // namespace

ExecutionGraph BinaryExpand(const ExecutionGraph& g, const PassOptions&) {
  ExecutionGraph out = g;
  Expander ex(g, out.memrefs);
  out.orchestration = ex.stmts(g.orchestration, VariantCtx{});
  return out;
}

}  // namespace pypto
