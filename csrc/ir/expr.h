/// Symbolic integer expressions: shapes with dynamic dims, loop bounds, tile
/// offsets and valid (tail) extents at every graph level.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace pypto {

/// An immutable integer expression over named variables (value semantics).
class Expr {
 public:
  enum class Kind { Const, Var, Add, Sub, Mul, FloorDiv, Mod, Min, Max, Lt, Le, Eq, Ne, And, Or };

  /// A constant.
  Expr(int64_t value = 0);  // NOLINT(google-explicit-constructor): constants read naturally.
  /// A named variable (loop index, block index or symbolic dim).
  static Expr var(const std::string& name);
  /// A binary node (any kind but Const and Var) exactly as given, without the
  /// simplifications the operators apply; for parsers that must keep the
  /// printed form. Throws InternalError for Const and Var.
  static Expr node(Kind kind, const Expr& a, const Expr& b);

  Kind kind() const;
  bool is_const() const { return kind() == Kind::Const; }
  bool is_var() const { return kind() == Kind::Var; }
  /// The value of a constant; throws InternalError otherwise.
  int64_t value() const;
  /// The constant value, if this is a constant.
  std::optional<int64_t> as_const() const;
  /// The name of a variable.
  const std::string& name() const;
  Expr lhs() const;
  Expr rhs() const;

  /// Structural equality (after the simplifications the constructors apply).
  bool equals(const Expr& other) const;
  /// True if `name` occurs in the expression.
  bool uses(const std::string& name) const;
  /// Replaces variables by expressions.
  Expr substitute(const std::map<std::string, Expr>& env) const;
  /// Replaces variables by expressions, keeping every other node as it is (no
  /// simplification), so the result prints as written.
  Expr substitute_exact(const std::map<std::string, Expr>& env) const;
  /// Evaluates with variable values from `env`; throws InternalError on an unbound variable.
  int64_t eval(const std::function<int64_t(const std::string&)>& env) const;
  /// Printed form, e.g. "min(32, (64 - (g0 * 32)))".
  std::string str() const;
  /// Writes the expression in C++ syntax, mapping variable names through `name_of`.
  std::string cpp(const std::function<std::string(const std::string&)>& name_of) const;

  friend Expr operator+(const Expr& a, const Expr& b);
  friend Expr operator-(const Expr& a, const Expr& b);
  friend Expr operator*(const Expr& a, const Expr& b);

 private:
  struct Node;
  explicit Expr(std::shared_ptr<const Node> node);
  static Expr make(Kind kind, Expr a, Expr b);
  /// A node without simplification (for building canonical forms).
  static Expr raw(Kind kind, const Expr& a, const Expr& b);
  Expr replace(const std::map<std::string, Expr>& env, bool simplify) const;
  std::shared_ptr<const Node> node_;

  friend Expr floordiv(const Expr& a, const Expr& b);
  friend Expr mod(const Expr& a, const Expr& b);
  friend Expr min(const Expr& a, const Expr& b);
  friend Expr max(const Expr& a, const Expr& b);
  friend Expr cmp_lt(const Expr& a, const Expr& b);
  friend Expr cmp_le(const Expr& a, const Expr& b);
  friend Expr cmp_eq(const Expr& a, const Expr& b);
  friend Expr cmp_ne(const Expr& a, const Expr& b);
  friend Expr logical_and(const Expr& a, const Expr& b);
  friend Expr logical_or(const Expr& a, const Expr& b);
};

Expr floordiv(const Expr& a, const Expr& b);
Expr mod(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
/// Comparisons and logic: 1 when true, 0 when false (a > b is cmp_lt(b, a)).
Expr cmp_lt(const Expr& a, const Expr& b);
Expr cmp_le(const Expr& a, const Expr& b);
Expr cmp_eq(const Expr& a, const Expr& b);
Expr cmp_ne(const Expr& a, const Expr& b);
Expr logical_and(const Expr& a, const Expr& b);
Expr logical_or(const Expr& a, const Expr& b);
/// ceil(a / b) for positive b.
Expr ceildiv(const Expr& a, const Expr& b);

}  // namespace pypto
