#include "passes/util.h"

namespace pypto {

void for_each_instr(const std::vector<Stmt>& body, const std::function<void(const Instr&)>& fn) {
  for (const Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) fn(*in);
    else if (auto* l = std::get_if<Loop>(&s.node)) for_each_instr(l->body, fn);
    else if (auto* c = std::get_if<IfThen>(&s.node)) {
      for_each_instr(c->then_body, fn);
      for_each_instr(c->else_body, fn);
    }
  }
}

void for_each_instr(std::vector<Stmt>& body, const std::function<void(Instr&)>& fn) {
  for (Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) fn(*in);
    else if (auto* l = std::get_if<Loop>(&s.node)) for_each_instr(l->body, fn);
    else if (auto* c = std::get_if<IfThen>(&s.node)) {
      for_each_instr(c->then_body, fn);
      for_each_instr(c->else_body, fn);
    }
  }
}

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
        if (in->scalar_expr) add(*in->scalar_expr);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        add(l->start);
        add(l->stop);
        add(l->step);
        bound.insert(l->var);
        walk(l->body);
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        add(i->cond);
        walk(i->then_body);
        walk(i->else_body);
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
    } else if (auto* l = std::get_if<Loop>(&s.node)) {
      l->start = l->start.substitute(env);
      l->stop = l->stop.substitute(env);
      l->step = l->step.substitute(env);
      auto it = env.find(l->var);
      if (it != env.end() && it->second.is_var()) l->var = it->second.name();
      substitute(l->body, env);
    } else if (auto* i = std::get_if<IfThen>(&s.node)) {
      i->cond = i->cond.substitute(env);
      substitute(i->then_body, env);
      substitute(i->else_body, env);
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
