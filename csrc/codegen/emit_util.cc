// Helpers shared by the kernel and orchestration emitters (see emit_util.h).
#include "codegen/emit_util.h"

#include <fmt/format.h>

#include <set>

namespace pypto::codegen {

std::string var_name(const std::string& v) { return "v_" + v; }

std::string cexpr(const Expr& e) { return e.cpp(var_name); }

std::string list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

std::string cexprs(const std::vector<Expr>& v) {
  std::vector<std::string> s;
  for (const Expr& e : v) s.push_back(cexpr(e));
  return list(s);
}

std::vector<std::string> shape_text(const std::vector<Expr>& v) {
  std::vector<std::string> s;
  for (const Expr& e : v) s.push_back(e.str());
  return s;
}

std::string ints(const std::vector<int64_t>& v) {
  std::vector<std::string> s;
  for (int64_t x : v) s.push_back(std::to_string(x));
  return list(s);
}

/// The divisions of `e` by a symbolic divisor (// or % whose right side is not a constant),
/// innermost first.
void collect_divisions(const Expr& e, std::vector<Expr>& out) {
  if (e.is_const() || e.is_var()) return;
  collect_divisions(e.lhs(), out);
  collect_divisions(e.rhs(), out);
  if ((e.kind() == Expr::Kind::FloorDiv || e.kind() == Expr::Kind::Mod) && !e.rhs().is_const()) out.push_back(e);
}

/// C++ that returns `fail(message)` when a symbolic divisor in `es` is 0 at run time (the
/// division itself would be undefined), naming the divisor and the division.
std::string zero_guards(const std::vector<Expr>& es, const std::string& pad, const char* fail) {
  std::vector<Expr> divs;
  for (const Expr& e : es) collect_divisions(e, divs);
  std::string o;
  std::set<std::string> seen;
  for (const Expr& d : divs) {
    std::string msg = fmt::format("the divisor {} of {} is 0", d.rhs().str(), d.str());
    if (!seen.insert(msg).second) continue;
    o += fmt::format("{}if (__builtin_expect({} == 0, 0)) return {}(\"{}\");\n", pad, cexpr(d.rhs()), fail, msg);
  }
  return o;
}

/// Writes the FOR loops and IF conditions of `body` as C++; `leaf` writes
/// every other statement (an instruction or a call) at its indentation, unless
/// `run` (when given) writes it as part of a run of statements.
void emit_control(std::string& o, const std::vector<Stmt>& body, int indent,
                  const std::function<void(const Stmt&, const std::string&)>& leaf, const RunEmitter* run,
                  const char* fail) {
  std::string pad(indent * 2, ' ');
  for (size_t i = 0; i < body.size(); ++i) {
    const Stmt& s = body[i];
    if (auto* l = std::get_if<Loop>(&s.node)) {
      std::string v = var_name(l->var);
      o += zero_guards({l->start, l->stop, l->step}, pad, fail);
      if (!l->step.is_const()) {  // a step that is not positive would never end the loop
        o += fmt::format("{}if (__builtin_expect({} <= 0, 0)) return {}(\"FOR %{}: the step {} is not positive\");\n",
                         pad, cexpr(l->step), fail, l->var, l->step.str());
      }
      // With constant bounds whose last step stays in range the step is a plain addition; otherwise
      // pto::loop_next stops at the bound instead of overflowing past 2^63.
      auto start = l->start.as_const(), stop = l->stop.as_const(), step = l->step.as_const();
      int64_t past = 0;
      const bool plain = start && stop && step && !__builtin_add_overflow(*stop, *step, &past);
      const std::string next = plain ? fmt::format("{} += {}", v, *step)
                                     : fmt::format("{} = pto::loop_next({}, {}, {})", v, v, cexpr(l->step), cexpr(l->stop));
      o += fmt::format("{}for (int64_t {} = {}; {} < {}; {}) {{\n", pad, v, cexpr(l->start), v, cexpr(l->stop), next);
      emit_control(o, l->body, indent + 1, leaf, run, fail);
      o += pad + "}\n";
    } else if (auto* c = std::get_if<IfThen>(&s.node)) {
      o += zero_guards({c->cond}, pad, fail);
      o += fmt::format("{}if ({}) {{\n", pad, cexpr(c->cond));
      emit_control(o, c->then_body, indent + 1, leaf, run, fail);
      if (!c->else_body.empty()) {
        o += pad + "} else {\n";
        emit_control(o, c->else_body, indent + 1, leaf, run, fail);
      }
      o += pad + "}\n";
    } else if (size_t n = run != nullptr ? (*run)(body, i, pad) : 0; n > 0) {
      i += n - 1;
    } else {
      leaf(s, pad);
    }
  }
}

/// Calls `leaf` for every statement of `body` that is not a loop or a condition, in program order
/// (both branches of a condition, then before else).
void for_each_leaf(const std::vector<Stmt>& body, const std::function<void(const Stmt&)>& leaf) {
  for (const Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      for_each_leaf(l->body, leaf);
    } else if (auto* f = std::get_if<Fused>(&s.node)) {
      for_each_leaf(f->body, leaf);
    } else if (auto* c = std::get_if<IfThen>(&s.node)) {
      for_each_leaf(c->then_body, leaf);
      for_each_leaf(c->else_body, leaf);
    } else {
      leaf(s);
    }
  }
}

}  // namespace pypto::codegen
