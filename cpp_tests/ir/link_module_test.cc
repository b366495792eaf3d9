#include <gtest/gtest.h>

#include <string>

#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/pto_module.h"
#include "ir/verifier.h"

namespace pypto {
namespace {

Instr instr(Opcode op, int dst, std::vector<int> srcs, int memref = -1, std::vector<Expr> offsets = {}) {
  Instr in;
  in.op = op;
  in.dst = dst;
  in.srcs = std::move(srcs);
  in.memref = memref;
  in.offsets = std::move(offsets);
  return in;
}

/// @half: loads an 8x8 tile of `a` at row 8*r, negates it, stores it into `b`; `a` and `b` have no shape.
ModuleFunction half() {
  FunctionBuilder b("half", "test:1");
  int a = b.memref("a", MemKind::Input, DataType::FP32, std::nullopt);
  int out = b.memref("b", MemKind::Input, DataType::FP32, std::nullopt);
  int t = b.tile("t", {8, 8}, DataType::FP32);
  int u = b.tile("u", {8, 8}, DataType::FP32);
  Loop l;
  l.var = "r";
  l.start = Expr(0);
  l.stop = Expr(2);
  l.step = Expr(1);
  b.begin_for(l);
  b.add(instr(Opcode::TLOAD, t, {}, a, {Expr::var("r") * Expr(8), Expr(0)}));
  b.add(instr(Opcode::TNEG, u, {t}));
  b.add(instr(Opcode::TSTORE, -1, {u}, out, {Expr::var("r") * Expr(8), Expr(0)}));
  EXPECT_TRUE(b.end(true));
  return b.build();
}

/// An orchestration over x, y (N x 8) calling @half on block i of each.
ModuleFunction main_fn() {
  FunctionBuilder b("main", "test:2");
  b.set_in_core(false);
  int x = b.memref("x", MemKind::Input, DataType::FP32, std::vector<Expr>{Expr::var("N"), Expr(8)});
  int y = b.memref("y", MemKind::Output, DataType::FP32, std::vector<Expr>{Expr::var("N"), Expr(8)});
  b.scalar("N", DataType::INT64);
  Loop l;
  l.var = "i";
  l.start = Expr(0);
  l.stop = floordiv(Expr::var("N"), Expr(16));
  l.step = Expr(1);
  b.begin_for(l);
  NamedCall c;
  c.callee = "half";
  c.where = "test:3";
  c.args.push_back(NamedArg{"a", x, std::vector<Expr>{Expr::var("i"), Expr(0)}, std::nullopt, true});
  c.args.push_back(NamedArg{"b", y, std::vector<Expr>{Expr::var("i"), Expr(0)}, std::nullopt, true});
  b.call(c);
  EXPECT_TRUE(b.end(true));
  return b.build();
}

TEST(LinkModule, BoundsBlocksAndScalesBlockOffsets) {
  PtoModule m{"m", {half(), main_fn()}};
  ExecutionGraph g = link_module(m, "main");
  EXPECT_EQ(g.module, "m");
  EXPECT_EQ(g.name, "main");
  ASSERT_EQ(g.functions.size(), 1u);
  const InCoreFunction& f = g.functions[0];
  ASSERT_EQ(f.params.size(), 2u);
  // Two 8x8 tiles at rows 0 and 8: a 16x8 block; only b is stored to.
  EXPECT_EQ(f.params[0].max_extents[0].str(), "16");
  EXPECT_EQ(f.params[0].max_extents[1].str(), "8");
  EXPECT_FALSE(f.params[0].is_output);
  EXPECT_TRUE(f.params[1].is_output);
  const std::string text = print_pto(g);
  EXPECT_NE(text.find("CALL @half(%a -> %x[(i * 16), 0; 16, 8], %b -> %y[(i * 16), 0; 16, 8])"), std::string::npos)
      << text;
  // The linked module is well-formed .pto: it parses back to the same text and verifies.
  ExecutionGraph back = parse_pto(text);
  EXPECT_EQ(print_pto(back), text);
  EXPECT_NO_THROW(verify(back));
}

TEST(LinkModule, InlinesInCoreCallsWithRenamedTilesAndShiftedOffsets) {
  FunctionBuilder b("twice", "test:4");
  int a = b.memref("a", MemKind::Input, DataType::FP32, std::vector<Expr>{Expr(32), Expr(8)});
  int out = b.memref("b", MemKind::Input, DataType::FP32, std::vector<Expr>{Expr(32), Expr(8)});
  for (int k = 0; k < 2; ++k) {
    NamedCall c;
    c.callee = "half";
    c.args.push_back(NamedArg{"a", a, std::vector<Expr>{Expr(k), Expr(0)}, std::nullopt, true});
    c.args.push_back(NamedArg{"b", out, std::vector<Expr>{Expr(k), Expr(0)}, std::nullopt, true});
    b.call(c);
  }
  PtoModule m{"m", {half(), b.build()}};
  ExecutionGraph g = link_module(m, "twice");
  EXPECT_EQ(g.name, "twice_entry");  // an InCore entry gets an orchestration of its own
  ASSERT_EQ(g.functions.size(), 1u);
  const InCoreFunction& f = g.functions[0];
  ASSERT_EQ(f.tiles.size(), 4u);
  EXPECT_EQ(f.tiles[0].name, "half1_t");
  EXPECT_EQ(f.tiles[3].name, "half2_u");
  const std::string text = print_pto(g);
  EXPECT_NE(text.find("FOR %half2_r:idx"), std::string::npos) << text;
  EXPECT_NE(text.find("tload %a[((half2_r * 8) + 16), 0]"), std::string::npos) << text;
  EXPECT_NO_THROW(verify(parse_pto(text)));
}

TEST(LinkModule, RefusesWhatItCannotLink) {
  PtoModule m{"m", {half(), main_fn()}};
  EXPECT_THROW(link_module(m, "nope"), UserError);
  // A call to a missing function names it and the builder's line.
  FunctionBuilder b("main", "test:5");
  b.set_in_core(false);
  NamedCall c;
  c.callee = "ghost";
  c.where = "user.py:7";
  b.call(c);
  PtoModule bad{"m", {b.build()}};
  try {
    link_module(bad, "main");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("CALL @ghost names no function of module 'm' (user.py:7)"), std::string::npos)
        << e.what();
  }
  // An unsized parameter that no tile moves has no block.
  FunctionBuilder idle("idle", "test:6");
  idle.memref("a", MemKind::Input, DataType::FP32, std::nullopt);
  PtoModule none{"m", {idle.build()}};
  EXPECT_THROW(link_module(none, "idle"), UserError);
}

}  // namespace
}  // namespace pypto
