#include "ir/expr.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ir/errors.h"

namespace pypto {
namespace {

const Expr x = Expr::var("x");
const Expr y = Expr::var("y");

// Variables are looked up by name; an unknown name must not silently read as 0.
int64_t Env(const std::string& name) {
  static const std::map<std::string, int64_t> values = {{"x", 7}, {"y", -3}, {"n", 100}};
  auto it = values.find(name);
  if (it == values.end()) throw InternalError("unbound " + name);
  return it->second;
}

TEST(ExprTest, ConstantsFoldForEveryOperator) {
  EXPECT_EQ((Expr(3) + Expr(4)).value(), 7);
  EXPECT_EQ((Expr(3) - Expr(4)).value(), -1);
  EXPECT_EQ((Expr(3) * Expr(4)).value(), 12);
  EXPECT_EQ(floordiv(Expr(17), Expr(5)).value(), 3);
  EXPECT_EQ(mod(Expr(17), Expr(5)).value(), 2);
  EXPECT_EQ(min(Expr(17), Expr(5)).value(), 5);
  EXPECT_EQ(max(Expr(17), Expr(5)).value(), 17);
  EXPECT_EQ(ceildiv(Expr(100), Expr(32)).value(), 4);
  EXPECT_EQ(ceildiv(Expr(64), Expr(32)).value(), 2);
  EXPECT_TRUE((Expr(2) * Expr(3) + Expr(1)).is_const());
}

TEST(ExprTest, AdditiveAndMultiplicativeIdentities) {
  EXPECT_TRUE((x + Expr(0)).equals(x));
  EXPECT_TRUE((Expr(0) + x).equals(x));
  EXPECT_TRUE((x - Expr(0)).equals(x));
  EXPECT_TRUE((x * Expr(1)).equals(x));
  EXPECT_TRUE((Expr(1) * x).equals(x));
  EXPECT_EQ((x * Expr(0)).as_const(), 0);
  EXPECT_EQ((Expr(0) * x).as_const(), 0);
  EXPECT_TRUE(floordiv(x, Expr(1)).equals(x));
  EXPECT_EQ(mod(x, Expr(1)).as_const(), 0);
}

TEST(ExprTest, SelfSubtractionIsZeroEvenForCompoundTerms) {
  EXPECT_EQ((x - x).as_const(), 0);
  Expr t = min(Expr(32), Expr(100) - x * Expr(32));
  EXPECT_EQ((t - min(Expr(32), Expr(100) - x * Expr(32))).as_const(), 0);
  // x - y must stay symbolic: only structurally equal operands cancel.
  EXPECT_FALSE((x - y).is_const());
}

TEST(ExprTest, MinMaxOfEqualOperandsCollapse) {
  EXPECT_TRUE(min(x, x).equals(x));
  EXPECT_TRUE(max(x, x).equals(x));
  EXPECT_EQ(min(x, y).kind(), Expr::Kind::Min);
  EXPECT_EQ(max(x, y).kind(), Expr::Kind::Max);
  EXPECT_EQ(min(Expr(-4), Expr(-9)).value(), -9);
  EXPECT_EQ(max(Expr(-4), Expr(-9)).value(), -4);
}

// Tail extents and block offsets rely on Python's floor semantics, not C's truncation.
TEST(ExprTest, FloorDivAndModRoundTowardMinusInfinity) {
  EXPECT_EQ(floordiv(Expr(-7), Expr(2)).value(), -4);
  EXPECT_EQ(mod(Expr(-7), Expr(2)).value(), 1);
  EXPECT_EQ(floordiv(Expr(7), Expr(-2)).value(), -4);
  EXPECT_EQ(mod(Expr(7), Expr(-2)).value(), -1);
  EXPECT_EQ(floordiv(Expr(-7), Expr(-2)).value(), 3);
  EXPECT_EQ(mod(Expr(-7), Expr(-2)).value(), -1);
  EXPECT_EQ(floordiv(Expr(-8), Expr(2)).value(), -4);
  EXPECT_EQ(mod(Expr(-8), Expr(2)).value(), 0);
  EXPECT_EQ(ceildiv(Expr(-5), Expr(2)).value(), -2);
}

TEST(ExprTest, DivisionByConstantZeroIsAUserError) {
  EXPECT_THROW(floordiv(Expr(1), Expr(0)), UserError);
  EXPECT_THROW(mod(Expr(1), Expr(0)), UserError);
}

TEST(ExprTest, EqualsIsStructural) {
  EXPECT_TRUE((x + y).equals(Expr::var("x") + Expr::var("y")));
  // Sums are canonical (x + y is y + x); products of variables are not.
  EXPECT_TRUE((x + y).equals(y + x));
  EXPECT_FALSE((x * y).equals(y * x));
  EXPECT_FALSE((x + y).equals(x - y));
  EXPECT_FALSE(x.equals(y));
  EXPECT_FALSE(Expr(3).equals(x));
  EXPECT_TRUE(Expr(3).equals(Expr(1) + Expr(2)));
}

TEST(ExprTest, AccessorsOfLeavesAndNodes) {
  Expr e = x * Expr(32);
  EXPECT_EQ(e.kind(), Expr::Kind::Mul);
  EXPECT_EQ(e.lhs().name(), "x");
  EXPECT_EQ(e.rhs().value(), 32);
  EXPECT_EQ(x.as_const(), std::nullopt);
  EXPECT_THROW(x.value(), InternalError);
  EXPECT_THROW(Expr(1).name(), InternalError);
  EXPECT_THROW(x.lhs(), InternalError);
  EXPECT_TRUE(e.uses("x"));
  EXPECT_FALSE(e.uses("y"));
}

TEST(ExprTest, SubstituteSimplifiesTheResult) {
  Expr e = min(Expr(32), Expr::var("n") - x * Expr(32));
  Expr partly = e.substitute({{"x", Expr(1)}});
  EXPECT_EQ(partly.str(), "min(32, (n - 32))");
  EXPECT_EQ(e.substitute({{"x", Expr(3)}, {"n", Expr(100)}}).as_const(), 4);
  // Renaming keeps the structure.
  EXPECT_EQ(e.substitute({{"x", Expr::var("g0")}}).str(), "min(32, (n - (g0 * 32)))");
  // Variables missing from the map are left alone.
  EXPECT_TRUE(e.substitute({{"z", Expr(5)}}).equals(e));
  // A substitution that makes operands equal triggers the a - a rule.
  EXPECT_EQ((x - y).substitute({{"y", x}}).as_const(), 0);
}

TEST(ExprTest, EvalUsesTheEnvironmentAndFloorSemantics) {
  EXPECT_EQ((x * Expr(32) + y).eval(Env), 7 * 32 - 3);
  EXPECT_EQ(floordiv(y, Expr(2)).eval(Env), -2);
  EXPECT_EQ(mod(y, Expr(2)).eval(Env), 1);
  EXPECT_EQ(min(Expr(32), Expr::var("n") - x * Expr(32)).eval(Env), -124);
  EXPECT_EQ(max(x, y).eval(Env), 7);
  EXPECT_THROW(Expr::var("unbound").eval(Env), InternalError);
  EXPECT_THROW(floordiv(x, y - Expr(-3)).eval(Env), UserError);
}

TEST(ExprTest, StrPrintsFullyParenthesisedInfix) {
  EXPECT_EQ(Expr(-5).str(), "-5");
  EXPECT_EQ(x.str(), "x");
  EXPECT_EQ((x + y).str(), "(x + y)");
  EXPECT_EQ((x - y * Expr(2)).str(), "(x - (y * 2))");
  EXPECT_EQ(floordiv(x, Expr(4)).str(), "(x // 4)");
  EXPECT_EQ(mod(x, Expr(4)).str(), "(x % 4)");
  EXPECT_EQ(max(x, Expr(0)).str(), "max(x, 0)");
  // No reassociation: (M + 32) - 1 stays as written, which is what loop bounds print.
  EXPECT_EQ(ceildiv(Expr::var("M"), Expr(32)).str(), "((M + 31) // 32)");
}

TEST(ExprTest, CppUsesRuntimeHelpersAndRenamesVariables) {
  auto name_of = [](const std::string& v) { return "v_" + v; };
  EXPECT_EQ(Expr(7).cpp(name_of), "INT64_C(7)");
  EXPECT_EQ((x + y).cpp(name_of), "(v_x + v_y)");
  EXPECT_EQ((x - Expr(1)).cpp(name_of), "(v_x - INT64_C(1))");
  EXPECT_EQ((x * y).cpp(name_of), "(v_x * v_y)");
  // C's / and % truncate; generated code must call the floor helpers instead.
  EXPECT_EQ(floordiv(x, Expr(3)).cpp(name_of), "pto::floordiv(v_x, INT64_C(3))");
  EXPECT_EQ(mod(x, Expr(3)).cpp(name_of), "pto::floormod(v_x, INT64_C(3))");
  EXPECT_EQ(min(x, y).cpp(name_of), "pto::imin(v_x, v_y)");
  EXPECT_EQ(max(x, y).cpp(name_of), "pto::imax(v_x, v_y)");
}

}  // namespace
TEST(ExprTest, SumsCancelInCanonicalLinearForm) {
  Expr b = Expr::var("b"), g = Expr::var("g0");
  EXPECT_TRUE(((b + Expr(1)) - b).is_const());
  EXPECT_EQ(((b + Expr(1)) - b).value(), 1);
  EXPECT_EQ(((g * Expr(32)) - (g * Expr(32))).value(), 0);
  EXPECT_EQ((Expr(100) - g * Expr(32)).str(), "(100 - (g0 * 32))");
  EXPECT_EQ((b * Expr(8) + Expr(8) - b * Expr(8)).value(), 8);
}

}  // namespace pypto
