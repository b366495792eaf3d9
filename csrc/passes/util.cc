#include "passes/util.h"

#include <fmt/format.h>

#include "ir/errors.h"

namespace pypto {

namespace {
/// Calls `fn` on every statement of kind Node in `body`, inside loops and conditions.
template <typename Node, typename Body, typename Fn>
void nodes_in(Body& body, const Fn& fn) {
  for (auto& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      nodes_in<Node>(l->body, fn);
    } else if (auto* c = std::get_if<IfThen>(&s.node)) {
      nodes_in<Node>(c->then_body, fn);
      nodes_in<Node>(c->else_body, fn);
    } else if (auto* n = std::get_if<Node>(&s.node)) {
      fn(*n);
    }
  }
}
}  // namespace

void for_each_call(std::vector<Stmt>& body, const std::function<void(Call&)>& fn) { nodes_in<Call>(body, fn); }
void for_each_call(const std::vector<Stmt>& body, const std::function<void(const Call&)>& fn) { nodes_in<Call>(body, fn); }
void for_each_fused(std::vector<Stmt>& body, const std::function<void(Fused&)>& fn) { nodes_in<Fused>(body, fn); }

std::set<std::string> free_vars(const std::vector<Stmt>& body) {
  std::set<std::string> used, bound;
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& b) {
    auto add = [&](const Expr& e) {
      for (const auto& v : vars_of(e)) used.insert(v);
    };
    for (const Stmt& s : b) {
      if (auto* in = std::get_if<Instr>(&s.node)) {
        for (const Expr& e : in->offsets) add(e);
        for (const Expr& e : in->valid) add(e);
        for (const Expr& e : in->window) add(e);
        if (in->scalar_expr) add(*in->scalar_expr);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        add(l->start);
        add(l->stop);
        add(l->step);
        bound.insert(l->var);
        walk(l->body);
      } else if (auto* f = std::get_if<Fused>(&s.node)) {
        walk(f->body);
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        add(i->cond);
        walk(i->then_body);
        walk(i->else_body);
      } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
        for (const Expr& e : r->index) add(e);
        bound.insert(r->var);
      } else {
        const Call& c = std::get<Call>(s.node);
        for (const CallArg& a : c.args) {
          for (const Expr& e : a.offsets) add(e);
          for (const Expr& e : a.extents) add(e);
        }
        for (const Expr& e : c.scalars) add(e);
      }
    }
  };
  walk(body);
  std::set<std::string> out;
  for (const auto& v : used)
    if (!bound.count(v)) out.insert(v);
  return out;
}

void substitute(std::vector<Stmt>& body, const std::map<std::string, Expr>& env) {
  auto sub = [&](std::vector<Expr>& v) {
    for (Expr& e : v) e = e.substitute(env);
  };
  for (Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) {
      sub(in->offsets);
      sub(in->valid);
      sub(in->window);
    } else if (auto* l = std::get_if<Loop>(&s.node)) {
      l->start = l->start.substitute(env);
      l->stop = l->stop.substitute(env);
      l->step = l->step.substitute(env);
      auto it = env.find(l->var);
      if (it != env.end() && it->second.is_var()) l->var = it->second.name();
      substitute(l->body, env);
    } else if (auto* f = std::get_if<Fused>(&s.node)) {
      substitute(f->body, env);
    } else if (auto* i = std::get_if<IfThen>(&s.node)) {
      i->cond = i->cond.substitute(env);
      substitute(i->then_body, env);
      substitute(i->else_body, env);
    } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
      sub(r->index);
    } else {
      Call& c = std::get<Call>(s.node);
      for (CallArg& a : c.args) {
        sub(a.offsets);
        sub(a.extents);
      }
      sub(c.scalars);
    }
  }
}

std::set<std::string> vars_of(const Expr& e) {
  std::set<std::string> out;
  std::function<void(const Expr&)> walk = [&](const Expr& x) {
    if (x.is_const()) return;
    if (x.is_var()) {
      out.insert(x.name());
      return;
    }
    walk(x.lhs());
    walk(x.rhs());
  };
  walk(e);
  return out;
}

std::set<int> tiles_of(const std::vector<Stmt>& body) {
  std::set<int> out;
  for_each_instr(body, [&](const Instr& in) {
    if (in.dst >= 0) out.insert(in.dst);
    out.insert(in.srcs.begin(), in.srcs.end());
  });
  return out;
}

}  // namespace pypto

namespace pypto {

NestSplit split_nest(const TileNest& n) {
  NestSplit s;
  s.nest = &n;
  const std::vector<Stmt>* body = &n.body;
  while (body->size() == 1) {
    const Loop* l = std::get_if<Loop>(&(*body)[0].node);
    if (!l || !l->parallel) break;
    Loop head = *l;
    head.body.clear();
    s.grid.push_back(head);
    body = &l->body;
  }
  s.body = *body;
  s.fusible = !n.alone;
  for_each_instr(s.body, [&](const Instr& in) {
    if (writes_memory(in.op)) s.produces = in.memref;
    if (reads_memory(in.op)) s.reads.insert(in.memref);
    // A gather, and a scatter that may land anywhere, need the whole tensor. A scatter by
    // destination (a window) touches its block only, after what an earlier member wrote there.
    if (in.op == Opcode::TGATHER || (in.op == Opcode::TSCATTER && in.window.empty())) s.fusible = false;
    if (in.op == Opcode::TSCATTER && !in.window.empty()) s.reads.insert(in.memref);
  });
  return s;
}

std::vector<Stmt> wrap_in_grid(const std::vector<Loop>& grid, std::vector<Stmt> body) {
  for (size_t k = grid.size(); k-- > 0;) {
    Loop l = grid[k];
    l.body = std::move(body);
    body = {Stmt{std::move(l)}};
  }
  return body;
}

bool same_grid_loop(const Loop& a, const Loop& b) {
  return a.dim == b.dim && a.tile == b.tile && a.stop.equals(b.stop) && a.start.equals(b.start) && a.step.equals(b.step);
}

size_t common_prefix(const std::vector<Loop>& a, const std::vector<Loop>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && same_grid_loop(a[n], b[n])) ++n;
  return n;
}

std::map<std::string, std::pair<int64_t, int64_t>> loop_var_ranges(const std::vector<Stmt>& body) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& b) {
    for (const Stmt& s : b) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        auto start = l->start.as_const(), step = l->step.as_const();
        std::optional<int64_t> stop = l->stop.as_const();
        if (!stop && l->stop.kind() == Expr::Kind::Min) {
          stop = l->stop.lhs().as_const();
          if (!stop) stop = l->stop.rhs().as_const();
        }
        if (start && stop && step && *step > 0 && *stop > *start)
          out[l->var] = {*start, *start + (*stop - 1 - *start) / *step * *step};
        walk(l->body);
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        walk(i->then_body);
        walk(i->else_body);
      }
    }
  };
  walk(body);
  return out;
}

std::optional<std::pair<int64_t, int64_t>> linear_range(
    const Expr& e, const std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
  using K = Expr::Kind;
  switch (e.kind()) {
    case K::Const:
      return std::make_pair(e.value(), e.value());
    case K::Var: {
      auto it = ranges.find(e.name());
      if (it == ranges.end()) return std::nullopt;
      return it->second;
    }
    case K::Add:
    case K::Sub: {
      auto a = linear_range(e.lhs(), ranges), b = linear_range(e.rhs(), ranges);
      if (!a || !b) return std::nullopt;
      if (e.kind() == K::Add) return std::make_pair(a->first + b->first, a->second + b->second);
      return std::make_pair(a->first - b->second, a->second - b->first);
    }
    case K::Mul: {
      auto c = e.rhs().as_const();
      Expr x = e.lhs();
      if (!c) {
        c = e.lhs().as_const();
        x = e.rhs();
      }
      if (!c) return std::nullopt;
      auto r = linear_range(x, ranges);
      if (!r) return std::nullopt;
      int64_t lo = r->first * *c, hi = r->second * *c;
      return std::make_pair(std::min(lo, hi), std::max(lo, hi));
    }
    default:
      return std::nullopt;
  }
}

const TileDecl& tile_of(const InCoreFunction& f, int id) {
  for (const TileDecl& t : f.tiles)
    if (t.id == id) return t;
  throw InternalError(fmt::format("@{}: tile {} is not declared", f.name, id));
}

int64_t clamp_tile(const Expr& dim, int64_t tile) {
  auto c = dim.as_const();
  return (c && *c < tile) ? *c : tile;
}

std::vector<int64_t> matmul_output_tile(const TensorGraph& g, const TensorOp& op) {
  const std::vector<Expr>& shape = g.value(op.output).shape;
  const size_t r = shape.size();
  std::vector<int64_t> tile(r, 1);
  tile[r - 2] = clamp_tile(shape[r - 2], op.cube_tile[0]);
  tile[r - 1] = clamp_tile(shape[r - 1], op.cube_tile[2]);
  auto k = g.value(op.inputs[0]).shape.back().as_const();
  if (r < 3 || !k) return tile;
  const int64_t macs = tile[r - 2] * tile[r - 1] * *k;
  if (macs <= 0 || macs >= kBatchBlockMacs) return tile;
  int64_t bb = kBatchBlockMacs / macs;
  if (auto n = shape[r - 3].as_const()) bb = std::min(bb, *n);
  // The number of tasks with a block of b, when every dim is a constant.
  auto tasks = [&](int64_t b) -> std::optional<int64_t> {
    int64_t t = 1;
    for (size_t d = 0; d < r; ++d) {
      auto n = shape[d].as_const();
      if (!n) return std::nullopt;
      const int64_t ext = d == r - 3 ? b : tile[d];
      t *= (*n + ext - 1) / ext;
    }
    return t;
  };
  while (bb > 1) {
    auto t = tasks(bb);
    if (!t || *t >= kBatchBlockMinTasks) break;
    bb /= 2;
  }
  tile[r - 3] = std::max<int64_t>(bb, 1);
  return tile;
}

}  // namespace pypto
