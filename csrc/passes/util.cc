#include "passes/util.h"

namespace pypto {

void for_each_instr(const std::vector<Stmt>& body, const std::function<void(const Instr&)>& fn) {
  for (const Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) fn(*in);
    else if (auto* l = std::get_if<Loop>(&s.node)) for_each_instr(l->body, fn);
  }
}

void for_each_instr(std::vector<Stmt>& body, const std::function<void(Instr&)>& fn) {
  for (Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) fn(*in);
    else if (auto* l = std::get_if<Loop>(&s.node)) for_each_instr(l->body, fn);
  }
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
