// Tests of the .pto parser (ir/parser.h): print_pto(parse_pto(text)) == text
// for programs built through the pass pipeline, the hand-written seed forms,
// malformed inputs reported with their line and column, and a mutation fuzz
// that only ever sees a parsed graph or a PtoSyntaxError.
#include "ir/parser.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "../test_graphs.h"
#include "../sanitized.h"

namespace pypto {
namespace {

using testing::TestLoc;

std::string Pto(const TensorGraph& g, PassOptions opts = PassOptions{}) {
  return print_pto(run_pipeline(g, opts).execution);
}

void ExpectRoundTrip(const std::string& text) {
  ExecutionGraph g = parse_pto(text);
  EXPECT_EQ(print_pto(g), text);
}

// ---------------------------------------------------------------- programs

TensorGraph DynamicAddGraph() {
  TensorGraphBuilder b("add_dyn");
  b.add_dyn_dim("M");
  int a = b.add_param("a", {Expr::var("M"), Expr(64)}, DataType::FP32);
  int c = b.add_param("b", {Expr::var("M"), Expr(64)}, DataType::FP32);
  b.set_outputs({b.add_binary(TensorOpKind::Add, a, c, {32, 32}, TestLoc(2))});
  return b.finish();
}

TensorGraph MatmulGraph() {
  TensorGraphBuilder b("mm");
  int x = b.add_param("x", {Expr(64), Expr(96)}, DataType::FP32);
  int w = b.add_param("w", {Expr(96), Expr(80)}, DataType::FP32);
  int bias = b.add_param("bias", {Expr(1), Expr(80)}, DataType::FP32);
  int y = b.add_matmul(x, w, DataType::FP32, {32, 32, 32}, {32, 32, 32}, TestLoc(2));
  int z = b.add_binary(TensorOpKind::Add, y, bias, {32, 32}, TestLoc(3));
  b.set_outputs({b.add_unary(TensorOpKind::Relu, z, {32, 32}, TestLoc(4))});
  return b.finish();
}

/// Slices, a transpose, a broadcast dim, a reshape and an assemble into a view.
TensorGraph ViewsGraph() {
  TensorGraphBuilder b("views");
  int x = b.add_param("x", {Expr(12), Expr(40)}, DataType::FP32);
  int out = b.add_param("out", {Expr(8), Expr(40)}, DataType::FP32);
  int s = b.add_view(x, {Expr(8), Expr(32)}, {Expr(2), Expr(5)}, {0, 1}, {1, 1}, {}, TestLoc(2));
  int y = b.add_elementwise(TensorOpKind::Mul, {Operand::tensor(s), Operand::scalar(2.0, false)}, {4, 16}, TestLoc(3));
  int t = b.add_view(x, {Expr(40), Expr(12)}, {Expr(0), Expr(0)}, {1, 0}, {1, 1}, {}, TestLoc(4));
  int z = b.add_elementwise(TensorOpKind::Add, {Operand::scalar(1.5, true), Operand::tensor(t)}, {8, 4}, TestLoc(5));
  int st = b.add_view(x, {Expr(4), Expr(1), Expr(3)}, {Expr(0), Expr(1)}, {0, -1, 1}, {3, 0, 2}, {}, TestLoc(6));
  int w = b.add_unary(TensorOpKind::Exp, st, {4, 1, 4}, TestLoc(7));
  int r = b.add_reshape(x, {Expr(24), Expr(20)}, TestLoc(8));
  int q = b.add_unary(TensorOpKind::Neg, r, {8, 8}, TestLoc(9));
  int dst = b.add_view(out, {Expr(4), Expr(40)}, {Expr(4), Expr(0)}, {0, 1}, {1, 1}, {}, TestLoc(10));
  int src = b.add_view(x, {Expr(4), Expr(40)}, {Expr(0), Expr(0)}, {0, 1}, {1, 1}, {}, TestLoc(11));
  b.add_assemble(src, dst, {4, 8}, TestLoc(12));
  b.set_outputs({y, z, w, q});
  return b.finish();
}

/// A loop over a dynamic batch with a condition on the index, casts,
/// comparisons, where, creation ops and reductions over several dims.
TensorGraph ControlGraph() {
  TensorGraphBuilder b("control");
  b.add_dyn_dim("B");
  int x = b.add_param("x", {Expr::var("B"), Expr(16)}, DataType::FP32);
  int out = b.add_param("out", {Expr::var("B"), Expr(16)}, DataType::FP32);
  Expr i = Expr::var("i");
  b.begin_loop("i", Expr(0), Expr::var("B"), Expr(1), TestLoc(2));
  int row = b.add_view(x, {Expr(1), Expr(16)}, {i, Expr(0)}, {0, 1}, {1, 1}, {}, TestLoc(3));
  int dst = b.add_view(out, {Expr(1), Expr(16)}, {i, Expr(0)}, {0, 1}, {1, 1}, {}, TestLoc(4));
  b.begin_if(cmp_eq(mod(i, Expr(2)), Expr(0)), TestLoc(5));
  int e = b.add_elementwise(TensorOpKind::Mul, {Operand::tensor(row), Operand::symbolic(i + Expr(1))}, {1, 16}, TestLoc(6));
  b.add_assemble(e, dst, {1, 16}, TestLoc(7));
  b.begin_else();
  int m = b.add_reduce(TensorOpKind::Amax, row, -1, true, {1, 16}, TestLoc(8));
  int d = b.add_binary(TensorOpKind::Sub, row, m, {1, 16}, TestLoc(9));
  b.add_assemble(d, dst, {1, 16}, TestLoc(10));
  b.end_if();
  b.end_loop();
  int h = b.add_cast(x, DataType::FP16, {8, 16}, TestLoc(11));
  int gt = b.add_elementwise(TensorOpKind::Gt, {Operand::tensor(x), Operand::scalar(0.0, true)}, {8, 16}, TestLoc(12));
  int f = b.add_full({Expr::var("B"), Expr(16)}, Operand::scalar(-1e-06, true), DataType::FP32, {}, {8, 16}, TestLoc(13));
  int wh = b.add_elementwise(TensorOpKind::Where, {Operand::tensor(gt), Operand::tensor(x), Operand::tensor(f)}, {8, 16},
                             TestLoc(14));
  int ar = b.add_arange(Expr(24), 0.5, 0.25, DataType::FP32, {8}, TestLoc(15));
  int ar2 = b.add_elementwise(TensorOpKind::Mul, {Operand::tensor(ar), Operand::scalar(3.0, false)}, {8}, TestLoc(16));
  int big = b.add_param("big", {Expr(4), Expr(6), Expr(8)}, DataType::FP32);
  int red = b.add_reduce(TensorOpKind::Sum, big, std::vector<int>{0, 2}, false, {2, 2, 8}, TestLoc(17));
  int mx = b.add_full({Expr(2), Expr(3)}, Operand::scalar(-std::numeric_limits<double>::infinity(), true),
                      DataType::FP32, {}, {2, 3}, TestLoc(18));
  int mx2 = b.add_elementwise(TensorOpKind::Max, {Operand::tensor(mx), Operand::scalar(2.5, true)}, {2, 3}, TestLoc(19));
  b.set_outputs({h, wh, ar2, red, mx2});
  return b.finish();
}

TensorGraph GatherScatterGraph() {
  TensorGraphBuilder b("gs");
  int x = b.add_param("x", {Expr(8), Expr(16)}, DataType::FP32);
  int idx = b.add_param("idx", {Expr(8), Expr(4)}, DataType::INT64);
  int src = b.add_param("src", {Expr(8), Expr(4)}, DataType::FP32);
  int g = b.add_gather(x, 1, idx, {4, 4}, TestLoc(2));
  int o = b.add_full({Expr(8), Expr(16)}, Operand::scalar(0, true), DataType::FP32, {}, {4, 16}, TestLoc(3));
  b.add_scatter(o, 1, idx, src, ScatterReduce::None, {4, 4}, TestLoc(4));
  int acc = b.add_full({Expr(8), Expr(16)}, Operand::scalar(1, true), DataType::FP32, {}, {4, 16}, TestLoc(5));
  b.add_scatter(acc, 1, idx, src, ScatterReduce::Add, {4, 4}, TestLoc(6));
  b.add_scatter(acc, 1, idx, src, ScatterReduce::Multiply, {4, 4}, TestLoc(7));
  b.set_outputs({g, o, acc});
  return b.finish();
}

std::vector<std::pair<std::string, std::string>> CompiledPrograms() {
  PassOptions unfused;
  unfused.fusion = false;
  return {
      {"softmax", Pto(testing::SoftmaxGraph(64, 1024))},
      {"softmax_tail", Pto(testing::SoftmaxGraph(50, 100))},
      {"softmax_unfused", Pto(testing::SoftmaxGraph(64, 96), unfused)},
      {"add_dyn", Pto(DynamicAddGraph())},
      {"dyn_cols", Pto(testing::DynamicColsGraph())},
      {"matmul", Pto(MatmulGraph())},
      {"views", Pto(ViewsGraph())},
      {"control", Pto(ControlGraph())},
      {"gather_scatter", Pto(GatherScatterGraph())},
      {"index_add", Pto(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 16}))},
      {"index_add_dyn", Pto(testing::IndexAddGraph(Expr::var("M"), Expr::var("T"), 16, {16, 16}))},
  };
}

TEST(PtoParserTest, RoundTripsCompiledPrograms) {
  for (const auto& [name, text] : CompiledPrograms()) {
    SCOPED_TRACE(name);
    ExpectRoundTrip(text);
    // The parsed graph is a valid Execution Graph (its parameters bind memrefs of their own).
    EXPECT_NO_THROW(verify(parse_pto(text)));
  }
}

TEST(PtoParserTest, ParsedProgramsKeepTheirStructure) {
  ExecutionGraph g = parse_pto(Pto(testing::SoftmaxGraph(64, 1024)));
  EXPECT_EQ(g.name, "softmax");
  EXPECT_TRUE(g.module.empty());  // the same as the entry
  ASSERT_EQ(g.functions.size(), 1u);
  const InCoreFunction& f = g.functions[0];
  EXPECT_EQ(f.name, "softmax_fused_0");
  EXPECT_EQ(f.fused_ops, (std::vector<std::string>{"amax_0", "sub_1", "exp_2", "sum_3", "div_4"}));
  EXPECT_GT(f.buffer_bytes, 0);
  ASSERT_EQ(f.params.size(), 2u);
  EXPECT_FALSE(f.params[0].is_output);
  EXPECT_TRUE(f.params[1].is_output);
  EXPECT_EQ(g.memrefs.at(f.params[1].memref).kind, MemKind::Output);
  EXPECT_EQ(f.scalar_params, (std::vector<std::string>{"g0"}));
  EXPECT_EQ(testing::OpcodeString(f.body).substr(0, 22), "tfill tload trowmax tm");
  ASSERT_EQ(g.params.size(), 1u);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.memrefs.at(g.params[0]).name, "x");
  EXPECT_EQ(g.memrefs.at(g.params[0]).kind, MemKind::Input);
  std::vector<const Loop*> loops = testing::LoopsOf(g.orchestration);
  ASSERT_EQ(loops.size(), 1u);
  EXPECT_TRUE(loops[0]->parallel);
  EXPECT_EQ(loops[0]->dim, 0);
  EXPECT_EQ(loops[0]->tile, 32);
  const Call& c = std::get<Call>(loops[0]->body.at(0).node);
  EXPECT_EQ(c.callee, 0);
  ASSERT_EQ(c.args.size(), 2u);
  EXPECT_EQ(c.args[0].memref, g.params[0]);
  EXPECT_EQ(c.args[0].offsets[0].str(), "(g0 * 32)");
  EXPECT_EQ(c.scalars.at(0).str(), "g0");
}

TEST(PtoParserTest, ViewsAndDynamicDimsAreDeclared) {
  ExecutionGraph g = parse_pto(Pto(ViewsGraph()));
  int views = 0, reshapes = 0;
  for (const MemRef& m : g.memrefs) {
    if (m.kind != MemKind::View) continue;
    ASSERT_TRUE(m.view.has_value());
    ++views;
    reshapes += m.view->reshape;
    EXPECT_EQ(g.memrefs.at(m.view->base).name, m.name == "v10" ? "out" : "x") << m.name;
    if (m.name == "v6") {
      EXPECT_EQ(m.view->map, (std::vector<int>{0, -1, 1}));
      EXPECT_EQ(m.view->steps, (std::vector<int64_t>{3, 0, 2}));
      EXPECT_EQ(m.view->offsets.at(1).str(), "1");
    }
  }
  EXPECT_EQ(views, 6);
  EXPECT_EQ(reshapes, 1);

  std::string dyn = Pto(DynamicAddGraph());
  EXPECT_NE(dyn.find("!pto.memref<gm,(M)x64,f32>"), std::string::npos) << dyn;
  ExecutionGraph d = parse_pto(dyn);
  EXPECT_EQ(d.dyn_dims, (std::vector<std::string>{"M"}));
  EXPECT_TRUE(d.memrefs.at(d.params[0]).shape[0].is_var());
}

TEST(PtoParserTest, ExpressionsKeepTheirPrintedForm) {
  // (0 + x) and (x * 1) would simplify away through the Expr operators.
  std::string text = Pto(testing::AddGraph({Expr(64), Expr(64)}));
  std::string odd = text;
  std::string from = "(g0 * 32)";
  size_t at = odd.find(from);
  ASSERT_NE(at, std::string::npos);
  odd.replace(at, from.size(), "(((0 + g0) * 1) * min(32, max(-3, (g1 // 2))))");
  ExpectRoundTrip(odd);
}

TEST(PtoParserTest, RoundTripsLoopRangesModuleNamesAndScalarTypes) {
  const std::string text =
      "module @my_module entry @main\n"
      "\n"
      "incore func @k_32(%a: !pto.memref<gm,32x8,f32>, %o: !pto.memref<gm,32x8,f32> out, %r: index) buffer_bytes=128 {\n"
      "  %t0 = alloc_tile : !pto.tile<32x8xf32>\n"
      "  %t0 = tload %a[0, 0] valid [min(32, r), 8] : !pto.tile<32x8xf32>\n"
      "  tstore %t0, %o[0, 0] valid [min(32, r), 8]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,(n)x8,f32>, %y: !pto.memref<gm,(n)x8,f32> out) {\n"
      "  %n = alloc_scalar : i32\n"
      "  %m = alloc_scalar : i64\n"
      "  FOR %b:idx, 0:idx, ((n + 31) // 32):idx, 1:idx max_range=4096 min_range=32 tile_levels={4096:64,256:64,0:32}"
      " parallel dim=0 tile=32\n"
      "    IF ((b < m) && (n != 0))\n"
      "      CALL @k_32(%a -> %x[(b * 32), 0; min(32, (n - (b * 32))), 8], %o -> %y[(b * 32), 0; "
      "min(32, (n - (b * 32))), 8], %r -> (n - (b * 32)))\n"
      "    ENDIF\n"
      "  ENDFOR\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  ExecutionGraph g = parse_pto(text);
  EXPECT_EQ(g.module, "my_module");
  EXPECT_EQ(g.name, "main");
  EXPECT_EQ(g.scalar_dtypes.at("n"), DataType::INT32);
  EXPECT_EQ(g.scalar_dtypes.count("m"), 0u);
  const Loop& l = std::get<Loop>(g.orchestration.at(0).node);
  ASSERT_TRUE(l.range.has_value());
  EXPECT_EQ(l.range->max_range, 4096);
  EXPECT_EQ(l.range->min_range, 32);
  EXPECT_EQ(l.range->tile_levels, (std::map<int64_t, int64_t>{{0, 32}, {256, 64}, {4096, 64}}));
}

TEST(PtoParserTest, RoundTripsEveryInstructionForm) {
  const std::string text =
      "module @ops entry @ops\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,4x8,f32>, %i: !pto.memref<gm,4x8,i64>, %o: !pto.memref<gm,4x8,f32> out, %M: index) buffer_bytes=0 {\n"
      "  %l = alloc_local : !pto.memref<local,4x(M),f32>\n"
      "  %t0 = alloc_tile : !pto.tile<4x8xf32>\n"
      "  %t1 = alloc_tile : !pto.tile<4x8xf32>\n"
      "  %t2 = alloc_tile : !pto.tile<4x8xi32>\n"
      "  %t3 = alloc_tile : !pto.tile<4x1xf32>\n"
      "  %t4 = alloc_tile : !pto.tile<32xf32>\n"
      "  %t5 = alloc_tile : !pto.tile<4x2x8xf32>\n"
      "  %t6 = alloc_tile : !pto.tile<4x8xi64>\n"
      "  %t0 = tload %a[0, 0] valid [4, 8] : !pto.tile<4x8xf32>\n"
      "  %t6 = tload %i[0, 0] : !pto.tile<4x8xi64>\n"
      "  %t0 = tfill -inf : !pto.tile<4x8xf32>\n"
      "  %t0 = tfill nan : !pto.tile<4x8xf32>\n"
      "  %t0 = tfill 1e-06 : !pto.tile<4x8xf32>\n"
      "  %t0 = tfill -3.4028234663852886e+38 : !pto.tile<4x8xf32>\n"
      "  %t0 = tfill (M * 2) : !pto.tile<4x8xf32>\n"
      "  %t0 = tfill 123456789012345678 : !pto.tile<4x8xf32>\n"
      "  %t1 = tmuls 0.5, %t0 : !pto.tile<4x8xf32>\n"
      "  %t1 = tadds %t0, M : !pto.tile<4x8xf32>\n"
      "  %t1 = tsubs %t0, -2 : !pto.tile<4x8xf32>\n"
      "  %t1 = tselects %t2, %t0, 0 : !pto.tile<4x8xf32>\n"
      "  %t1 = tselect %t2, %t0, %t1 : !pto.tile<4x8xf32>\n"
      "  %t2 = tcmpges %t0, inf : !pto.tile<4x8xi32>\n"
      "  %t2 = tcast %t0 to=i8 : !pto.tile<4x8xi32>\n"
      "  %t3 = trowsum %t0 valid [4, min(8, M)] : !pto.tile<4x1xf32>\n"
      "  %t3 = tredmax %t5 axis=1 valid [4, 2, 8] : !pto.tile<4x1xf32>\n"
      "  %t1 = trowexpanddiv %t0, %t3 : !pto.tile<4x8xf32>\n"
      "  %t1 = tmatmul_acc %t1, %t0, %t0 : !pto.tile<4x8xf32>\n"
      "  %t4 = tarange 0.5, 0.25, (M * 32) : !pto.tile<32xf32>\n"
      "  %t4 = tarange -inf, 1, 0 : !pto.tile<32xf32>\n"
      "  %t0 = tgather %a[0, 0], %t6 axis=1 valid [4, 8] : !pto.tile<4x8xf32>\n"
      "  tscatter %t0, %o[0, 0], %t6 axis=1 valid [4, 8]\n"
      "  tstore %t1, %l[0, (M - 8)]\n"
      "  tstore %t1, %o[0, 0] valid [4, 8]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @ops(%x: !pto.memref<gm,4x8,f32>, %ix: !pto.memref<gm,4x8,i64>, %y: !pto.memref<gm,4x8,f32> out) {\n"
      "  %M = alloc_scalar : i64\n"
      "  CALL @k(%a -> %x[0, 0; 4, 8], %i -> %ix[0, 0; 4, 8], %o -> %y[0, 0; 4, 8], %M -> M)\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  ExecutionGraph g = parse_pto(text);
  std::vector<const Instr*> ins = testing::InstrsOf(g.functions.at(0).body);
  ASSERT_EQ(ins.size(), 25u);
  EXPECT_FALSE(ins.at(4)->scalar_expr.has_value());  // 1e-06
  EXPECT_DOUBLE_EQ(ins.at(4)->scalar, 1e-06);
  EXPECT_EQ(ins.at(6)->scalar_expr->str(), "(M * 2)");
  EXPECT_EQ(ins.at(7)->scalar_expr->str(), "123456789012345678");  // no double prints it back
  EXPECT_EQ(ins.at(8)->scalar_pos, 0);
  EXPECT_EQ(ins.at(8)->srcs.size(), 1u);
  EXPECT_EQ(ins.at(9)->scalar_expr->str(), "M");
  EXPECT_EQ(ins.at(11)->scalar_pos, 2);
  EXPECT_EQ(ins.at(11)->srcs.size(), 2u);
  EXPECT_EQ(ins.at(14)->round_to, DataType::INT8);
  EXPECT_EQ(ins.at(16)->axis, 1);
  EXPECT_EQ(ins.at(18)->srcs.size(), 3u);
  EXPECT_EQ(ins.at(19)->step, 0.25);
  EXPECT_EQ(ins.at(21)->op, Opcode::TGATHER);
  EXPECT_EQ(ins.at(22)->srcs.size(), 2u);  // index, then the scattered tile
  EXPECT_EQ(g.functions[0].locals.size(), 1u);
  EXPECT_EQ(g.memrefs.at(g.functions[0].locals[0]).kind, MemKind::Local);
}

// ---------------------------------------------------------------- seed forms

const char* kSeed =
    "// A hand-written program\n"
    "// Function Type: InCore\n"
    "func @rowmax(%input: !pto.memref<gm,8x8xf32>, %output: !pto.memref<gm,8x1xf32> out) {\n"
    "\n"
    "  // load, reduce, store\n"
    "  %x = tload %input[0, 0] : (!pto.memref) -> !pto.tile<8x8xf32>\n"
    "  %result = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>\n"
    "  tstore %result, %output[0, 0]\n"
    "  return\n"
    "}\n"
    "\n"
    "// Function Type: Orchestration\n"
    "func @main(%input: !pto.memref<gm,8x8,f32>, %output: !pto.memref<gm,8x1,f32> out, %n: index) {\n"
    "  %temp_max = alloc_workspace : !pto.memref<gm,8x1,f32>\n"
    "  FOR %i:idx, 0:idx, %n:idx, 1:idx\n"
    "    CALL @rowmax(%input -> %input, %output -> %temp_max)  // no regions\n"
    "  ENDFOR\n"
    "  return\n"
    "}\n";

TEST(PtoParserTest, AcceptsSeedForms) {
  ExecutionGraph g = parse_pto(kSeed);
  EXPECT_EQ(g.name, "main");
  ASSERT_EQ(g.functions.size(), 1u);
  const InCoreFunction& f = g.functions[0];
  ASSERT_EQ(f.tiles.size(), 2u);  // declared by their definitions
  EXPECT_EQ(f.tiles[0].name, "x");
  EXPECT_EQ(f.tiles[1].shape, (std::vector<int64_t>{8, 1}));
  std::vector<const Instr*> ins = testing::InstrsOf(f.body);
  ASSERT_EQ(ins.size(), 3u);
  EXPECT_EQ(ins[1]->op, Opcode::TROWMAX);
  EXPECT_EQ(ins[1]->dst, 1);
  EXPECT_EQ(ins[1]->srcs, (std::vector<int>{0}));
  EXPECT_TRUE(ins[2]->valid.empty());
  EXPECT_EQ(g.dyn_dims, (std::vector<std::string>{"n"}));
  const Loop& l = std::get<Loop>(g.orchestration.at(0).node);
  EXPECT_EQ(l.var, "i");
  EXPECT_EQ(l.stop.str(), "n");
  const Call& c = std::get<Call>(l.body.at(0).node);
  ASSERT_EQ(c.args.size(), 2u);
  EXPECT_EQ(g.memrefs.at(c.args[1].memref).name, "temp_max");
  EXPECT_EQ(c.args[1].offsets.size(), 2u);
  EXPECT_EQ(c.args[1].offsets[0].str(), "0");
  EXPECT_EQ(c.args[1].extents[0].str(), "8");
  EXPECT_EQ(c.args[1].extents[1].str(), "1");
  // Its printed form is canonical .pto, and round-trips.
  std::string canonical = print_pto(g);
  EXPECT_NE(canonical.find("%x = alloc_tile : !pto.tile<8x8xf32>"), std::string::npos) << canonical;
  EXPECT_NE(canonical.find("CALL @rowmax(%input -> %input[0, 0; 8, 8], %output -> %temp_max[0, 0; 8, 1])"),
            std::string::npos)
      << canonical;
  ExpectRoundTrip(canonical);
}

TEST(PtoParserTest, AnUninitialisedWorkspaceIsPrintedAndParsed) {
  std::string text = kSeed;
  const std::string plain = "%temp_max = alloc_workspace : ";
  text.replace(text.find(plain), plain.size(), "%temp_max = alloc_workspace uninit : ");
  ExecutionGraph g = parse_pto(text);
  const MemRef& m = g.memrefs.at(g.memrefs.size() - 1);
  ASSERT_EQ(m.name, "temp_max");
  EXPECT_FALSE(m.zeroed);
  std::string canonical = print_pto(g);
  EXPECT_NE(canonical.find("%temp_max = alloc_workspace uninit : !pto.memref<gm,8x1,f32>"), std::string::npos)
      << canonical;
  ExpectRoundTrip(canonical);
  EXPECT_TRUE(parse_pto(kSeed).memrefs.back().zeroed);
}

TEST(PtoParserTest, AcceptsBlankLinesCommentsAndCarriageReturns) {
  std::string text = Pto(testing::AddGraph({Expr(64), Expr(64)}));
  std::string noisy;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    noisy += "\n   // a note\n\t\n" + text.substr(start, nl - start) + "\r\n";
    start = nl + 1;
  }
  EXPECT_EQ(print_pto(parse_pto(noisy)), text);
}

// ---------------------------------------------------------------- malformed input

const std::string kBase =
    "module @m entry @main\n"
    "\n"
    "incore func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out, %g0: index) buffer_bytes=256 fused=[add_0] {\n"
    "  %t0 = alloc_tile : !pto.tile<8x8xf32>\n"
    "  %t1 = alloc_tile : !pto.tile<8x8xf32>\n"
    "  %t0 = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>\n"
    "  %t1 = tadds %t0, 1 : !pto.tile<8x8xf32>\n"
    "  tstore %t1, %o[0, 0] valid [8, 8]\n"
    "  return\n"
    "}\n"
    "\n"
    "orchestration func @main(%x: !pto.memref<gm,16x8,f32>, %y: !pto.memref<gm,16x8,f32> out) {\n"
    "  FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=8\n"
    "    CALL @k(%a -> %x[(g0 * 8), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)\n"
    "  ENDFOR\n"
    "  return\n"
    "}\n";

TEST(PtoParserTest, TheBaseOfTheErrorCasesIsValid) { ExpectRoundTrip(kBase); }

// view(x, dtype=) becomes a reshape memref of another element type (a bitcast of the same bytes).
TEST(PtoParserTest, AReshapeMayReadItsBaseAsAnotherType) {
  std::string text = kBase;
  text.replace(text.find("  FOR %g0"), 0, "  %v = reshape %x : !pto.memref<gm,16x16,f16>\n");
  ExecutionGraph g = parse_pto(text);
  bool found = false;
  for (const MemRef& m : g.memrefs) {
    if (m.name != "v") continue;
    found = true;
    EXPECT_EQ(m.dtype, DataType::FP16);
    ASSERT_TRUE(m.view.has_value());
    EXPECT_TRUE(m.view->reshape);
    EXPECT_EQ(g.memrefs[m.view->base].dtype, DataType::FP32);
  }
  EXPECT_TRUE(found);
}

// The comment form of the module line, function kinds, buffer bytes, fused lists and parallel notes
// (deprecated, docs/pto.md) reads as the same program.
const std::string kBaseCommentForm =
    "// PTO Module: m\n"
    "// Entry: @main\n"
    "\n"
    "// Function Type: InCore\n"
    "// Buffer bytes: 256\n"
    "// Fused: add_0\n"
    "func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out, %g0: index) {\n"
    "  %t0 = alloc_tile : !pto.tile<8x8xf32>\n"
    "  %t1 = alloc_tile : !pto.tile<8x8xf32>\n"
    "  %t0 = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>\n"
    "  %t1 = tadds %t0, 1 : !pto.tile<8x8xf32>\n"
    "  tstore %t1, %o[0, 0] valid [8, 8]\n"
    "  return\n"
    "}\n"
    "\n"
    "// Function Type: Orchestration\n"
    "func @main(%x: !pto.memref<gm,16x8,f32>, %y: !pto.memref<gm,16x8,f32> out) {\n"
    "  FOR %g0:idx, 0:idx, 2:idx, 1:idx  // parallel dim=0 tile=8\n"
    "    CALL @k(%a -> %x[(g0 * 8), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)\n"
    "  ENDFOR\n"
    "  return\n"
    "}\n";

TEST(PtoParserTest, TheOlderCommentFormReadsAsTheSameProgram) {
  EXPECT_EQ(print_pto(parse_pto(kBaseCommentForm)), kBase);
  // Without a kind, the entry's function is the orchestration.
  auto drop = [](std::string t, const std::string& word) { return t.erase(t.find(word), word.size()); };
  std::string no_kinds = drop(drop(kBase, "incore "), "orchestration ");
  EXPECT_EQ(print_pto(parse_pto(no_kinds)), kBase);
  ExecutionGraph g = parse_pto(kBaseCommentForm);
  EXPECT_EQ(g.functions.at(0).buffer_bytes, 256);
  EXPECT_EQ(g.functions.at(0).fused_ops, std::vector<std::string>{"add_0"});
}

TEST(PtoParserTest, FusedNamesThatAreNotNamesAreQuoted) {
  ExecutionGraph g = parse_pto(kBase);
  g.functions.at(0).fused_ops = {"add_0", "my op", "x.y", "say \"hi\""};
  std::string text = print_pto(g);
  EXPECT_NE(text.find("fused=[add_0, \"my op\", x.y, \"say 'hi'\"]"), std::string::npos) << text;
  EXPECT_EQ(parse_pto(text).functions.at(0).fused_ops,
            (std::vector<std::string>{"add_0", "my op", "x.y", "say 'hi'"}));
}

/// kBase with `from` replaced by `to`; `to` marks the expected error position with '$'.
struct BadCase {
  const char* name;
  std::string from, to;
  const char* message;  ///< a part of the expected message
};

std::string Replace(const std::string& text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("test setup: '" + from + "' not in the base text");
  return text.substr(0, at) + to + text.substr(at + from.size());
}

/// Parses `text`, which must fail the verifier with a message containing `message`.
void ExpectVerifyError(const std::string& text, const std::string& message) {
  try {
    verify(parse_pto(text));
    ADD_FAILURE() << "verified:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

/// Parses `marked` (with one '$' at the expected error position) and checks the error.
void ExpectSyntaxError(const std::string& marked, const std::string& message, const std::string& name) {
  size_t at = marked.find('$');
  ASSERT_NE(at, std::string::npos) << name << ": no '$' marker";
  std::string text = marked.substr(0, at) + marked.substr(at + 1);
  int line = 1, column = 1;
  for (size_t i = 0; i < at; ++i) {
    if (marked[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  try {
    parse_pto(text);
    ADD_FAILURE() << name << ": parsed without error";
  } catch (const PtoSyntaxError& e) {
    EXPECT_EQ(e.line(), line) << name << ": " << e.what();
    EXPECT_EQ(e.column(), column) << name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << name << ": " << e.what();
    EXPECT_EQ(std::string(e.what()).find("internal"), std::string::npos) << name << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": threw something else: " << e.what();
  }
}

TEST(PtoParserTest, MalformedInputsReportLineAndColumn) {
  const std::string tadds = "%t1 = tadds %t0, 1 : !pto.tile<8x8xf32>";
  const std::string call = "CALL @k(%a -> %x[(g0 * 8), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)";
  const std::vector<BadCase> cases = {
      {"unknown instruction", tadds, "%t1 = $tfoo %t0, 1 : !pto.tile<8x8xf32>", "unknown instruction 'tfoo'"},
      {"unknown tile", tadds, "%t1 = tadds $%t9, 1 : !pto.tile<8x8xf32>", "unknown tile %t9"},
      {"unknown memref", "tload %a[0, 0]", "tload $%zz[0, 0]", "unknown memref %zz"},
      {"missing ENDFOR", "  ENDFOR\n  return\n}\n", "  $return\n}\n", "expected ENDFOR for the FOR at line 13"},
      {"ENDFOR without FOR", "  return\n}\n\norchestration func", "  $ENDFOR\n  return\n}\n\norchestration func",
       "ENDFOR without a matching FOR"},
      {"ENDIF closes a FOR", "  ENDFOR\n", "  $ENDIF\n", "ENDIF closes the FOR at line 13"},
      {"ELSE without IF", "  ENDFOR\n", "  ENDFOR\n  $ELSE\n", "ELSE without IF"},
      {"unknown dtype", "%t0 = alloc_tile : !pto.tile<8x8xf32>", "%t0 = alloc_tile : !pto.tile<8x8x$f33>", "unknown dtype 'f33'"},
      {"type mismatch", tadds, "%t1 = tadds %t0, 1 : $!pto.tile<8x4xf32>", "does not match tile %t1"},
      {"bad tile dim", "%t1 = alloc_tile : !pto.tile<8x8xf32>", "%t1 = alloc_tile : !pto.tile<$ax8xf32>", "expected a tile dim"},
      {"bad memory space", "%a: !pto.memref<gm,8x8,f32>", "%a: !pto.memref<$lm,8x8,f32>", "memory space gm or local"},
      {"unparenthesized symbolic dim", "%a: !pto.memref<gm,8x8,f32>", "%a: !pto.memref<gm,$Mx8,f32>",
       "expected a memref dim"},
      {"bad number", tadds, "%t1 = tadds %t0, $1.5.3 : !pto.tile<8x8xf32>", "malformed number"},
      {"number out of range", tadds, "%t1 = tadds %t0, $1e999 : !pto.tile<8x8xf32>", "out of range"},
      {"integer out of range", "valid [8, 8] :", "valid [$99999999999999999999, 8] :", "integer 99999999999999999999 is out of range"},
      {"unbalanced parens", call, "CALL @k(%a -> %x[(g0 * 8$, 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)",
       "expected ')' to close the '(' at column 22"},
      {"extra paren", call, "CALL @k(%a -> %x[(g0 * 8)$), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)", "expected ';'"},
      {"missing operator", call, "CALL @k(%a -> %x[(g0 $8), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)",
       "expected an operator"},
      {"duplicate tile", "  %t1 = alloc_tile", "  $%t0 = alloc_tile", "tile %t0 is declared twice"},
      {"duplicate parameter", "%o: !pto.memref<gm,8x8,f32> out", "$%a: !pto.memref<gm,8x8,f32> out", "parameter %a is declared twice"},
      {"duplicate function", "\norchestration func", "\nincore func $@k() {\n}\n\norchestration func",
       "function @k is defined twice"},
      {"call to unknown function", "CALL @k(", "CALL $@kk(", "call to unknown function @kk"},
      {"too few arguments", ", %g0 -> g0)", "$)", "@k takes 3 arguments, 2 given"},
      {"too many arguments", ", %g0 -> g0)", ", %g0 -> g0, $%g1 -> 1)", "too many arguments: @k takes 3"},
      {"wrong argument name", "CALL @k(%a", "CALL @k($%b", "argument 1 of @k is %a, found %b"},
      {"unknown memref in CALL", "%o -> %y[", "%o -> $%z[", "unknown memref %z"},
      {"region of the wrong rank", "%o -> %y[(g0 * 8), 0; 8, 8]", "%o -> %y$[0; 8]", "has rank 2"},
      {"CALL in an InCore function", "  return\n}\n\norchestration func", "  $CALL @k()\n  return\n}\n\norchestration func",
       "CALL' in InCore function @k"},
      {"instruction in the orchestration", "  ENDFOR\n", "  ENDFOR\n  %t = $tload %x[0, 0] : !pto.tile<8x8xf32>\n",
       "only in InCore functions"},
      {"missing closing brace", "  return\n}\n\norchestration func",
       "  return\n\n$orchestration func", "expected '}' after 'return', found 'orchestration'"},
      {"missing ':' before the type", tadds, "%t1 = tadds %t0, 1$", "expected ':' and the result type"},
      {"offsets of the wrong rank", "tload %a[0, 0]", "tload %a$[0]", "1 offsets for %a of rank 2"},
      {"constant without the s form", tadds, "%t1 = tadd %t0, $1 : !pto.tile<8x8xf32>", "constant operands need 'tadds'"},
      {"two constants", tadds, "%t1 = tadds 2, $1 : !pto.tile<8x8xf32>", "second constant operand"},
      {"s form without a constant", tadds, "%t1 = $tadds %t0, %t0 : !pto.tile<8x8xf32>", "needs a constant operand"},
      {"too many operands", tadds, "%t1 = tadds %t0, 1$, 2 : !pto.tile<8x8xf32>", "too many operands: tadds takes 2"},
      {"malformed parallel note", "dim=0 tile=8", "dim=$x tile=8", "expected the loop's dim"},
      {"valid given twice", "valid [8, 8] :", "valid [8, 8] $valid [8, 8] :", "valid given twice"},
      {"no destination", tadds, "$tadds %t0, 1", "needs a destination"},
      {"destination on tstore", "  tstore %t1", "  %t2 = $tstore %t1", "'tstore' has no destination"},
      {"unknown function kind", "incore func @k", "$kernel func @k",
       "expected 'module', 'func', 'incore func', 'orchestration func' or a comment, found 'kernel'"},
      {"func missing after the kind", "incore func @k", "incore $fn @k", "found 'fn'"},
      {"module without entry", "module @m entry @main", "module @m $@main", "expected 'entry @<function>'"},
      {"buffer_bytes twice", "buffer_bytes=256", "buffer_bytes=256 $buffer_bytes=1", "buffer_bytes given twice"},
      {"negative buffer_bytes", "buffer_bytes=256", "buffer_bytes=$-1", "negative buffer bytes"},
      {"buffer_bytes on the orchestration", "out) {\n  FOR", "out) $buffer_bytes=8 {\n  FOR",
       "buffer_bytes= belongs to InCore functions"},
      {"unclosed fused list", "fused=[add_0]", "fused=[add_0 ${", "expected ']' to close the fused list"},
      {"unterminated quoted fused name", "fused=[add_0]", "fused=[$\"add_0]", "unterminated quoted name"},
      {"kind against the comment", "incore func @k", "// Function Type: Orchestration\n$incore func @k",
       "disagrees with the '// Function Type:' comment"},
      {"text after the parallel note", "dim=0 tile=8\n", "dim=0 tile=8 $x\n", "at the end of the statement"},
      {"entry mismatch", "func @main(", "func $@main2(", "not the entry @main"},
      {"second module line", "module @m entry @main\n", "module @m entry @main\n$module @m entry @main\n",
       "a second module name"},
      {"entry comment after the module line", "module @m entry @main\n", "module @m entry @main\n$// Entry: @main\n",
       "a second entry"},
      {"FOR without a comma", "FOR %g0:idx, 0:idx,", "FOR %g0:idx $0:idx,", "expected ',' after the loop variable"},
      {"bad idx suffix", "FOR %g0:idx, 0:idx,", "FOR %g0:idx, 0:$index,", "expected 'idx' after ':'"},
      {"workspace in an InCore function", "  %t1 = alloc_tile", "  %w = $alloc_workspace : !pto.memref<gm,8,f32>\n  %t1 = alloc_tile",
       "only in the orchestration"},
      {"local buffer in gm", "  %t1 = alloc_tile", "  %l = alloc_local : $!pto.memref<gm,8,f32>\n  %t1 = alloc_tile",
       "must have a local memref type"},
      {"view of an unknown memref", "  FOR %g0", "  %v = view $%q[0, 0] dims [0, 1] steps [1, 1] : !pto.memref<gm,8x8,f32>\n  FOR %g0",
       "unknown memref %q"},
      {"view dim out of range", "  FOR %g0", "  %v = view %x[0, 0] dims $[0, 2] steps [1, 1] : !pto.memref<gm,8x8,f32>\n  FOR %g0",
       "base dim 2 is not a dim of %x"},
      {"view dtype", "  FOR %g0", "  %v = view %x[0, 0] dims [0, 1] steps [1, 1] : $!pto.memref<gm,8x8,f16>\n  FOR %g0",
       "its base %x is f32"},
      {"control character", tadds, "%t1 = tadds %t0, 1 $\x01: !pto.tile<8x8xf32>", "expected ':' and the result type, found '\\x01'"},
      {"statement outside a function", "\norchestration func", "\n$tload\norchestration func",
       "expected 'module', 'func', 'incore func', 'orchestration func' or a comment"},
      {"negative axis", "valid [8, 8] :", "axis=$-1 valid [8, 8] :", "axis -1 is out of range"},
  };
  for (const BadCase& c : cases) {
    ExpectSyntaxError(Replace(kBase, c.from, c.to), c.message, c.name);
  }
  // Whole-text cases.
  ExpectSyntaxError(kBase.substr(0, kBase.size() - 2) + "\n$", "missing '}' at the end of func @main", "end of text");
  std::string incore_only = kBase.substr(0, kBase.find("\norchestration func")) + "\n$";
  ExpectSyntaxError(incore_only, "no orchestration function", "no orchestration");
  ExpectSyntaxError("$", "no orchestration function", "empty text");
  ExpectSyntaxError(Replace(kBase, "  ENDFOR\n  return\n}\n", "$"),
                    "expected ENDFOR for the FOR at line 13 before the end of the text", "open FOR at the end");
  ExpectSyntaxError(Replace(kBase, "  FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=8",
                            "  FOR %g0:idx, 0:idx, 2:idx, 1:idx max_range=8 tile_levels={8:2,$8:4}"),
                    "tile level 8 given twice", "duplicate tile level");
  ExpectSyntaxError(Replace(kBase, "  ENDFOR\n  return", "  ENDFOR\n  IF $\n  ENDIF\n  return"), "expected an expression",
                    "IF without a condition");
  ExpectSyntaxError(kBase + "\norchestration func $@main() {\n}\n",
                    "a second orchestration function @main", "second orchestration");
  EXPECT_GE(cases.size() + 8, 60u);
}

TEST(PtoParserTest, MatmulL0CubeTileRoundTripsAndIsChecked) {
  const std::string text =
      "module @mm entry @main\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,32x64,f32>, %b: !pto.memref<gm,64x32,f32>, %o: !pto.memref<gm,32x32,f32> out) buffer_bytes=0 {\n"
      "  %t0 = alloc_tile : !pto.tile<32x64xf32>\n"
      "  %t1 = alloc_tile : !pto.tile<64x32xf32>\n"
      "  %t2 = alloc_tile : !pto.tile<32x32xf32>\n"
      "  %t0 = tload %a[0, 0] : !pto.tile<32x64xf32>\n"
      "  %t1 = tload %b[0, 0] : !pto.tile<64x32xf32>\n"
      "  %t2 = tmatmul %t0, %t1 l0 [16, 32, 16] : !pto.tile<32x32xf32>\n"
      "  %t2 = tmatmul_acc %t2, %t0, %t1 l0 [8, 16, 32] : !pto.tile<32x32xf32>\n"
      "  tstore %t2, %o[0, 0]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,32x64,f32>, %y: !pto.memref<gm,64x32,f32>, %z: !pto.memref<gm,32x32,f32> out) {\n"
      "  CALL @k(%a -> %x[0, 0; 32, 64], %b -> %y[0, 0; 64, 32], %o -> %z[0, 0; 32, 32])\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  ExecutionGraph g = parse_pto(text);
  std::vector<const Instr*> ins = testing::InstrsOf(g.functions.at(0).body);
  EXPECT_EQ(ins.at(2)->l0, (std::vector<int64_t>{16, 32, 16}));
  EXPECT_EQ(ins.at(3)->l0, (std::vector<int64_t>{8, 16, 32}));
  const std::string mm = "%t2 = tmatmul %t0, %t1 l0 [16, 32, 16]";
  ExpectSyntaxError(Replace(text, mm, "%t2 = tmatmul %t0, %t1 l0 $[16, 32]"), "l0 takes 3 sizes (m, k, n), found 2",
                    "two l0 sizes");
  ExpectSyntaxError(Replace(text, mm, "%t2 = tmatmul %t0, %t1 l0 $[16, 0, 16]"), "l0 sizes must be positive integers",
                    "zero l0 size");
  ExpectSyntaxError(Replace(text, mm, "%t2 = tmatmul %t0, %t1 l0 $[16, M, 16]"), "l0 sizes must be positive integers",
                    "symbolic l0 size");
  ExpectSyntaxError(Replace(text, mm, "%t2 = tmatmul %t0, %t1 l0 [16, 32, 16] $l0 [8, 8, 8]"), "l0 given twice",
                    "l0 twice");
  // Sizes that do not divide the tile are a verifier error.
  ExecutionGraph bad = parse_pto(Replace(text, mm, "%t2 = tmatmul %t0, %t1 l0 [12, 32, 16]"));
  try {
    verify(bad);
    ADD_FAILURE() << "l0 [12, 32, 16] of a 32x64 @ 64x32 tile verified";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("must give 3 positive sizes dividing the tile's m, k, n (32, 64, 32)"),
              std::string::npos)
        << e.what();
  }
}

// A matmul's b may be a tile whose leading dims make K and trailing dims N (a conv's input rows,
// [1, channels, rows, width], read as [channels, rows * width]); other shapes are verifier errors.
TEST(PtoParserTest, AMatmulReadsAnNDimensionalBTileAsKByN) {
  const std::string text =
      "module @mm entry @main\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,4x3,f32>, %b: !pto.memref<gm,1x3x2x5,f32>, %o: !pto.memref<gm,4x10,f32> out) buffer_bytes=0 {\n"
      "  %t0 = alloc_tile : !pto.tile<4x3xf32>\n"
      "  %t1 = alloc_tile : !pto.tile<1x3x2x5xf32>\n"
      "  %t2 = alloc_tile : !pto.tile<4x10xf32>\n"
      "  %t0 = tload %a[0, 0] : !pto.tile<4x3xf32>\n"
      "  %t1 = tload %b[0, 0, 0, 0] : !pto.tile<1x3x2x5xf32>\n"
      "  %t2 = tmatmul %t0, %t1 : !pto.tile<4x10xf32>\n"
      "  %t2 = tmatmul_acc %t2, %t0, %t1 l0 [2, 3, 5] : !pto.tile<4x10xf32>\n"
      "  tstore %t2, %o[0, 0]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,4x3,f32>, %y: !pto.memref<gm,1x3x2x5,f32>, %z: !pto.memref<gm,4x10,f32> out) {\n"
      "  CALL @k(%a -> %x[0, 0; 4, 3], %b -> %y[0, 0, 0, 0; 1, 3, 2, 5], %o -> %z[0, 0; 4, 10])\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  verify(parse_pto(text));
  // [1, 3, 2, 5] is no [3, 8] nor [2, 10]: the dims must split into K and N.
  for (const auto& [a_shape, o_shape] : {std::pair<std::string, std::string>{"4x3", "4x8"}, {"4x2", "4x10"}}) {
    auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
      for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
      return s;
    };
    std::string bad = replace_all(replace_all(text, "!pto.tile<4x3xf32>", "!pto.tile<" + a_shape + "xf32>"),
                                  "!pto.tile<4x10xf32>", "!pto.tile<" + o_shape + "xf32>");
    try {
      verify(parse_pto(bad));
      ADD_FAILURE() << a_shape << " @ 1x3x2x5 -> " << o_shape << " verified";
    } catch (const VerifyError& e) {
      EXPECT_NE(std::string(e.what()).find("tiles do not form [M, K] @ [K, N] -> [M, N]"), std::string::npos)
          << e.what();
    }
  }
}

// A product of few rows reads its b as the [N, K] tile it is in memory (b_trans), bounded by its
// valid rows; both print and parse back, and b_trans takes an [N, K] b and no l0.
TEST(PtoParserTest, AMatmulWithBTransAndValidRowsRoundTrips) {
  const std::string text =
      "module @mm entry @main\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,4x3,f32>, %b: !pto.memref<gm,10x3,f32>, %o: !pto.memref<gm,4x10,f32> out, %M: index) buffer_bytes=0 {\n"
      "  %t0 = alloc_tile : !pto.tile<4x3xf32>\n"
      "  %t1 = alloc_tile : !pto.tile<10x3xf32>\n"
      "  %t2 = alloc_tile : !pto.tile<4x10xf32>\n"
      "  %t0 = tload %a[0, 0] valid [M, 3] : !pto.tile<4x3xf32>\n"
      "  %t1 = tload %b[0, 0] : !pto.tile<10x3xf32>\n"
      "  %t2 = tmatmul %t0, %t1 b_trans valid [M, 10] : !pto.tile<4x10xf32>\n"
      "  %t2 = tmatmul_acc %t2, %t0, %t1 b_trans valid [M, 10] : !pto.tile<4x10xf32>\n"
      "  tstore %t2, %o[0, 0] valid [M, 10]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,(M)x3,f32>, %y: !pto.memref<gm,10x3,f32>, %z: !pto.memref<gm,(M)x10,f32> out) {\n"
      "  %M = alloc_scalar : i64\n"
      "  CALL @k(%a -> %x[0, 0; M, 3], %b -> %y[0, 0; 10, 3], %o -> %z[0, 0; M, 10], %M -> M)\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  verify(parse_pto(text));
  const auto& fails = ExpectVerifyError;
  auto with = [&](const std::string& from, const std::string& to) { return Replace(text, from, to); };
  // A float product with b_trans may read a bf16 b; without b_trans the operands must agree.
  std::string bf16_b = text;
  for (const std::string from : {"!pto.memref<gm,10x3,f32>", "!pto.tile<10x3xf32>"})
    for (size_t at = bf16_b.find(from); at != std::string::npos; at = bf16_b.find(from, at + 1))
      bf16_b.replace(at, from.size(), from.substr(0, from.size() - 4) + "bf16>");
  ExpectRoundTrip(bf16_b);
  verify(parse_pto(bf16_b));
  std::string plain = bf16_b;
  for (size_t at = plain.find(" b_trans"); at != std::string::npos; at = plain.find(" b_trans")) plain.erase(at, 8);
  fails(plain, "tmatmul");
  fails(with("tmatmul %t0, %t1 b_trans", "tmatmul %t0, %t1 b_trans l0 [2, 3, 5]"),
        "tiles do not form [M, K] @ [N, K]^T -> [M, N] (b_trans takes no l0)");
  fails(with("tmatmul %t0, %t1 b_trans", "tmatmul %t0, %t1 b_trans b_trans"), "b_trans given twice");
  fails(with("tload %b[0, 0] : !pto.tile<10x3xf32>", "tload %b[0, 0] : !pto.tile<3x10xf32>")
            .replace(text.find("%t1 = alloc_tile : !pto.tile<10x3xf32>"), 38, "%t1 = alloc_tile : !pto.tile<3x10xf32>"),
        "tiles do not form [M, K] @ [N, K]^T -> [M, N]");
}

// A load may view a bf16 matmul operand with its source's row pitch (tload ... view strided): it
// prints and parses back; the flag needs `view`, and only the operands of a product of two bf16
// tiles may be read so.
TEST(PtoParserTest, AStridedViewOfABf16MatmulOperandRoundTrips) {
  const std::string text =
      "module @mm entry @main\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,16x64,bf16>, %b: !pto.memref<gm,64x16,bf16>, %o: !pto.memref<gm,16x16,f32> out) buffer_bytes=0 {\n"
      "  %t0 = alloc_tile : !pto.tile<16x32xbf16>\n"
      "  %t1 = alloc_tile : !pto.tile<32x16xbf16>\n"
      "  %t2 = alloc_tile : !pto.tile<16x16xf32>\n"
      "  %t0 = tload %a[0, 0] view strided : !pto.tile<16x32xbf16>\n"
      "  %t1 = tload %b[0, 0] view : !pto.tile<32x16xbf16>\n"
      "  %t2 = tmatmul %t0, %t1 : !pto.tile<16x16xf32>\n"
      "  tstore %t2, %o[0, 0]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,16x64,bf16>, %y: !pto.memref<gm,64x16,bf16>, %z: !pto.memref<gm,16x16,f32> out) {\n"
      "  CALL @k(%a -> %x[0, 0; 16, 64], %b -> %y[0, 0; 64, 16], %o -> %z[0, 0; 16, 16])\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  verify(parse_pto(text));
  const auto& fails = ExpectVerifyError;
  auto with = [&](const std::string& from, const std::string& to) { return Replace(text, from, to); };
  // Read by anything but a bf16 product: an elementwise op, or a product whose other tile is float.
  fails(with("  tstore %t2, %o[0, 0]\n", "  %t0 = tabs %t0 : !pto.tile<16x32xbf16>\n  tstore %t2, %o[0, 0]\n"),
        "which a load views strided");
  std::string float_b = with("%t1 = tload %b[0, 0] view : !pto.tile<32x16xbf16>", "%t1 = tload %b[0, 0] : !pto.tile<32x16xf32>");
  float_b.replace(float_b.find("%t1 = alloc_tile : !pto.tile<32x16xbf16>"), 40, "%t1 = alloc_tile : !pto.tile<32x16xf32>");
  EXPECT_THROW(verify(parse_pto(float_b)), Error);
}

// An int8 (or int16) matmul keeps its operands in their stored type: i8 loads (which may view
// memory) feed an i32 product; other mixes of dtypes are verifier errors.
TEST(PtoParserTest, AnInt8MatmulLoadsI8TilesForAnI32Product) {
  const std::string text =
      "module @m entry @main\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,8x16,i8>, %b: !pto.memref<gm,16x8,i8>, %o: !pto.memref<gm,8x8,i32> out) "
      "buffer_bytes=0 {\n"
      "  %t0 = alloc_tile : !pto.tile<8x16xi8>\n"
      "  %t1 = alloc_tile : !pto.tile<16x8xi8>\n"
      "  %t2 = alloc_tile : !pto.tile<8x8xi32>\n"
      "  %t0 = tload %a[0, 0] : !pto.tile<8x16xi8>\n"
      "  %t1 = tload %b[0, 0] : !pto.tile<16x8xi8>\n"
      "  %t2 = tmatmul %t0, %t1 : !pto.tile<8x8xi32>\n"
      "  %t2 = tmatmul_acc %t2, %t0, %t1 : !pto.tile<8x8xi32>\n"
      "  tstore %t2, %o[0, 0]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,8x16,i8>, %y: !pto.memref<gm,16x8,i8>, %z: !pto.memref<gm,8x8,i32> out) {\n"
      "  CALL @k(%a -> %x[0, 0; 8, 16], %b -> %y[0, 0; 16, 8], %o -> %z[0, 0; 8, 8])\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  verify(parse_pto(text));
  auto rejected = [&](const std::string& from, const std::string& to, const std::string& message) {
    std::string changed = text;
    for (size_t at = changed.find(from); at != std::string::npos; at = changed.find(from, at + to.size()))
      changed.replace(at, from.size(), to);
    try {
      verify(parse_pto(changed));
      ADD_FAILURE() << "verified with " << to;
    } catch (const VerifyError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  // An f32 product of i8 tiles, and an i32 tile loaded from f32 memory.
  rejected("i32", "f32", "[instr.dtype]");
  rejected("8x16,i8", "8x16,f32", "[tile.dtype]");
}

TEST(PtoParserTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep(300, '(');
  std::string text = Replace(kBase, "  ENDFOR\n  return", "  ENDFOR\n  IF " + deep + "\n  ENDIF\n  return");
  try {
    parse_pto(text);
    FAIL() << "parsed";
  } catch (const PtoSyntaxError& e) {
    EXPECT_EQ(e.line(), 16);
    EXPECT_EQ(e.column(), 6 + 201);  // the 202nd '(' is one level too deep
    EXPECT_NE(std::string(e.what()).find("nested too deeply"), std::string::npos) << e.what();
  }
  std::string loops;
  for (int i = 0; i < 300; ++i) loops += "  FOR %i:idx, 0:idx, 1:idx, 1:idx\n";
  text = Replace(kBase, "  ENDFOR\n  return", "  ENDFOR\n" + loops + "  return");
  try {
    parse_pto(text);
    FAIL() << "parsed";
  } catch (const PtoSyntaxError& e) {
    EXPECT_EQ(e.line(), 16 + 200);
    EXPECT_NE(std::string(e.what()).find("nested too deeply"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- mutation fuzz

namespace fuzz {

/// One random edit of `text`: delete, insert or replace characters, swap two
/// tokens or two lines, truncate, duplicate or drop a line.
std::string Mutate(const std::string& text, std::mt19937_64& rng) {
  static const std::string kAlphabet = "%@()[]{},;:=<>-+*/x0123456789 \n\tabcfgilmnpstvxFORENDIF.!_\"\x01\xff";
  auto pick = [&](size_t n) { return n == 0 ? size_t(0) : static_cast<size_t>(rng() % n); };
  std::string s = text;
  auto lines_of = [](const std::string& t) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= t.size()) {
      size_t nl = t.find('\n', start);
      if (nl == std::string::npos) {
        out.push_back(t.substr(start));
        break;
      }
      out.push_back(t.substr(start, nl - start));
      start = nl + 1;
    }
    return out;
  };
  auto join = [](const std::vector<std::string>& ls) {
    std::string out;
    for (size_t i = 0; i < ls.size(); ++i) out += (i ? "\n" : "") + ls[i];
    return out;
  };
  switch (rng() % 9) {
    case 0: {  // delete 1-8 characters
      size_t at = pick(s.size());
      s.erase(at, 1 + pick(8));
      break;
    }
    case 1: {  // insert 1-3 characters
      size_t at = pick(s.size() + 1);
      for (size_t n = 1 + pick(3); n > 0; --n) s.insert(s.begin() + at, kAlphabet[pick(kAlphabet.size())]);
      break;
    }
    case 2: {  // replace a character
      if (!s.empty()) s[pick(s.size())] = kAlphabet[pick(kAlphabet.size())];
      break;
    }
    case 3: {  // swap two tokens (runs of non-blank characters)
      std::vector<std::pair<size_t, size_t>> toks;
      for (size_t i = 0; i < s.size();) {
        if (s[i] == ' ' || s[i] == '\n') {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\n') ++j;
        toks.emplace_back(i, j - i);
        i = j;
      }
      if (toks.size() < 2) break;
      size_t a = pick(toks.size()), b = pick(toks.size());
      if (a == b) break;
      if (a > b) std::swap(a, b);
      std::string ta = s.substr(toks[a].first, toks[a].second), tb = s.substr(toks[b].first, toks[b].second);
      s.replace(toks[b].first, toks[b].second, ta);
      s.replace(toks[a].first, toks[a].second, tb);
      break;
    }
    case 4:  // truncate
      s.resize(pick(s.size() + 1));
      break;
    case 5: {  // duplicate a line
      std::vector<std::string> ls = lines_of(s);
      size_t i = pick(ls.size());
      ls.insert(ls.begin() + i, ls[i]);
      s = join(ls);
      break;
    }
    case 6: {  // drop a line
      std::vector<std::string> ls = lines_of(s);
      ls.erase(ls.begin() + pick(ls.size()));
      s = join(ls);
      break;
    }
    case 7: {  // swap two lines
      std::vector<std::string> ls = lines_of(s);
      std::swap(ls[pick(ls.size())], ls[pick(ls.size())]);
      s = join(ls);
      break;
    }
    default: {  // replace a digit run by an extreme number
      static const char* kNumbers[] = {"99999999999999999999", "-9223372036854775808", "0", "-1", "1e308", "1e-400", "nan"};
      size_t at = pick(s.size());
      while (at < s.size() && !(s[at] >= '0' && s[at] <= '9')) ++at;
      size_t end = at;
      while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
      if (at < s.size()) s.replace(at, end - at, kNumbers[pick(sizeof(kNumbers) / sizeof(kNumbers[0]))]);
      break;
    }
  }
  return s;
}

/// Parses `text`; on success its printed form must parse and print the same
/// (the printer writes only what the parser reads). Returns true when parsed.
bool ParseOrSyntaxError(const std::string& text, std::string& failure) {
  try {
    ExecutionGraph g = parse_pto(text);
    std::string once = print_pto(g);
    std::string twice = print_pto(parse_pto(once));
    if (once != twice) failure = "printed form is not stable:\n" + once + "\n----\n" + twice;
    return true;
  } catch (const PtoSyntaxError& e) {
    if (std::string(e.what()).find("internal parser error") != std::string::npos) failure = e.what();
    if (e.line() < 1 || e.column() < 1) failure = std::string("bad position: ") + e.what();
    return false;
  } catch (const std::exception& e) {
    failure = std::string("non-syntax exception: ") + e.what();
    return false;
  } catch (...) {
    failure = "unknown exception";
    return false;
  }
}

}  // namespace fuzz

TEST(PtoParserTest, EveryTruncationAndDeletionOfAValidTextIsHandled) {
  // Exhaustive: cut kBase at every byte, and drop every single byte.
  for (size_t i = 0; i <= kBase.size(); ++i) {
    std::string failure;
    fuzz::ParseOrSyntaxError(kBase.substr(0, i), failure);
    ASSERT_TRUE(failure.empty()) << "truncated at " << i << ": " << failure;
    fuzz::ParseOrSyntaxError(kBase.substr(0, i) + kBase.substr(std::min(i + 1, kBase.size())), failure);
    ASSERT_TRUE(failure.empty()) << "byte " << i << " deleted: " << failure;
  }
}

TEST(PtoParserTest, HostileInputsRaisePtoSyntaxError) {
  const std::vector<std::string> inputs = {
      std::string("\0", 1), "func", "func @", "func @f(", "func @f(%", "func @f(%x: !pto.memref<",
      "func @f(%x: !pto.memref<gm,99999999999999999999,f32>) {", "func @f(%x: !pto.memref<gm,(((((,f32>) {",
      "func @f() {\n  %t = alloc_tile : !pto.tile<99999999999999999999xf32>\n", "func @f() {\n  %", "func @f() {\n  %t =",
      "func @f() {\n  %t = tfill", "func @f() {\n  %t = tfill -", "func @f() {\n  %t = tfill 1e", "func @f() {\n  FOR",
      "func @f() {\n  FOR %i:idx, 0:idx, 1:idx, 1:idx max_range=", "func @f() {\n  FOR %i, 0, 1, 1 tile_levels={",
      "func @f() {\n  FOR %i, 0, 1, 1  // parallel dim=99999999999 tile=1", "// Entry: @\n", "// Buffer bytes: -",
      "// Function Type: Orchestration\nfunc @m() {\n  CALL @m()\n}\n", "\xff\xfe%@", "}\n}\n", "// PTO Module: x\n// PTO Module: x\n",
  };
  for (const std::string& text : inputs) {
    try {
      parse_pto(text);
      ADD_FAILURE() << "parsed: " << text;
    } catch (const PtoSyntaxError& e) {
      EXPECT_EQ(std::string(e.what()).find("internal parser error"), std::string::npos) << e.what();
    }
  }
}

TEST(PtoParserTest, MutationFuzzOnlyParsesOrRaisesPtoSyntaxError) {
  std::vector<std::string> seeds;
  for (const auto& [name, text] : CompiledPrograms()) seeds.push_back(text);
  seeds.push_back(kBase);
  seeds.push_back(kSeed);
  // PYPTO_FUZZ_ITERATIONS / PYPTO_FUZZ_SEED run a longer or another campaign locally.
  const char* env_n = std::getenv("PYPTO_FUZZ_ITERATIONS");
  const char* env_seed = std::getenv("PYPTO_FUZZ_SEED");
  const int kIterations = env_n ? std::atoi(env_n) : test::Thinned(20000);  // about a second (optimized build)
  std::mt19937_64 rng(env_seed ? std::strtoull(env_seed, nullptr, 10) : 20240611);
  auto t0 = std::chrono::steady_clock::now();
  int parsed = 0, rejected = 0;
  for (int it = 0; it < kIterations; ++it) {
    std::string text = seeds[it % seeds.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) text = fuzz::Mutate(text, rng);
    std::string failure;
    (fuzz::ParseOrSyntaxError(text, failure) ? parsed : rejected)++;
    if (!failure.empty()) {
      ADD_FAILURE() << "iteration " << it << ": " << failure << "\n---- input:\n" << text;
      break;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(parsed, 100);   // some mutations keep the text valid (e.g. in comments)
  EXPECT_GT(rejected, 1000);
  std::printf("fuzz: %d parsed, %d rejected in %.2f s\n", parsed, rejected, seconds);
}

TEST(PtoParserTest, ScatterReduceIsPrintedAndParsed) {
  const std::string text = Pto(GatherScatterGraph());
  EXPECT_NE(text.find(" reduce=add"), std::string::npos) << text;
  EXPECT_NE(text.find(" reduce=mul"), std::string::npos) << text;
  const ExecutionGraph g = parse_pto(text);
  int reduced = 0;
  for (const auto& f : g.functions)
    for (const Instr* in : testing::InstrsOf(f.body))
      if (in->op == Opcode::TSCATTER && in->reduce != ScatterReduce::None) ++reduced;
  EXPECT_EQ(reduced, 2);
  const size_t at = text.find(" reduce=add");
  std::string bad = text;
  bad.replace(at, 11, " reduce=$max");
  ExpectSyntaxError(bad, "reduce= takes add or mul, found 'max'", "unknown reduction");
}

TEST(PtoParserTest, ScatterWindowIsPrintedAndParsed) {
  const std::string text = Pto(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 16}));
  const size_t at = text.find(" window=[(g0 * 16), 64]");
  ASSERT_NE(at, std::string::npos) << text;
  int windowed = 0;
  for (const auto& f : parse_pto(text).functions)
    for (const Instr* in : testing::InstrsOf(f.body))
      if (in->op == Opcode::TSCATTER && in->window.size() == 2 && in->window[1].str() == "64") ++windowed;
  EXPECT_EQ(windowed, 1);
  std::string bad = text;
  bad.replace(at, 24, " window=$[(g0 * 16), 64, 1]");
  ExpectSyntaxError(bad, "window= takes [base, bound], found 3 expressions", "three-part window");
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

// The seed program with its store made an atomic addition into an accumulator parameter.
std::string AccumulatingSeed() {
  std::string text = kSeed;
  const std::string param = "%output: !pto.memref<gm,8x1xf32> out)";
  text.replace(text.find(param), param.size(), "%output: !pto.memref<gm,8x1xf32> accum)");
  const std::string store = "tstore %result, %output[0, 0]\n";
  text.replace(text.find(store), store.size(), "tstore %result, %output[0, 0] atomic_add\n");
  return text;
}

TEST(PtoParserTest, AtomicStoresAndAccumulatorsArePrintedAndParsed) {
  const ExecutionGraph g = parse_pto(AccumulatingSeed());
  const InCoreFunction& f = g.functions.at(0);
  EXPECT_TRUE(f.params.at(1).accumulate);
  EXPECT_TRUE(f.params.at(1).is_output);
  EXPECT_FALSE(f.params.at(0).accumulate);
  std::vector<const Instr*> ins = testing::InstrsOf(f.body);
  ASSERT_EQ(ins.size(), 3u);
  EXPECT_TRUE(ins[2]->atomic);
  const std::string canonical = print_pto(g);
  EXPECT_NE(canonical.find("%output: !pto.memref<gm,8x1,f32> accum"), std::string::npos) << canonical;
  EXPECT_NE(canonical.find("tstore %result, %output[0, 0] atomic_add"), std::string::npos) << canonical;
  ExpectRoundTrip(canonical);
  EXPECT_NE(canonical.find("CALL @rowmax"), std::string::npos);
}

TEST(PtoParserTest, AnAccumulatorWithAPlainAccessIsRejected) {
  std::string text = AccumulatingSeed();
  const std::string atomic = " atomic_add\n";
  text.replace(text.find(atomic), atomic.size(), "\n");
  try {
    verify(parse_pto(text));
    FAIL() << "accepted a plain store into an accumulator";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("accumulator parameter %output is accessed otherwise than by atomic_add "
                                         "stores"),
              std::string::npos)
        << e.what();
  }
  std::string orch = kSeed;
  const std::string out = "%output: !pto.memref<gm,8x1,f32> out, %n";
  orch.replace(orch.find(out), out.size(), "%output: !pto.memref<gm,8x1,f32> $accum, %n");
  ExpectSyntaxError(orch, "parameter %output: accum marks InCore parameters only", "accum on an entry parameter");
  std::string twice = AccumulatingSeed();
  const std::string store = "atomic_add\n";
  twice.replace(twice.find(store), store.size(), "atomic_add $atomic_add\n");
  ExpectSyntaxError(twice, "atomic_add given twice", "atomic_add twice");
  std::string load = kSeed;
  const std::string tl = "%x = tload %input[0, 0]";
  load.replace(load.find(tl), tl.size(), "%x = tload %input[0, 0] $atomic_add");
  ExpectSyntaxError(load, "", "atomic_add on a load");
}

TEST(PtoParserTest, AReadScalarRoundTripsAndIsVerified) {
  const std::string text =
      "module @rd entry @main\n"
      "\n"
      "incore func @k(%a: !pto.memref<gm,8x4,f32>, %o: !pto.memref<gm,8x4,f32> out, %n: index) buffer_bytes=0 {\n"
      "  %t0 = alloc_tile : !pto.tile<8x4xf32>\n"
      "  %t0 = tload %a[0, 0] valid [n, 4] : !pto.tile<8x4xf32>\n"
      "  tstore %t0, %o[0, 0] valid [n, 4]\n"
      "  return\n"
      "}\n"
      "\n"
      "orchestration func @main(%x: !pto.memref<gm,16x4,f32>, %c: !pto.memref<gm,2,i32>, %z: !pto.memref<gm,16x4,f32> out) {\n"
      "  FOR %e:idx, 0:idx, 2:idx, 1:idx\n"
      "    READ %c_v0 <- %c[e]\n"
      "    CALL @k(%a -> %x[(e * 8), 0; 8, 4], %o -> %z[(e * 8), 0; 8, 4], %n -> c_v0)\n"
      "  ENDFOR\n"
      "  return\n"
      "}\n";
  ExpectRoundTrip(text);
  verify(parse_pto(text));
  auto parse_fails = [](const std::string& bad, const std::string& message) {
    try {
      parse_pto(bad);
      ADD_FAILURE() << "parsed:\n" << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  parse_fails(replaced("%c[e]", "%c[e, 0]"), "READ gives 2 indices for %c of rank 1");
  parse_fails(replaced("%c[e]", "%q[e]"), "unknown memref %q");
  parse_fails(replaced("READ %c_v0", "READ %e"), "the name is already used");
  // The variable is in scope only after its READ, inside the loop.
  parse_fails(replaced("  ENDFOR\n", "  ENDFOR\n  CALL @k(%a -> %x[0, 0; 8, 4], %o -> %z[0, 0; 8, 4], %n -> c_v0)\n"),
              "c_v0");
  try {
    verify(parse_pto(replaced("%c[e]", "%z[e, 0]")));
    ADD_FAILURE() << "a READ of an output verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an input"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pypto
