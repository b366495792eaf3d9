// link_module: a tile-level API module (ir/pto_module.h) as an ExecutionGraph.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "ir/errors.h"
#include "ir/pto_module.h"

namespace pypto {

namespace {

bool is_param(const MemRef& m) { return m.kind == MemKind::Input || m.kind == MemKind::Output; }

/// a + b, folding zeros and constants (offsets of an inlined call).
Expr add_offset(const Expr& a, const Expr& b) {
  if (b.is_const() && b.value() == 0) return a;
  if (a.is_const() && a.value() == 0) return b;
  if (a.is_const() && b.is_const()) return Expr(a.value() + b.value());
  return Expr::node(Expr::Kind::Add, a, b);
}

/// Offsets counted in blocks of a parameter, in elements.
std::vector<Expr> scale_by_block(const std::vector<Expr>& offs, const std::vector<Expr>& block) {
  std::vector<Expr> out;
  for (size_t d = 0; d < std::min(offs.size(), block.size()); ++d) {
    const Expr& o = offs[d];
    const Expr& b = block[d];
    if (!b.is_const()) out.push_back(Expr::node(Expr::Kind::Mul, o, b));
    else if (b.value() == 1) out.push_back(o);
    else if (o.is_const()) out.push_back(Expr(o.value() * b.value()));
    else out.push_back(Expr::node(Expr::Kind::Mul, o, b));
  }
  return out;
}

std::vector<Expr> subst(const std::vector<Expr>& v, const std::map<std::string, Expr>& env) {
  std::vector<Expr> out;
  for (const Expr& e : v) out.push_back(e.substitute_exact(env));
  return out;
}

const NamedArg* find_arg(const NamedCall& c, const std::string& param) {
  for (const NamedArg& a : c.args)
    if (a.param == param) return &a;
  return nullptr;
}

const Expr* find_scalar(const NamedCall& c, const std::string& name) {
  for (const auto& [n, e] : c.scalars)
    if (n == name) return &e;
  return nullptr;
}

/// An unbound name while bounding a parameter's block.
struct Unbound {
  std::string name;
};

int64_t eval_const(const Expr& e, const std::map<std::string, int64_t>& env) {
  return e.eval([&](const std::string& n) -> int64_t {
    auto it = env.find(n);
    if (it == env.end()) throw Unbound{n};
    return it->second;
  });
}

/// An InCore function with the InCore calls in its body inlined and the block of each parameter.
struct LinkedInCore {
  const ModuleFunction* fn = nullptr;
  std::vector<MemRef> memrefs;  ///< the function's, then the locals of inlined callees
  std::vector<TileDecl> tiles;  ///< likewise
  std::vector<Stmt> body;
  std::vector<int> params;      ///< memref ids of the parameters, in order
  std::vector<std::vector<Expr>> blocks;  ///< per parameter
  std::vector<bool> outs;       ///< per parameter: stored to
  int inlined = 0;              ///< calls inlined so far (names their copies)
};

class Linker {
 public:
  explicit Linker(const PtoModule& m) : m_(m) {}

  ExecutionGraph run(const std::string& entry) {
    const ModuleFunction* fn = find(entry);
    if (!fn) {
      std::string names;
      for (const ModuleFunction& f : m_.functions) names += (names.empty() ? "" : ", ") + f.name;
      throw UserError(fmt::format("PTOModule '{}': entry @{} is not a function of the module (functions: {})", m_.name,
                                  entry, names.empty() ? "none" : names));
    }
    ModuleFunction wrapper;
    if (fn->in_core) {
      wrapper = wrap(*fn);
      fn = &wrapper;
    }
    return orchestration(*fn);
  }

 private:
  const ModuleFunction* find(const std::string& name) const {
    for (const ModuleFunction& f : m_.functions)
      if (f.name == name) return &f;
    return nullptr;
  }

  // ---- InCore functions ------------------------------------------------------

  LinkedInCore link_incore(const ModuleFunction& fn, std::vector<std::string> stack) {
    LinkedInCore L;
    L.fn = &fn;
    L.memrefs = fn.memrefs;
    L.tiles = fn.tiles;
    stack.push_back(fn.name);
    L.body = inline_body(fn.body, L, stack);
    for (const MemRef& m : fn.memrefs) {
      if (!is_param(m)) continue;
      L.params.push_back(m.id);
      L.blocks.push_back(block(L, m.id));
      L.outs.push_back(stores(L.body, m.id));
    }
    return L;
  }

  std::vector<Stmt> inline_body(const std::vector<Stmt>& body, LinkedInCore& L, const std::vector<std::string>& stack) {
    std::vector<Stmt> out;
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        Loop n = *l;
        n.body = inline_body(l->body, L, stack);
        out.push_back(Stmt{std::move(n)});
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        IfThen n = *c;
        n.then_body = inline_body(c->then_body, L, stack);
        n.else_body = inline_body(c->else_body, L, stack);
        out.push_back(Stmt{std::move(n)});
      } else if (auto* call = std::get_if<Call>(&s.node)) {
        if (!call->named) throw InternalError("link_module: a call without a callee name");
        for (Stmt& st : inline_call(*call->named, L, stack)) out.push_back(std::move(st));
      } else {
        out.push_back(s);
      }
    }
    return out;
  }

  std::vector<Stmt> inline_call(const NamedCall& c, LinkedInCore& L, const std::vector<std::string>& stack) {
    const std::string& me = L.fn->name;
    const ModuleFunction* callee = find(c.callee);
    if (!callee)
      throw UserError(fmt::format("@{}: CALL @{} names no function of module '{}' ({})", me, c.callee, m_.name, c.where));
    if (!callee->in_core)
      throw UserError(
          fmt::format("@{}: an InCore function cannot call orchestration function @{} ({})", me, c.callee, c.where));
    if (std::find(stack.begin(), stack.end(), callee->name) != stack.end())
      throw UserError(fmt::format("@{}: recursive CALL @{} ({})", me, c.callee, c.where));
    LinkedInCore inner = link_incore(*callee, stack);
    const std::string prefix = fmt::format("{}{}_", callee->name, ++L.inlined);
    std::map<std::string, Expr> env;
    for (const auto& [name, dt] : callee->scalars) {
      const Expr* v = find_scalar(c, name);
      if (!v) throw UserError(fmt::format("@{}: CALL @{} misses scalar '{}' ({})", me, c.callee, name, c.where));
      env[name] = *v;
    }
    // Inner memref id -> the caller's memref and the origin of the region, if any.
    std::map<int, std::pair<int, std::optional<std::vector<Expr>>>> mem_map;
    std::set<std::string> params;
    for (size_t i = 0; i < inner.params.size(); ++i) {
      const std::string& pname = inner.memrefs[inner.params[i]].name;
      params.insert(pname);
      const NamedArg* a = find_arg(c, pname);
      if (!a) throw UserError(fmt::format("@{}: CALL @{} misses parameter '{}' ({})", me, c.callee, pname, c.where));
      const std::vector<Expr>& block = inner.blocks[i];
      std::vector<Expr> offs = a->offsets ? *a->offsets : std::vector<Expr>(block.size(), Expr(0));
      if (a->offsets && a->block_units) offs = scale_by_block(offs, block);
      mem_map[inner.params[i]] = {a->memref, std::move(offs)};
    }
    for (const NamedArg& a : c.args)
      if (!params.count(a.param))
        throw UserError(fmt::format("@{}: CALL @{} has no parameter '{}' ({})", me, c.callee, a.param, c.where));
    for (const MemRef& m : inner.memrefs) {
      if (m.kind != MemKind::Local) continue;
      MemRef copy = m;
      copy.id = static_cast<int>(L.memrefs.size());
      copy.name = prefix + m.name;
      L.memrefs.push_back(copy);
      mem_map[m.id] = {copy.id, std::nullopt};
    }
    std::map<int, int> tile_map;
    for (const TileDecl& t : inner.tiles) {
      TileDecl copy = t;
      copy.id = static_cast<int>(L.tiles.size());
      copy.name = prefix + t.name;
      L.tiles.push_back(copy);
      tile_map[t.id] = copy.id;
    }
    return rename(inner.body, env, tile_map, mem_map, prefix);
  }

  /// A copy of an inlined body: scalars substituted, tiles and loop variables
  /// renamed, memory accesses moved to the caller's memrefs.
  static std::vector<Stmt> rename(const std::vector<Stmt>& body, const std::map<std::string, Expr>& env,
                                  const std::map<int, int>& tile_map,
                                  const std::map<int, std::pair<int, std::optional<std::vector<Expr>>>>& mem_map,
                                  const std::string& prefix) {
    std::vector<Stmt> out;
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        Loop n = *l;
        n.var = prefix + l->var;
        n.start = l->start.substitute_exact(env);
        n.stop = l->stop.substitute_exact(env);
        n.step = l->step.substitute_exact(env);
        std::map<std::string, Expr> inner = env;
        inner[l->var] = Expr::var(n.var);
        n.body = rename(l->body, inner, tile_map, mem_map, prefix);
        out.push_back(Stmt{std::move(n)});
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        IfThen n;
        n.cond = c->cond.substitute_exact(env);
        n.then_body = rename(c->then_body, env, tile_map, mem_map, prefix);
        n.else_body = rename(c->else_body, env, tile_map, mem_map, prefix);
        out.push_back(Stmt{std::move(n)});
      } else {
        Instr n = std::get<Instr>(s.node);
        if (n.dst >= 0) n.dst = tile_map.at(n.dst);
        for (int& t : n.srcs) t = tile_map.at(t);
        n.offsets = subst(n.offsets, env);
        n.valid = subst(n.valid, env);
        n.window = subst(n.window, env);
        if (n.scalar_expr) n.scalar_expr = n.scalar_expr->substitute_exact(env);
        if (n.memref >= 0) {
          const auto& [m, origin] = mem_map.at(n.memref);
          n.memref = m;
          if (origin)
            for (size_t d = 0; d < std::min(n.offsets.size(), origin->size()); ++d)
              n.offsets[d] = add_offset(n.offsets[d], (*origin)[d]);
        }
        out.push_back(Stmt{std::move(n)});
      }
    }
    return out;
  }

  /// The block of parameter `id`: its shape, or the bounding box of the tiles moved through it.
  std::vector<Expr> block(const LinkedInCore& L, int id) {
    const ModuleFunction& fn = *L.fn;
    if (fn.sized.at(id)) return L.memrefs[id].shape;
    const std::string& name = L.memrefs[id].name;
    std::optional<std::vector<int64_t>> hi;
    accesses(L, L.body, id, {}, hi);
    if (!hi)
      throw UserError(fmt::format("@{}: parameter '{}' is never loaded or stored; give memref(..., shape=...)", fn.name,
                                  name));
    return std::vector<Expr>(hi->begin(), hi->end());
  }

  using Ranges = std::map<std::string, std::pair<int64_t, int64_t>>;

  void accesses(const LinkedInCore& L, const std::vector<Stmt>& body, int id, const Ranges& ranges,
                std::optional<std::vector<int64_t>>& hi) {
    const std::string& fname = L.fn->name;
    const std::string& name = L.memrefs[id].name;
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        int64_t lo = 0, stop = 0, step = 0;
        try {
          lo = eval_const(l->start, {});
          stop = eval_const(l->stop, {});
          step = eval_const(l->step, {});
        } catch (const Unbound&) {
          throw UserError(fmt::format("@{}: the block of parameter '{}' cannot be bounded: loop '{}' has a bound that "
                                      "is not a constant; give memref(..., shape=...)",
                                      fname, name, l->var));
        }
        if (stop <= lo) continue;
        if (step <= 0)
          throw UserError(fmt::format("@{}: loop '{}' has step {}; a FOR steps by a positive amount", fname, l->var,
                                      step));
        Ranges r = ranges;
        r[l->var] = {lo, lo + (stop - 1 - lo) / step * step};
        accesses(L, l->body, id, r, hi);
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        accesses(L, c->then_body, id, ranges, hi);
        accesses(L, c->else_body, id, ranges, hi);
      } else if (auto* in = std::get_if<Instr>(&s.node); in && in->memref == id) {
        const TileDecl& tile = L.tiles.at(reads_memory(in->op) ? in->dst : in->srcs.back());  // tscatter: the data
        std::map<std::string, int64_t> env_lo, env_hi;
        for (const auto& [v, range] : ranges) {
          env_lo[v] = range.first;
          env_hi[v] = range.second;
        }
        std::vector<int64_t> his, los;
        try {
          for (const Expr& o : in->offsets) {
            his.push_back(eval_const(o, env_hi));
            los.push_back(eval_const(o, env_lo));
          }
        } catch (const Unbound& u) {
          throw UserError(fmt::format("@{}: the block of parameter '{}' cannot be bounded: an offset uses '{}'; give "
                                      "memref(..., shape=...)",
                                      fname, name, u.name));
        }
        for (int64_t v : los)
          if (v < 0) throw UserError(fmt::format("@{}: a negative offset into parameter '{}'", fname, name));
        if (!hi) hi = std::vector<int64_t>(tile.shape.size(), 0);
        if (hi->size() != tile.shape.size())
          throw UserError(fmt::format("@{}: parameter '{}' is moved with tiles of different ranks", fname, name));
        for (size_t d = 0; d < std::min(his.size(), tile.shape.size()); ++d)
          (*hi)[d] = std::max((*hi)[d], his[d] + tile.shape[d]);
      }
    }
  }

  static bool stores(const std::vector<Stmt>& body, int id) {
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        if (stores(l->body, id)) return true;
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        if (stores(c->then_body, id) || stores(c->else_body, id)) return true;
      } else if (auto* in = std::get_if<Instr>(&s.node)) {
        if (in->memref == id && writes_memory(in->op)) return true;
      }
    }
    return false;
  }

  /// An orchestration that calls InCore function `fn` once on whole tensors.
  ModuleFunction wrap(const ModuleFunction& fn) {
    LinkedInCore inner = link_incore(fn, {});
    FunctionBuilder b(fn.name + "_entry", fn.where);
    b.set_in_core(false);
    NamedCall c;
    c.callee = fn.name;
    c.where = fn.where;
    for (size_t i = 0; i < inner.params.size(); ++i) {
      const MemRef& m = inner.memrefs[inner.params[i]];
      NamedArg a;
      a.param = m.name;
      a.memref = b.memref(m.name, MemKind::Input, m.dtype, inner.blocks[i]);
      c.args.push_back(std::move(a));
    }
    for (const auto& [s, dt] : fn.scalars) {
      b.scalar(s, dt);
      c.scalars.emplace_back(s, Expr::var(s));
    }
    b.call(std::move(c));
    return b.build();
  }

  // ---- the orchestration -----------------------------------------------------

  /// `body` of orchestration function `cur` with calls of orchestration functions inlined;
  /// `mem_env` maps `cur`'s memref ids to the entry's.
  std::vector<Stmt> inline_orchestration(const std::vector<Stmt>& body, const std::vector<int>& mem_env,
                                         const std::map<std::string, Expr>& scalar_env,
                                         const std::vector<std::string>& stack) {
    std::vector<Stmt> out;
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        Loop n = *l;
        n.start = l->start.substitute_exact(scalar_env);
        n.stop = l->stop.substitute_exact(scalar_env);
        n.step = l->step.substitute_exact(scalar_env);
        n.body = inline_orchestration(l->body, mem_env, scalar_env, stack);
        out.push_back(Stmt{std::move(n)});
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        IfThen n;
        n.cond = c->cond.substitute_exact(scalar_env);
        n.then_body = inline_orchestration(c->then_body, mem_env, scalar_env, stack);
        n.else_body = inline_orchestration(c->else_body, mem_env, scalar_env, stack);
        out.push_back(Stmt{std::move(n)});
      } else if (auto* call = std::get_if<Call>(&s.node)) {
        if (!call->named) throw InternalError("link_module: a call without a callee name");
        NamedCall c2 = *call->named;
        for (NamedArg& a : c2.args) {
          a.memref = mem_env.at(a.memref);
          if (a.offsets) a.offsets = subst(*a.offsets, scalar_env);
          if (a.extents) a.extents = subst(*a.extents, scalar_env);
        }
        for (auto& [n, e] : c2.scalars) e = e.substitute_exact(scalar_env);
        const ModuleFunction* callee = find(c2.callee);
        if (callee && !callee->in_core) {
          for (Stmt& st : inline_orchestration_call(c2, *callee, stack)) out.push_back(std::move(st));
        } else {
          Call k;
          k.named = std::make_shared<const NamedCall>(std::move(c2));
          out.push_back(Stmt{std::move(k)});
        }
      } else {
        throw UserError("tile instruction in an orchestration function");
      }
    }
    return out;
  }

  std::vector<Stmt> inline_orchestration_call(const NamedCall& c, const ModuleFunction& callee,
                                              std::vector<std::string> stack) {
    if (std::find(stack.begin(), stack.end(), callee.name) != stack.end())
      throw UserError(fmt::format("recursive CALL @{} ({})", c.callee, c.where));
    std::vector<int> menv(callee.memrefs.size(), -1);
    for (const MemRef& p : callee.memrefs) {
      const NamedArg* a = find_arg(c, p.name);
      if (!a) throw UserError(fmt::format("CALL @{} misses memref '{}' ({})", c.callee, p.name, c.where));
      if (a->offsets)
        throw UserError(fmt::format("CALL @{}: orchestration functions take whole tensors; '{}' has offsets ({})",
                                    c.callee, p.name, c.where));
      menv[p.id] = a->memref;
    }
    std::map<std::string, Expr> senv;
    for (const auto& [name, dt] : callee.scalars) {
      const Expr* v = find_scalar(c, name);
      if (!v) throw UserError(fmt::format("CALL @{} misses scalar '{}' ({})", c.callee, name, c.where));
      senv[name] = *v;
    }
    stack.push_back(callee.name);
    return inline_orchestration(callee.body, menv, senv, stack);
  }

  ExecutionGraph orchestration(const ModuleFunction& fn) {
    g_ = ExecutionGraph{};
    g_.name = fn.name;
    g_.module = m_.name;
    orch_ = &fn;
    // The entry's memrefs keep their ids.
    std::vector<std::string> shape_scalars;
    for (size_t i = 0; i < fn.memrefs.size(); ++i) {
      MemRef m = fn.memrefs[i];
      if (!fn.sized[i]) {
        m.shape.clear();
        for (int d = 0; d < 2; ++d) {
          shape_scalars.push_back(fmt::format("{}_d{}", m.name, d));
          m.shape.push_back(Expr::var(shape_scalars.back()));
        }
      }
      if (m.kind == MemKind::Input) g_.params.push_back(m.id);
      if (m.kind == MemKind::Output) g_.outputs.push_back(m.id);
      g_.memrefs.push_back(std::move(m));
    }
    for (const auto& [s, dt] : fn.scalars) {
      g_.dyn_dims.push_back(s);
      if (dt != DataType::INT64) g_.scalar_dtypes[s] = dt;
    }
    for (const std::string& s : shape_scalars) g_.dyn_dims.push_back(s);
    std::vector<int> identity(fn.memrefs.size());
    for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int>(i);
    g_.orchestration = resolve_calls(inline_orchestration(fn.body, identity, {}, {fn.name}));
    // Variants <f>_<rows> of called functions, which tile_levels may pick.
    std::vector<std::string> called;
    for (const InCoreFunction& f : g_.functions) called.push_back(f.name);
    for (const std::string& name : called) {
      for (const ModuleFunction& other : m_.functions) {
        if (!other.in_core || other.name.size() <= name.size() + 1 || other.name.compare(0, name.size() + 1, name + "_"))
          continue;
        const std::string suffix = other.name.substr(name.size() + 1);
        if (std::all_of(suffix.begin(), suffix.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
          incore_index(other.name, "tile_levels");
      }
    }
    return std::move(g_);
  }

  std::vector<Stmt> resolve_calls(std::vector<Stmt> body) {
    for (Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        l->body = resolve_calls(std::move(l->body));
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        c->then_body = resolve_calls(std::move(c->then_body));
        c->else_body = resolve_calls(std::move(c->else_body));
      } else if (auto* call = std::get_if<Call>(&s.node)) {
        s.node = resolve(*call->named);
      }
    }
    return body;
  }

  /// A named call of the orchestration as a Call of the graph.
  Call resolve(const NamedCall& c) {
    const std::string& me = orch_->name;
    const int idx = incore_index(c.callee, c.where);
    const InCoreFunction& f = g_.functions[idx];
    const std::vector<std::vector<Expr>>& blocks = blocks_[idx];
    Call out;
    out.callee = idx;
    std::set<std::string> params;
    for (size_t i = 0; i < f.params.size(); ++i) {
      const std::string& pname = f.params[i].name;
      params.insert(pname);
      const NamedArg* a = find_arg(c, pname);
      if (!a) throw UserError(fmt::format("@{}: CALL @{} misses parameter '{}' ({})", me, c.callee, pname, c.where));
      const std::vector<Expr>& block = blocks[i];
      CallArg arg;
      arg.memref = a->memref;
      if (!a->offsets) {
        arg.offsets.assign(block.size(), Expr(0));
      } else if (a->block_units) {
        if (a->offsets->size() != block.size())
          throw UserError(fmt::format("@{}: CALL @{}: parameter '{}' is {}-D; (tensor, row, col) offsets need 2-D", me,
                                      c.callee, pname, block.size()));
        arg.offsets = scale_by_block(*a->offsets, block);
      } else {
        arg.offsets = *a->offsets;
      }
      arg.extents = a->extents ? *a->extents : block;
      out.args.push_back(std::move(arg));
    }
    std::vector<std::string> extra;
    for (const NamedArg& a : c.args)
      if (!params.count(a.param)) extra.push_back(a.param);
    std::sort(extra.begin(), extra.end());
    if (!extra.empty())
      throw UserError(fmt::format("@{}: CALL @{} has no parameter '{}' ({})", me, c.callee, extra[0], c.where));
    for (const std::string& s : f.scalar_params) {
      const Expr* v = find_scalar(c, s);
      if (!v) throw UserError(fmt::format("@{}: CALL @{} misses scalar '{}' ({})", me, c.callee, s, c.where));
      out.scalars.push_back(*v);
    }
    return out;
  }

  /// The index in the graph of InCore function `name`, linked on first use.
  int incore_index(const std::string& name, const std::string& where) {
    for (size_t i = 0; i < g_.functions.size(); ++i)
      if (g_.functions[i].name == name) return static_cast<int>(i);
    const ModuleFunction* fn = find(name);
    if (!fn || !fn->in_core)
      throw UserError(
          fmt::format("@{}: CALL @{} names no function of module '{}' ({})", orch_->name, name, m_.name, where));
    LinkedInCore L = link_incore(*fn, {});
    // The function's memrefs join the graph's: parameters with their blocks as shapes.
    std::vector<int> ids(L.memrefs.size());
    for (const MemRef& m : L.memrefs) {
      MemRef copy = m;
      copy.id = static_cast<int>(g_.memrefs.size());
      copy.view.reset();
      ids[m.id] = copy.id;
      g_.memrefs.push_back(std::move(copy));
    }
    InCoreFunction f;
    f.name = fn->name;
    for (size_t i = 0; i < L.params.size(); ++i) {
      MemRef& m = g_.memrefs[ids[L.params[i]]];
      m.shape = L.blocks[i];
      m.kind = L.outs[i] ? MemKind::Output : MemKind::Input;
      RegionParam p;
      p.name = m.name;
      p.memref = m.id;
      p.dtype = m.dtype;
      p.max_extents = L.blocks[i];
      p.is_output = L.outs[i];
      f.params.push_back(std::move(p));
    }
    for (const auto& [s, dt] : fn->scalars) f.scalar_params.push_back(s);
    for (const MemRef& m : L.memrefs)
      if (m.kind == MemKind::Local) f.locals.push_back(ids[m.id]);
    f.tiles = L.tiles;
    f.body = remap(std::move(L.body), ids);
    for (RegionParam& p : f.params) p.accumulate = p.is_output && accumulates_only(f.body, p.memref);
    f.fused_ops = fn->fused_ops;
    g_.functions.push_back(std::move(f));
    blocks_.push_back(std::move(L.blocks));
    return static_cast<int>(g_.functions.size()) - 1;
  }

  static std::vector<Stmt> remap(std::vector<Stmt> body, const std::vector<int>& ids) {
    for (Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        l->body = remap(std::move(l->body), ids);
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        c->then_body = remap(std::move(c->then_body), ids);
        c->else_body = remap(std::move(c->else_body), ids);
      } else if (auto* in = std::get_if<Instr>(&s.node); in && in->memref >= 0) {
        in->memref = ids.at(in->memref);
      }
    }
    return body;
  }

  const PtoModule& m_;
  ExecutionGraph g_;
  const ModuleFunction* orch_ = nullptr;
  std::vector<std::vector<std::vector<Expr>>> blocks_;  ///< per graph function: its parameters' blocks
};

}  // namespace

ExecutionGraph link_module(const PtoModule& module, const std::string& entry) { return Linker(module).run(entry); }

}  // namespace pypto
