#include "ir/bounds.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <utility>

#include "ir/errors.h"

namespace pypto {

namespace {

/// Inclusive bounds of an integer expression.
struct Interval {
  Expr lo, hi;
};
using Env = std::map<std::string, Interval>;

bool is_point(const Interval& i) { return i.lo.equals(i.hi); }

/// The binary expression `kind` of a and b, simplified as the operators simplify.
Expr apply(Expr::Kind kind, const Expr& a, const Expr& b) {
  using K = Expr::Kind;
  switch (kind) {
    case K::Add: return a + b;
    case K::Sub: return a - b;
    case K::Mul: return a * b;
    case K::FloorDiv: return floordiv(a, b);
    case K::Mod: return mod(a, b);
    case K::Min: return min(a, b);
    case K::Max: return max(a, b);
    case K::Lt: return cmp_lt(a, b);
    case K::Le: return cmp_le(a, b);
    case K::Eq: return cmp_eq(a, b);
    case K::Ne: return cmp_ne(a, b);
    case K::And: return logical_and(a, b);
    case K::Or: return logical_or(a, b);
    default: throw InternalError("bounds: not a binary expression");
  }
}

std::optional<Interval> bound(const Expr& e, const Env& env);

/// a + min(b, c) = min(a + b, a + c) (and likewise max), so that an offset and a tail extent that
/// both depend on a loop variable cancel it (k * 32 + min(32, K - k * 32) = min(k * 32 + 32, K)).
std::optional<Interval> bound_sum(const Expr& a, const Expr& b, bool subtract, const Env& env) {
  for (int side = 0; side < 2; ++side) {
    const Expr& mm = side == 0 ? b : a;
    const Expr& other = side == 0 ? a : b;
    if (mm.kind() != Expr::Kind::Min && mm.kind() != Expr::Kind::Max) continue;
    if (subtract && side == 0) continue;  // a - min(b, c) flips min into max: not worth it here
    auto join = [&](const Expr& x) { return subtract ? x - other : other + x; };
    auto l = bound(join(mm.lhs()), env), r = bound(join(mm.rhs()), env);
    if (!l || !r) return std::nullopt;
    if (mm.kind() == Expr::Kind::Min) return Interval{min(l->lo, r->lo), min(l->hi, r->hi)};
    return Interval{max(l->lo, r->lo), max(l->hi, r->hi)};
  }
  auto l = bound(a, env), r = bound(b, env);
  if (!l || !r) return std::nullopt;
  if (subtract) return Interval{l->lo - r->hi, l->hi - r->lo};
  return Interval{l->lo + r->lo, l->hi + r->hi};
}

/// Sound inclusive bounds of `e` over the loop variables in `env` (other variables are scalars
/// and stand for themselves); nullopt where interval arithmetic cannot bound it.
std::optional<Interval> bound(const Expr& e, const Env& env) {
  using K = Expr::Kind;
  switch (e.kind()) {
    case K::Const: return Interval{e, e};
    case K::Var: {
      auto it = env.find(e.name());
      if (it == env.end()) return Interval{e, e};
      return it->second;
    }
    case K::Add: return bound_sum(e.lhs(), e.rhs(), false, env);
    case K::Sub: return bound_sum(e.lhs(), e.rhs(), true, env);
    default: break;
  }
  auto a = bound(e.lhs(), env), b = bound(e.rhs(), env);
  if (!a || !b) return std::nullopt;
  if (is_point(*a) && is_point(*b)) {
    Expr x = apply(e.kind(), a->lo, b->lo);
    return Interval{x, x};
  }
  switch (e.kind()) {
    case K::Mul: {
      const Interval* v = &*a;
      std::optional<int64_t> c = is_point(*b) ? b->lo.as_const() : std::nullopt;
      if (!c) {
        v = &*b;
        c = is_point(*a) ? a->lo.as_const() : std::nullopt;
      }
      if (!c) return std::nullopt;
      if (*c >= 0) return Interval{v->lo * Expr(*c), v->hi * Expr(*c)};
      return Interval{v->hi * Expr(*c), v->lo * Expr(*c)};
    }
    case K::FloorDiv: {
      auto c = is_point(*b) ? b->lo.as_const() : std::nullopt;
      if (!c || *c == 0) return std::nullopt;
      if (*c > 0) return Interval{floordiv(a->lo, Expr(*c)), floordiv(a->hi, Expr(*c))};
      return Interval{floordiv(a->hi, Expr(*c)), floordiv(a->lo, Expr(*c))};
    }
    case K::Mod: {
      auto c = is_point(*b) ? b->lo.as_const() : std::nullopt;
      if (!c || *c <= 0) return std::nullopt;
      return Interval{Expr(0), Expr(*c - 1)};
    }
    case K::Min: return Interval{min(a->lo, b->lo), min(a->hi, b->hi)};
    case K::Max: return Interval{max(a->lo, b->lo), max(a->hi, b->hi)};
    default: return Interval{Expr(0), Expr(1)};  // comparisons and logic
  }
}

const char* memref_name(int id, const std::vector<MemRef>& memrefs) {
  return id >= 0 && id < static_cast<int>(memrefs.size()) ? memrefs[id].name.c_str() : "?";
}

struct Collector {
  const InCoreFunction& f;
  const std::vector<MemRef>& memrefs;
  FunctionBounds out;
  std::set<std::string> seen;  // memref|dim|lo|hi of the bounds kept

  void access(const Instr& in, const Env& env, bool guarded) {
    const int tile_id = memory_tile(in);
    const TileDecl* t = nullptr;
    for (const TileDecl& d : f.tiles)
      if (d.id == tile_id) t = &d;
    if (!t || t->shape.size() != in.offsets.size()) throw InternalError("bounds: access without a matching tile");
    if (guarded) {
      out.checked_where_run.insert(&in);
      return;
    }
    const bool indexed = in.op == Opcode::TGATHER || in.op == Opcode::TSCATTER;
    std::vector<AccessBound> dims;
    for (size_t d = 0; d < in.offsets.size(); ++d) {
      if (indexed && static_cast<int>(d) == in.axis) continue;  // each index is checked as it is read
      // The extent actually touched: the valid extent clamped to [0, tile] (tile ops clamp it).
      const Expr tile_dim(t->shape[d]);
      Expr extent = d < in.valid.size() ? min(in.valid[d], tile_dim) : tile_dim;
      auto lo = bound(in.offsets[d], env);
      auto hi = bound(in.offsets[d] + extent, env);
      if (!lo || !hi) {
        out.checked_where_run.insert(&in);
        return;
      }
      dims.push_back(AccessBound{in.memref, static_cast<int>(d), lo->lo, hi->hi, access_text(in, f.tiles, memrefs)});
    }
    for (AccessBound& b : dims) {
      std::string key = fmt::format("{}|{}|{}|{}", b.memref, b.dim, b.lo.str(), b.hi.str());
      if (seen.insert(key).second) out.bounds.push_back(std::move(b));
    }
  }

  void walk(const std::vector<Stmt>& body, Env& env, bool guarded) {
    for (const Stmt& s : body) {
      if (auto* in = std::get_if<Instr>(&s.node)) {
        if (reads_memory(in->op) || writes_memory(in->op)) access(*in, env, guarded);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        auto start = bound(l->start, env), stop = bound(l->stop, env);
        Env inner = env;
        bool g = guarded;
        if (start && stop) inner[l->var] = Interval{start->lo, stop->hi - Expr(1)};
        else g = true;  // an unbounded loop variable: its accesses are checked where they run
        walk(l->body, inner, g);
      } else if (auto* f = std::get_if<Fused>(&s.node)) {
        walk(f->body, env, guarded);
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        walk(c->then_body, env, true);
        walk(c->else_body, env, true);
      }
    }
  }
};

}  // namespace

std::string access_text(const Instr& in, const std::vector<TileDecl>& tiles, const std::vector<MemRef>& memrefs) {
  // The tile the instruction moves (a scatter's data tile, not its index tile).
  const int tile_id = in.op == Opcode::TSCATTER ? in.srcs.at(1) : memory_tile(in);
  std::string tile = "?";
  for (const TileDecl& t : tiles)
    if (t.id == tile_id) tile = t.name;
  const bool writes = writes_memory(in.op);
  return fmt::format("{} %{} {} %{}", opcode_name(in.op), tile, writes ? "->" : "<-", memref_name(in.memref, memrefs));
}

FunctionBounds access_bounds(const InCoreFunction& f, const std::vector<MemRef>& memrefs) {
  Collector c{f, memrefs, {}, {}};
  Env env;
  c.walk(f.body, env, false);
  return std::move(c.out);
}

std::vector<CallCheck> call_checks(const Call& c, const InCoreFunction& f, const FunctionBounds& fb,
                                   const std::vector<MemRef>& memrefs) {
  std::map<std::string, Expr> scalars;
  for (size_t i = 0; i < f.scalar_params.size() && i < c.scalars.size(); ++i) scalars[f.scalar_params[i]] = c.scalars[i];
  std::vector<CallCheck> out;
  for (const AccessBound& b : fb.bounds) {
    Expr limit;
    std::string where;
    bool found = false, clipped = false;
    int arg = -1;
    for (size_t i = 0; i < f.params.size() && i < c.args.size(); ++i) {
      if (f.params[i].memref != b.memref) continue;
      limit = c.args[i].extents.at(b.dim);
      arg = static_cast<int>(i);
      clipped = memrefs.at(c.args[i].memref).kind == MemKind::View;
      where = fmt::format("CALL @{} argument %{} -> %{}: {}", f.name, f.params[i].name,
                          memref_name(c.args[i].memref, memrefs), b.what);
      found = true;
      break;
    }
    if (!found) {  // a local buffer of the function
      limit = memrefs.at(b.memref).shape.at(b.dim).substitute(scalars);
      where = fmt::format("CALL @{}: {} (local buffer)", f.name, b.what);
    }
    Expr lo = b.lo.substitute(scalars), hi = b.hi.substitute(scalars);
    auto lo_c = lo.as_const();
    auto over = (hi - limit).as_const();
    if ((lo_c && *lo_c < 0) || (over && *over > 0)) {
      auto hi_c = hi.as_const(), limit_c = limit.as_const();
      throw UserError(fmt::format(
          "{}: dim {} of the access is [{}, {}), outside the region's extent {}", where, b.dim, lo.str(),
          hi_c ? std::to_string(*hi_c) : hi.str(), limit_c ? std::to_string(*limit_c) : limit.str()));
    }
    if (clipped && over && *over <= 0) over = std::nullopt;  // the run-time extent may be smaller
    if (lo_c && over) continue;  // holds for every value
    out.push_back(CallCheck{lo_c ? std::nullopt : std::optional<Expr>(lo), over ? std::nullopt : std::optional<Expr>(hi),
                            limit, arg, b.dim, where});
  }
  return out;
}

}  // namespace pypto
