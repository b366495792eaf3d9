#include "passes/expand_tiles.h"
#include "passes/util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::InstrsOf;
using testing::LoopsOf;
using testing::OpcodeString;
using testing::TestLoc;

TileGraph Expand(const TensorGraph& g) { return ExpandTiles(g, PassOptions{}); }

std::string Strs(const std::vector<Expr>& v) {
  std::string s;
  for (const Expr& e : v) s += (s.empty() ? "" : ", ") + e.str();
  return s;
}

// Follows single-loop bodies down to the first statement list that is not one loop.
std::vector<const Loop*> LoopChain(const std::vector<Stmt>& body) {
  std::vector<const Loop*> out;
  const std::vector<Stmt>* b = &body;
  while (b->size() == 1 && std::holds_alternative<Loop>((*b)[0].node)) {
    out.push_back(&std::get<Loop>((*b)[0].node));
    b = &out.back()->body;
  }
  return out;
}

TEST(ExpandTilesTest, ElementwiseAddWithATailAlongTheLastDim) {
  TileGraph t = Expand(testing::AddGraph({Expr(64), Expr(100)}));
  ASSERT_EQ(t.nests.size(), 1u);
  EXPECT_EQ(t.nests[0].name, "add_0");
  EXPECT_EQ(t.nests[0].source_op, 0);

  std::vector<const Loop*> loops = LoopChain(t.nests[0].body);
  ASSERT_EQ(loops.size(), 2u);
  EXPECT_EQ(loops[0]->var, "i0_0");
  EXPECT_EQ(loops[1]->var, "i0_1");
  for (int d = 0; d < 2; ++d) {
    EXPECT_TRUE(loops[d]->parallel);
    EXPECT_EQ(loops[d]->dim, d);
    EXPECT_EQ(loops[d]->tile, 32);
    EXPECT_EQ(loops[d]->start.as_const(), 0);
    EXPECT_EQ(loops[d]->step.as_const(), 1);
  }
  EXPECT_EQ(loops[0]->stop.as_const(), 2);
  EXPECT_EQ(loops[1]->stop.as_const(), 4);  // ceil(100 / 32)

  const std::vector<Stmt>& body = loops[1]->body;
  EXPECT_EQ(OpcodeString(body), "tload tload tadd tstore");
  std::vector<const Instr*> in = InstrsOf(body);
  EXPECT_EQ(in[0]->memref, 0);
  EXPECT_EQ(in[1]->memref, 1);
  EXPECT_EQ(in[2]->srcs, (std::vector<int>{in[0]->dst, in[1]->dst}));
  EXPECT_EQ(in[3]->srcs, std::vector<int>{in[2]->dst});
  EXPECT_EQ(in[3]->memref, 2);
  for (const Instr* io : {in[0], in[1], in[3]}) {
    EXPECT_EQ(Strs(io->offsets), "(i0_0 * 32), (i0_1 * 32)");
    // 64 rows divide evenly, so dim 0 needs no tail expression.
    EXPECT_EQ(io->valid[0].as_const(), 32);
    EXPECT_EQ(io->valid[1].str(), "min(32, (100 - (i0_1 * 32)))");
  }
  ASSERT_EQ(t.tiles.size(), 3u);
  for (const TileDecl& d : t.tiles) EXPECT_EQ(d.shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(t.memrefs[0].kind, MemKind::Input);
  EXPECT_EQ(t.memrefs[1].kind, MemKind::Input);
  EXPECT_EQ(t.memrefs[2].kind, MemKind::Output);
  EXPECT_EQ(t.params, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.outputs, std::vector<int>{2});
}

TEST(ExpandTilesTest, PrintsTheAddNest) {
  EXPECT_EQ(print(Expand(testing::AddGraph({Expr(64), Expr(100)}))),
            "tile_graph @add(params %a, %b; outputs %out) {\n"
            "  %a : !pto.memref<gm,64x100,f32>  // input\n"
            "  %b : !pto.memref<gm,64x100,f32>  // input\n"
            "  %out : !pto.memref<gm,64x100,f32>  // output\n"
            "  %t0 = alloc_tile : !pto.tile<32x32xf32>\n"
            "  %t1 = alloc_tile : !pto.tile<32x32xf32>\n"
            "  %t2 = alloc_tile : !pto.tile<32x32xf32>\n"
            "  nest @add_0:\n"
            "    FOR %i0_0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=32\n"
            "      FOR %i0_1:idx, 0:idx, 4:idx, 1:idx parallel dim=1 tile=32\n"
            "        %t0 = tload %a[(i0_0 * 32), (i0_1 * 32)] valid [32, min(32, (100 - (i0_1 * 32)))] : "
            "!pto.tile<32x32xf32>\n"
            "        %t1 = tload %b[(i0_0 * 32), (i0_1 * 32)] valid [32, min(32, (100 - (i0_1 * 32)))] : "
            "!pto.tile<32x32xf32>\n"
            "        %t2 = tadd %t0, %t1 : !pto.tile<32x32xf32>\n"
            "        tstore %t2, %out[(i0_0 * 32), (i0_1 * 32)] valid [32, min(32, (100 - (i0_1 * 32)))]\n"
            "      ENDFOR\n"
            "    ENDFOR\n"
            "}\n");
}

TEST(ExpandTilesTest, RowReductionCarriesAnAccumulatorAcrossASequentialLoop) {
  TileGraph t = Expand(testing::SoftmaxGraph(64, 1024));
  ASSERT_EQ(t.nests.size(), 5u);
  const TileNest& amax = t.nests[0];
  EXPECT_EQ(amax.name, "amax_0");
  // Only the kept dim is a parallel grid loop.
  std::vector<const Loop*> grid = LoopChain(amax.body);
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_TRUE(grid[0]->parallel);
  EXPECT_EQ(grid[0]->dim, 0);
  EXPECT_EQ(grid[0]->stop.as_const(), 2);

  const std::vector<Stmt>& body = grid[0]->body;
  ASSERT_EQ(body.size(), 3u);
  const Instr& fill = std::get<Instr>(body[0].node);
  EXPECT_EQ(fill.op, Opcode::TFILL);
  EXPECT_EQ(fill.scalar, -std::numeric_limits<double>::infinity());
  const Loop& red = std::get<Loop>(body[1].node);
  EXPECT_FALSE(red.parallel);
  EXPECT_EQ(red.dim, 1);
  EXPECT_EQ(red.stop.as_const(), 32);
  EXPECT_EQ(OpcodeString(red.body), "tload trowmax tmax");
  std::vector<const Instr*> in = InstrsOf(red.body);
  EXPECT_EQ(in[2]->dst, fill.dst);  // the combine writes the accumulator in place
  EXPECT_EQ(in[2]->srcs, (std::vector<int>{fill.dst, in[1]->dst}));
  EXPECT_EQ(t.tiles[fill.dst].shape, (std::vector<int64_t>{32, 1}));
  const Instr& st = std::get<Instr>(body[2].node);
  EXPECT_EQ(st.op, Opcode::TSTORE);
  EXPECT_EQ(st.srcs, std::vector<int>{fill.dst});
  EXPECT_EQ(Strs(st.offsets), "(i0_0 * 32), 0");
  EXPECT_EQ(Strs(st.valid), "32, 1");

  const TileNest& sum = t.nests[3];
  EXPECT_EQ(std::get<Instr>(LoopChain(sum.body)[0]->body[0].node).scalar, 0.0);
  EXPECT_EQ(OpcodeString(sum.body), "tfill tload trowsum tadd tstore");
}

TEST(ExpandTilesTest, ScanCarriesTheTilesBeforeAlongASequentialLoop) {
  TensorGraphBuilder b("scan");
  int x = b.add_param("x", {Expr(64), Expr(100)}, DataType::FP32);
  int y = b.add_scan(TensorOpKind::Cumsum, x, -1, {32, 32}, TestLoc(2));
  b.set_outputs({y});
  TileGraph t = Expand(b.finish());
  ASSERT_EQ(t.nests.size(), 1u);
  std::vector<const Loop*> grid = LoopChain(t.nests[0].body);
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_TRUE(grid[0]->parallel);
  EXPECT_EQ(grid[0]->dim, 0);
  const std::vector<Stmt>& body = grid[0]->body;
  ASSERT_EQ(body.size(), 2u);
  const Instr& fill = std::get<Instr>(body[0].node);
  EXPECT_EQ(fill.op, Opcode::TFILL);
  EXPECT_TRUE(fill.scalar == 0.0 && !std::signbit(fill.scalar));  // +0, as torch (a leading -0 gives +0)
  EXPECT_EQ(t.tiles[fill.dst].shape, (std::vector<int64_t>{32, 1}));
  const Loop& along = std::get<Loop>(body[1].node);
  EXPECT_FALSE(along.parallel);
  EXPECT_EQ(along.dim, 1);
  EXPECT_EQ(along.stop.as_const(), 4);
  EXPECT_EQ(OpcodeString(along.body), "tload tcumsum trowsum tadd tstore");
  std::vector<const Instr*> in = InstrsOf(along.body);
  EXPECT_EQ(in[1]->axis, 1);
  EXPECT_EQ(in[1]->srcs, (std::vector<int>{in[0]->dst, fill.dst}));  // the scan starts from the carry
  EXPECT_EQ(in[2]->valid.back().str(), in[0]->valid.back().str());   // the carry sums the valid part only
  EXPECT_EQ(in[3]->dst, fill.dst);
  EXPECT_EQ(in[4]->srcs, std::vector<int>{in[1]->dst});
}

TEST(ExpandTilesTest, ScanOfIntegersComputesInInt64AndOfAMiddleDimUsesTheAxisForms) {
  TensorGraphBuilder b("scan");
  int x = b.add_param("x", {Expr(4), Expr(10), Expr(8)}, DataType::INT32);
  int y = b.add_scan(TensorOpKind::Cumprod, x, 1, {2, 4, 8}, TestLoc(2));
  b.set_outputs({y});
  TensorGraph g = b.finish();
  EXPECT_EQ(g.value(y).dtype, DataType::INT64);
  TileGraph t = Expand(g);
  EXPECT_EQ(OpcodeString(t.nests[0].body), "tfill tload tcast tcumprod tredprod tmul tstore");
  EXPECT_THROW(b.add_scan(TensorOpKind::Cumsum, x, 3, {2, 4, 8}, TestLoc(3)), UserError);
}

TEST(ExpandTilesTest, BroadcastOfAColumnUsesRowExpand) {
  TileGraph t = Expand(testing::SoftmaxGraph(64, 1024));
  const TileNest& sub = t.nests[1];
  EXPECT_EQ(OpcodeString(sub.body), "tload tload trowexpandsub tstore");
  std::vector<const Instr*> in = InstrsOf(sub.body);
  // The [64, 1] operand loads one size-1 column at offset 0 of its last dim.
  EXPECT_EQ(in[1]->memref, 1);
  EXPECT_EQ(t.tiles[in[1]->dst].shape, (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(Strs(in[1]->offsets), "(i1_0 * 32), 0");
  EXPECT_EQ(Strs(in[1]->valid), "32, 1");
  EXPECT_EQ(in[2]->srcs, (std::vector<int>{in[0]->dst, in[1]->dst}));
  EXPECT_EQ(OpcodeString(t.nests[4].body), "tload tload trowexpanddiv tstore");
  EXPECT_EQ(OpcodeString(t.nests[2].body), "tload texp tstore");
}

TEST(ExpandTilesTest, ColumnReductionAndRowBroadcastAndMissingLeadingDim) {
  TensorGraphBuilder b("bc");
  std::vector<int64_t> tile = {32, 32};
  int x = b.add_param("x", {Expr(64), Expr(96)}, DataType::FP32);
  int v = b.add_param("v", {Expr(96)}, DataType::FP32);
  int s = b.add_reduce(TensorOpKind::Sum, x, 0, true, tile, TestLoc());
  int y = b.add_binary(TensorOpKind::Sub, x, s, tile, TestLoc());
  int z = b.add_binary(TensorOpKind::Mul, v, y, tile, TestLoc());
  int w = b.add_reduce(TensorOpKind::Amax, z, 1, false, tile, TestLoc());
  b.set_outputs({z, w});
  TileGraph t = Expand(b.finish());
  ASSERT_EQ(t.nests.size(), 4u);

  // sum over dim 0: the grid walks columns, the reduction walks rows.
  std::vector<const Loop*> grid = LoopChain(t.nests[0].body);
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_EQ(grid[0]->dim, 1);
  EXPECT_EQ(grid[0]->stop.as_const(), 3);
  EXPECT_EQ(OpcodeString(t.nests[0].body), "tfill tload tcolsum tadd tstore");

  EXPECT_EQ(OpcodeString(t.nests[1].body), "tload tload tcolexpandsub tstore");

  // A rank-1 operand is loaded at its own rank, reshaped to [1, 32] and expanded.
  EXPECT_EQ(OpcodeString(t.nests[2].body), "tload treshape tload texpand tmul tstore");
  std::vector<const Instr*> mul = InstrsOf(t.nests[2].body);
  EXPECT_EQ(t.tiles[mul[0]->dst].shape, std::vector<int64_t>{32});
  EXPECT_EQ(Strs(mul[0]->offsets), "(i2_1 * 32)");
  EXPECT_EQ(t.tiles[mul[1]->dst].shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(mul[4]->srcs, (std::vector<int>{mul[3]->dst, mul[2]->dst}));  // operand order kept: v * y

  // keepdim=False drops the reduced dim before the store.
  EXPECT_EQ(OpcodeString(t.nests[3].body), "tfill tload trowmax tmax treshape tstore");
  const Instr* st = InstrsOf(t.nests[3].body).back();
  EXPECT_EQ(Strs(st->offsets), "(i3_0 * 32)");
  EXPECT_EQ(t.tiles[st->srcs[0]].shape, std::vector<int64_t>{32});
}

TEST(ExpandTilesTest, TilesClampToSmallDims) {
  TileGraph t = Expand(testing::SoftmaxGraph(1, 33));
  std::vector<const Loop*> grid = LoopChain(t.nests[1].body);
  ASSERT_EQ(grid.size(), 2u);
  EXPECT_EQ(grid[0]->tile, 1);
  EXPECT_EQ(grid[0]->stop.as_const(), 1);
  EXPECT_EQ(grid[1]->stop.as_const(), 2);
  const Instr* ld = InstrsOf(t.nests[1].body)[0];
  EXPECT_EQ(t.tiles[ld->dst].shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(Strs(ld->offsets), "i1_0, (i1_1 * 32)");  // x * 1 simplifies to x
  EXPECT_EQ(Strs(ld->valid), "1, min(32, (33 - (i1_1 * 32)))");
}

TEST(ExpandTilesTest, SymbolicDimsGiveSymbolicBoundsAndTails) {
  TensorGraphBuilder b("dyn");
  b.add_dyn_dim("M");
  int x = b.add_param("x", {Expr::var("M"), Expr(64)}, DataType::FP32);
  b.set_outputs({b.add_unary(TensorOpKind::Exp, x, {32, 32}, TestLoc())});
  TileGraph t = Expand(b.finish());
  EXPECT_EQ(t.dyn_dims, std::vector<std::string>{"M"});
  std::vector<const Loop*> grid = LoopChain(t.nests[0].body);
  ASSERT_EQ(grid.size(), 2u);
  EXPECT_EQ(grid[0]->stop.str(), "((M + 31) // 32)");
  EXPECT_EQ(grid[0]->stop.eval([](const std::string&) { return int64_t{65}; }), 3);
  EXPECT_EQ(Strs(InstrsOf(t.nests[0].body)[0]->valid), "min(32, (M - (i0_0 * 32))), 32");
}

TEST(ExpandTilesTest, OutputsStoredWholeAreNotZeroFilled) {
  // exp(x) and its row sums are stored whole, dynamic rows and tails included: their workspaces skip
  // the runtime's zero fill. A fill with a tail, a tensor assembled into, and an op in a loop (which
  // may run no iteration) keep it.
  TensorGraphBuilder b("ws");
  b.add_dyn_dim("M");
  int x = b.add_param("x", {Expr::var("M"), Expr(100)}, DataType::FP32);
  int e = b.add_unary(TensorOpKind::Exp, x, {32, 32}, TestLoc(1));
  int s = b.add_reduce(TensorOpKind::Sum, e, 1, true, {32, 32}, TestLoc(2));
  int fill = b.add_full({Expr::var("M"), Expr(100)}, Operand{}, DataType::FP32, {Expr::var("M"), Expr(60)}, {32, 32},
                        TestLoc(3));
  int target = b.add_full({Expr::var("M"), Expr(100)}, Operand{}, DataType::FP32, {Expr::var("M"), Expr(100)}, {32, 32},
                          TestLoc(4));
  int part = b.add_view(target, {Expr::var("M"), Expr(50)}, {Expr(0), Expr(0)}, {0, 1}, {1, 1},
                        {Expr::var("M"), Expr(50)}, TestLoc(5));
  int half = b.add_view(e, {Expr::var("M"), Expr(50)}, {Expr(0), Expr(0)}, {0, 1}, {1, 1}, {Expr::var("M"), Expr(50)},
                        TestLoc(5));
  b.add_assemble(half, part, {32, 32}, TestLoc(5));
  b.begin_loop("i", Expr(0), Expr::var("M"), Expr(1), TestLoc(6));
  int in_loop = b.add_unary(TensorOpKind::Neg, s, {32, 32}, TestLoc(7));
  b.end_loop();
  int out = b.add_binary(TensorOpKind::Add, e, s, {32, 32}, TestLoc(8));
  int out2 = b.add_binary(TensorOpKind::Add, fill, target, {32, 32}, TestLoc(9));
  b.set_outputs({out, out2, b.add_binary(TensorOpKind::Add, in_loop, s, {32, 32}, TestLoc(10))});
  TileGraph t = Expand(b.finish());
  EXPECT_NO_THROW(verify(t));
  auto zeroed = [&](int v) {
    const MemRef& m = t.memrefs.at(static_cast<size_t>(v));
    EXPECT_EQ(m.kind, MemKind::Workspace) << v;
    return m.zeroed;
  };
  EXPECT_FALSE(zeroed(e));
  EXPECT_FALSE(zeroed(s));
  EXPECT_TRUE(zeroed(fill));
  EXPECT_TRUE(zeroed(target));
  EXPECT_TRUE(zeroed(in_loop));
}

TEST(ExpandTilesTest, TinyBatchedProductsRunABlockOfTheBatchPerGridPoint) {
  // 32 x 12 products of 8 rows by a 64 x 64 matrix: grid points over 8 consecutive products of
  // the inner batch dim (the last block holds 4), each a sequential loop over its products.
  TensorGraphBuilder b("bmm");
  int a = b.add_param("a", {Expr(32), Expr(12), Expr(8), Expr(64)}, DataType::FP32);
  int w = b.add_param("w", {Expr(32), Expr(12), Expr(64), Expr(64)}, DataType::FP32);
  int mm = b.add_matmul(a, w, DataType::FP32, {8, 64, 64}, {8, 64, 64}, TestLoc(1));
  b.set_outputs({mm});
  TileGraph t = Expand(b.finish());
  EXPECT_NO_THROW(verify(t));
  ASSERT_EQ(t.nests.size(), 1u);
  EXPECT_EQ(t.nests[0].note, "batch block 8: 8 consecutive products of 8x64x64 per task");
  std::vector<const Loop*> loops = LoopChain(t.nests[0].body);
  ASSERT_EQ(loops.size(), 5u) << print(t);
  for (int d = 0; d < 4; ++d) EXPECT_TRUE(loops[d]->parallel) << d;
  EXPECT_EQ(loops[1]->tile, 8);
  EXPECT_EQ(loops[1]->stop.str(), "2");
  const Loop& products = *loops[4];
  EXPECT_FALSE(products.parallel);
  EXPECT_EQ(products.stop.str(), "min(8, (12 - (i0_1 * 8)))");
  // Each product loads and stores one batch element at the block's offset plus its index.
  bool stored = false;
  for (const Instr* in : InstrsOf(products.body))
    if (in->op == Opcode::TSTORE) {
      stored = true;
      EXPECT_EQ(in->offsets[1].str(), "(b0 + (i0_1 * 8))");
      EXPECT_EQ(in->valid[1].str(), "1");
    }
  EXPECT_TRUE(stored) << print(t);
}

TEST(ExpandTilesTest, UnsupportedProgramsSaySo) {
  {
    TensorGraphBuilder b("identity");
    int x = b.add_param("x", {Expr(8), Expr(8)}, DataType::FP32);
    b.set_outputs({x});
    EXPECT_THROW(Expand(b.finish()), NotSupportedError);
  }
  {
    TensorGraphBuilder b("twice");
    int x = b.add_param("x", {Expr(8), Expr(8)}, DataType::FP32);
    int e = b.add_unary(TensorOpKind::Exp, x, {8, 8}, TestLoc());
    b.set_outputs({e, e});
    EXPECT_THROW(Expand(b.finish()), NotSupportedError);
  }
  {
    TensorGraphBuilder b("middle");
    int x = b.add_param("x", {Expr(4), Expr(8), Expr(8)}, DataType::FP32);
    b.set_outputs({b.add_reduce(TensorOpKind::Sum, x, 1, true, {1, 8, 8}, SourceLoc{"m.py", 3})});
    // A middle-dim reduction walks that dim sequentially and reduces tile axis 1.
    TileGraph t = Expand(b.finish());
    bool found = false;
    for_each_instr(t.nests.at(0).body, [&](const Instr& in) {
      if (in.op == Opcode::TREDSUM) found = in.axis == 1;
    });
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

const Instr* ScatterOf(const TileGraph& g) {
  for (const TileNest& n : g.nests)
    for (const Instr* in : testing::InstrsOf(n.body))
      if (in->op == Opcode::TSCATTER) return in;
  return nullptr;
}

TEST(ExpandTilesTest, AScatterOfWholeRowsGoesByDestinationBlock) {
  // 64 destination rows in blocks of 16, 40 source rows: each block walks the source blocks in a
  // sequential loop and takes the indices of its own window [16 i, 16 i + 16) of [0, 64).
  const TileGraph g = ExpandTiles(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 16}), PassOptions{});
  const Instr* sc = ScatterOf(g);
  ASSERT_NE(sc, nullptr);
  ASSERT_EQ(sc->window.size(), 2u);
  EXPECT_EQ(sc->window[0].str(), "(i5_0 * 16)");
  EXPECT_EQ(sc->window[1].str(), "64");
  EXPECT_EQ(Strs(sc->offsets), "(i5_0 * 16), (i5_1 * 16)");
  EXPECT_EQ(Strs(sc->valid), "min(16, (40 - (j5 * 16))), 16");
  const TileNest& nest = g.nests.back();
  std::vector<const Loop*> grid = LoopChain(nest.body);
  ASSERT_EQ(grid.size(), 3u);  // two parallel grid loops over the destination, then the source blocks
  EXPECT_TRUE(grid[0]->parallel && grid[1]->parallel);
  EXPECT_FALSE(grid[2]->parallel);
  EXPECT_EQ(grid[0]->stop.str(), "4");
  EXPECT_EQ(grid[2]->var, "j5");
  EXPECT_EQ(grid[2]->stop.str(), "3");
  // The copy of x writes the destination itself, not the view of all of it.
  for (const TileNest& n : g.nests)
    for (const Instr* in : testing::InstrsOf(n.body))
      if (in->op == Opcode::TSTORE) EXPECT_EQ(g.memrefs.at(in->memref).name, g.memrefs.at(sc->memref).name);
  EXPECT_NE(print(g).find(" window=[(i5_0 * 16), 64]"), std::string::npos) << print(g);
}

TEST(ExpandTilesTest, AScatterKeepsTheSerialFormWhereBlocksWouldNotPay) {
  // Columns not covered by the tile (the source box is not dense), or one destination block.
  for (const TileGraph& g : {ExpandTiles(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 8}), PassOptions{}),
                             ExpandTiles(testing::IndexAddGraph(Expr(16), Expr(40), 16, {16, 16}), PassOptions{})}) {
    const Instr* sc = ScatterOf(g);
    ASSERT_NE(sc, nullptr);
    EXPECT_TRUE(sc->window.empty());
    EXPECT_EQ(sc->offsets[0].str(), "0");
  }
  // A dynamic destination: the window's bound is its symbolic dim.
  const TileGraph dyn =
      ExpandTiles(testing::IndexAddGraph(Expr::var("M"), Expr::var("T"), 16, {16, 16}), PassOptions{});
  ASSERT_NE(ScatterOf(dyn), nullptr);
  ASSERT_EQ(ScatterOf(dyn)->window.size(), 2u);
  EXPECT_EQ(ScatterOf(dyn)->window[1].str(), "M");
}

}  // namespace
}  // namespace pypto
