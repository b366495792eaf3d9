#include "ir/expr.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "ir/errors.h"

namespace pypto {

struct Expr::Node {
  Kind kind;
  int64_t value = 0;
  std::string name;
  std::shared_ptr<const Node> a, b;
};

namespace {
int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t mod_i(int64_t a, int64_t b) { return a - floordiv_i(a, b) * b; }

/// a op b, or UserError when the result does not fit in 64 bits (offsets near 2^63 must not wrap).
int64_t checked(char op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool over = op == '+' ? __builtin_add_overflow(a, b, &r) : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                                                          : __builtin_mul_overflow(a, b, &r);
  if (over) throw UserError(fmt::format("integer overflow in a symbolic expression: {} {} {} does not fit in 64 bits", a, op, b));
  return r;
}
}  // namespace

Expr::Expr(int64_t value) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Const;
  n->value = value;
  node_ = std::move(n);
}

Expr::Expr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}

Expr Expr::var(const std::string& name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::Var;
  n->name = name;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

Expr::Kind Expr::kind() const { return node_->kind; }

int64_t Expr::value() const {
  if (node_->kind != Kind::Const) throw InternalError("Expr::value on a non-constant " + str());
  return node_->value;
}

std::optional<int64_t> Expr::as_const() const {
  if (node_->kind == Kind::Const) return node_->value;
  return std::nullopt;
}

const std::string& Expr::name() const {
  if (node_->kind != Kind::Var) throw InternalError("Expr::name on a non-variable " + str());
  return node_->name;
}

Expr Expr::lhs() const {
  if (!node_->a) throw InternalError("Expr::lhs on a leaf " + str());
  return Expr(node_->a);
}

Expr Expr::rhs() const {
  if (!node_->b) throw InternalError("Expr::rhs on a leaf " + str());
  return Expr(node_->b);
}

namespace {

/// A linear form: sum of coef * term plus a constant; terms are keyed by
/// their printed text so equal subexpressions combine.
struct Linear {
  std::map<std::string, std::pair<int64_t, Expr>> terms;
  int64_t constant = 0;
};

}  // namespace

static void linearize(const Expr& e, int64_t scale, Linear& out) {
  switch (e.kind()) {
    case Expr::Kind::Const: out.constant = checked('+', out.constant, checked('*', scale, e.value())); return;
    case Expr::Kind::Add:
      linearize(e.lhs(), scale, out);
      linearize(e.rhs(), scale, out);
      return;
    case Expr::Kind::Sub:
      linearize(e.lhs(), scale, out);
      linearize(e.rhs(), -scale, out);
      return;
    case Expr::Kind::Mul:
      if (auto c = e.rhs().as_const()) return linearize(e.lhs(), checked('*', scale, *c), out);
      if (auto c = e.lhs().as_const()) return linearize(e.rhs(), checked('*', scale, *c), out);
      break;
    default: break;
  }
  std::string key = e.str();
  auto it = out.terms.find(key);
  if (it == out.terms.end()) out.terms.emplace(key, std::make_pair(scale, e));
  else it->second.first = checked('+', it->second.first, scale);
}

Expr Expr::make(Kind kind, Expr a, Expr b) {
  if ((kind == Kind::Add || kind == Kind::Sub) && !(a.is_const() && b.is_const())) {
    // Canonical linear form, so (b + 1) - b is 1 and g*32 - g*32 is 0.
    Linear lin;
    linearize(a, 1, lin);
    linearize(b, kind == Kind::Add ? 1 : -1, lin);
    // Printed order: positive terms, the constant, negative terms; so
    // n - 32, M + 31 and 100 - i * 32 read as written.
    std::optional<Expr> acc;
    auto scaled = [](const Expr& t, int64_t mag) { return mag == 1 ? t : raw(Kind::Mul, t, Expr(mag)); };
    for (auto& [key, term] : lin.terms) {
      if (term.first <= 0) continue;
      Expr t = scaled(term.second, term.first);
      acc = acc ? raw(Kind::Add, *acc, t) : t;
    }
    if (lin.constant != 0) {
      if (!acc) acc = Expr(lin.constant);
      else acc = lin.constant > 0 ? raw(Kind::Add, *acc, Expr(lin.constant)) : raw(Kind::Sub, *acc, Expr(checked('-', 0, lin.constant)));
    }
    for (auto& [key, term] : lin.terms) {
      if (term.first >= 0) continue;
      Expr t = scaled(term.second, checked('-', 0, term.first));
      acc = acc ? raw(Kind::Sub, *acc, t) : raw(Kind::Sub, Expr(0), t);
    }
    return acc ? *acc : Expr(0);
  }
  auto ca = a.as_const(), cb = b.as_const();
  if (ca && cb) {
    switch (kind) {
      case Kind::Add: return Expr(checked('+', *ca, *cb));
      case Kind::Sub: return Expr(checked('-', *ca, *cb));
      case Kind::Mul: return Expr(checked('*', *ca, *cb));
      case Kind::FloorDiv:
        if (*cb == 0) throw UserError("division by zero in a symbolic expression");
        if (*cb == -1) return Expr(checked('-', 0, *ca));
        return Expr(floordiv_i(*ca, *cb));
      case Kind::Mod:
        if (*cb == 0) throw UserError("modulo by zero in a symbolic expression");
        if (*cb == -1) return Expr(0);
        return Expr(mod_i(*ca, *cb));
      case Kind::Min: return Expr(std::min(*ca, *cb));
      case Kind::Max: return Expr(std::max(*ca, *cb));
      case Kind::Lt: return Expr(int64_t(*ca < *cb));
      case Kind::Le: return Expr(int64_t(*ca <= *cb));
      case Kind::Eq: return Expr(int64_t(*ca == *cb));
      case Kind::Ne: return Expr(int64_t(*ca != *cb));
      case Kind::And: return Expr(int64_t(*ca && *cb));
      case Kind::Or: return Expr(int64_t(*ca || *cb));
      default: break;
    }
  }
  if (kind == Kind::Eq && a.equals(b)) return Expr(1);
  if (kind == Kind::Ne && a.equals(b)) return Expr(0);
  if (kind == Kind::And && ((ca && *ca == 0) || (cb && *cb == 0))) return Expr(0);
  if (kind == Kind::Or && ((ca && *ca != 0) || (cb && *cb != 0))) return Expr(1);
  switch (kind) {
    case Kind::Add:
      if (ca && *ca == 0) return b;
      if (cb && *cb == 0) return a;
      break;
    case Kind::Sub:
      if (cb && *cb == 0) return a;
      if (a.equals(b)) return Expr(0);
      break;
    case Kind::Mul:
      if ((ca && *ca == 0) || (cb && *cb == 0)) return Expr(0);
      if (ca && *ca == 1) return b;
      if (cb && *cb == 1) return a;
      break;
    case Kind::FloorDiv:
      if (cb && *cb == 1) return a;
      break;
    case Kind::Mod:
      if (cb && *cb == 1) return Expr(0);
      break;
    case Kind::Min:
    case Kind::Max:
      if (a.equals(b)) return a;
      break;
    default: break;
  }
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->a = a.node_;
  n->b = b.node_;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

Expr Expr::raw(Kind kind, const Expr& a, const Expr& b) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->a = a.node_;
  n->b = b.node_;
  return Expr(std::shared_ptr<const Node>(std::move(n)));
}

Expr Expr::node(Kind kind, const Expr& a, const Expr& b) {
  if (kind == Kind::Const || kind == Kind::Var) throw InternalError("Expr::node needs a binary kind");
  return raw(kind, a, b);
}

Expr operator+(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Mul, a, b); }
Expr floordiv(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::FloorDiv, a, b); }
Expr mod(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Mod, a, b); }
Expr min(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Min, a, b); }
Expr max(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Max, a, b); }
Expr cmp_lt(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Lt, a, b); }
Expr cmp_le(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Le, a, b); }
Expr cmp_eq(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Eq, a, b); }
Expr cmp_ne(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Ne, a, b); }
Expr logical_and(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::And, a, b); }
Expr logical_or(const Expr& a, const Expr& b) { return Expr::make(Expr::Kind::Or, a, b); }
Expr ceildiv(const Expr& a, const Expr& b) { return floordiv(a + b - Expr(1), b); }

bool Expr::equals(const Expr& other) const {
  const Node* x = node_.get();
  const Node* y = other.node_.get();
  if (x == y) return true;
  if (x->kind != y->kind) return false;
  switch (x->kind) {
    case Kind::Const: return x->value == y->value;
    case Kind::Var: return x->name == y->name;
    default: return Expr(x->a).equals(Expr(y->a)) && Expr(x->b).equals(Expr(y->b));
  }
}

bool Expr::uses(const std::string& name) const {
  switch (node_->kind) {
    case Kind::Const: return false;
    case Kind::Var: return node_->name == name;
    default: return Expr(node_->a).uses(name) || Expr(node_->b).uses(name);
  }
}

Expr Expr::substitute(const std::map<std::string, Expr>& env) const { return replace(env, true); }

Expr Expr::substitute_exact(const std::map<std::string, Expr>& env) const { return replace(env, false); }

Expr Expr::replace(const std::map<std::string, Expr>& env, bool simplify) const {
  switch (node_->kind) {
    case Kind::Const: return *this;
    case Kind::Var: {
      auto it = env.find(node_->name);
      return it == env.end() ? *this : it->second;
    }
    default: {
      Expr a = Expr(node_->a).replace(env, simplify), b = Expr(node_->b).replace(env, simplify);
      return simplify ? make(node_->kind, a, b) : raw(node_->kind, a, b);
    }
  }
}

int64_t Expr::eval(const std::function<int64_t(const std::string&)>& env) const {
  switch (node_->kind) {
    case Kind::Const: return node_->value;
    case Kind::Var: return env(node_->name);
    default: {
      Expr r = make(node_->kind, Expr(Expr(node_->a).eval(env)), Expr(Expr(node_->b).eval(env)));
      return r.value();
    }
  }
}

namespace {
const char* infix(Expr::Kind k) {
  switch (k) {
    case Expr::Kind::Add: return " + ";
    case Expr::Kind::Sub: return " - ";
    case Expr::Kind::Mul: return " * ";
    case Expr::Kind::FloorDiv: return " // ";
    case Expr::Kind::Mod: return " % ";
    case Expr::Kind::Lt: return " < ";
    case Expr::Kind::Le: return " <= ";
    case Expr::Kind::Eq: return " == ";
    case Expr::Kind::Ne: return " != ";
    case Expr::Kind::And: return " && ";
    case Expr::Kind::Or: return " || ";
    default: return nullptr;
  }
}
}  // namespace

std::string Expr::str() const {
  switch (node_->kind) {
    case Kind::Const: return std::to_string(node_->value);
    case Kind::Var: return node_->name;
    case Kind::Min: return fmt::format("min({}, {})", Expr(node_->a).str(), Expr(node_->b).str());
    case Kind::Max: return fmt::format("max({}, {})", Expr(node_->a).str(), Expr(node_->b).str());
    default: return fmt::format("({}{}{})", Expr(node_->a).str(), infix(node_->kind), Expr(node_->b).str());
  }
}

std::string Expr::cpp(const std::function<std::string(const std::string&)>& name_of) const {
  auto A = [&] { return Expr(node_->a).cpp(name_of); };
  auto B = [&] { return Expr(node_->b).cpp(name_of); };
  switch (node_->kind) {
    case Kind::Const: return fmt::format("INT64_C({})", node_->value);
    case Kind::Var: return name_of(node_->name);
    case Kind::Add: return fmt::format("({} + {})", A(), B());
    case Kind::Sub: return fmt::format("({} - {})", A(), B());
    case Kind::Mul: return fmt::format("({} * {})", A(), B());
    case Kind::FloorDiv: return fmt::format("pto::floordiv({}, {})", A(), B());
    case Kind::Mod: return fmt::format("pto::floormod({}, {})", A(), B());
    case Kind::Min: return fmt::format("pto::imin({}, {})", A(), B());
    case Kind::Max: return fmt::format("pto::imax({}, {})", A(), B());
    case Kind::Lt: return fmt::format("int64_t({} < {})", A(), B());
    case Kind::Le: return fmt::format("int64_t({} <= {})", A(), B());
    case Kind::Eq: return fmt::format("int64_t({} == {})", A(), B());
    case Kind::Ne: return fmt::format("int64_t({} != {})", A(), B());
    case Kind::And: return fmt::format("int64_t({} && {})", A(), B());
    case Kind::Or: return fmt::format("int64_t({} || {})", A(), B());
  }
  throw InternalError("unknown Expr kind");
}

}  // namespace pypto
