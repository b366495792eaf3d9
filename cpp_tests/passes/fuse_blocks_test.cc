#include "passes/fuse_blocks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/verifier.h"
#include "passes/expand_tiles.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::LoopsOf;
using testing::OpcodeString;
using testing::TestLoc;

BlockGraph Fuse(const TensorGraph& g, PassOptions opts = {}) { return FuseBlocks(ExpandTiles(g, opts), opts); }

std::string Strs(const std::vector<Expr>& v) {
  std::string s;
  for (const Expr& e : v) s += (s.empty() ? "" : ", ") + e.str();
  return s;
}

std::vector<std::string> Names(const BlockGraph& g) {
  std::vector<std::string> out;
  for (const auto& f : g.functions) out.push_back(f.name);
  return out;
}

TEST(FuseBlocksTest, SoftmaxChainFusesIntoOneFunctionOverTheRowGrid) {
  BlockGraph b = Fuse(testing::SoftmaxGraph(64, 1024));
  EXPECT_NO_THROW(verify(b));
  ASSERT_EQ(b.functions.size(), 1u);
  const InCoreFunction& f = b.functions[0];
  EXPECT_EQ(f.name, "softmax_fused_0");
  EXPECT_EQ(f.fused_ops, (std::vector<std::string>{"amax_0", "sub_1", "exp_2", "sum_3", "div_4"}));
  EXPECT_EQ(f.scalar_params, std::vector<std::string>{"g0"});

  ASSERT_EQ(b.launches.size(), 1u);
  const BlockLaunch& l = b.launches[0];
  EXPECT_EQ(l.function, 0);
  ASSERT_EQ(l.grid.size(), 1u);
  EXPECT_EQ(l.grid[0].var, "g0");
  EXPECT_TRUE(l.grid[0].parallel);
  EXPECT_EQ(l.grid[0].dim, 0);
  EXPECT_EQ(l.grid[0].stop.as_const(), 2);
  EXPECT_TRUE(l.grid[0].body.empty());

  // The column loops of the elementwise ops run inside the function, sequentially.
  std::vector<const Loop*> loops = LoopsOf(f.body);
  ASSERT_EQ(loops.size(), 5u);
  for (const Loop* loop : loops) {
    EXPECT_FALSE(loop->parallel);
    EXPECT_EQ(loop->stop.as_const(), 32);
  }

  // Intermediates become one-block local buffers; only x and out cross the boundary.
  EXPECT_EQ(f.locals, (std::vector<int>{1, 2, 3, 4}));
  for (int id : f.locals) EXPECT_EQ(b.memrefs[id].kind, MemKind::Local);
  EXPECT_EQ(Strs(b.memrefs[1].shape), "32, 1");
  EXPECT_EQ(Strs(b.memrefs[2].shape), "32, 1024");
  ASSERT_EQ(f.params.size(), 2u);
  EXPECT_EQ(f.params[0].name, "x");
  EXPECT_FALSE(f.params[0].is_output);
  EXPECT_EQ(f.params[1].name, "out");
  EXPECT_TRUE(f.params[1].is_output);
  EXPECT_EQ(Strs(f.params[0].max_extents), "32, 1024");

  ASSERT_EQ(l.call.args.size(), 2u);
  EXPECT_EQ(l.call.args[0].memref, 0);
  EXPECT_EQ(Strs(l.call.args[0].offsets), "(g0 * 32), 0");
  EXPECT_EQ(Strs(l.call.args[0].extents), "32, 1024");
  EXPECT_EQ(l.call.args[1].memref, 5);
  EXPECT_EQ(Strs(l.call.scalars), "g0");
}

TEST(FuseBlocksTest, OffsetsInsideTheFunctionAreRelativeToTheBlock) {
  BlockGraph b = Fuse(testing::SoftmaxGraph(64, 1024));
  for (const Instr* in : testing::InstrsOf(b.functions[0].body)) {
    if (in->op != Opcode::TLOAD && in->op != Opcode::TSTORE) continue;
    // The row offset (g0 * 32) moved into the region argument.
    EXPECT_EQ(in->offsets[0].as_const(), 0) << Strs(in->offsets);
    EXPECT_FALSE(in->offsets[1].uses("g0"));
  }
}

TEST(FuseBlocksTest, TailBlocksGetClampedRegionExtents) {
  BlockGraph b = Fuse(testing::SoftmaxGraph(50, 100));
  ASSERT_EQ(b.functions.size(), 1u);
  EXPECT_EQ(Strs(b.launches[0].call.args[0].extents), "min(32, (50 - (g0 * 32))), 100");
  // The local block is sized for a full block, not the tail.
  EXPECT_EQ(Strs(b.memrefs[2].shape), "32, 100");
}

TEST(FuseBlocksTest, WithoutFusionEveryNestIsItsOwnFunction) {
  PassOptions opts;
  opts.fusion = false;
  BlockGraph b = Fuse(testing::SoftmaxGraph(64, 1024), opts);
  EXPECT_NO_THROW(verify(b));
  EXPECT_EQ(Names(b), (std::vector<std::string>{"amax_0", "sub_1", "exp_2", "sum_3", "div_4"}));
  ASSERT_EQ(b.launches.size(), 5u);
  std::vector<size_t> grid_sizes;
  for (const auto& l : b.launches) grid_sizes.push_back(l.grid.size());
  EXPECT_EQ(grid_sizes, (std::vector<size_t>{1, 2, 2, 1, 2}));
  for (const auto& f : b.functions) {
    EXPECT_TRUE(f.locals.empty()) << f.name;
    EXPECT_EQ(f.fused_ops.size(), 1u);
  }
  for (const auto& m : b.memrefs) EXPECT_NE(m.kind, MemKind::Local) << m.name;
  // Intermediates go through global workspaces, passed block by block.
  const InCoreFunction& sub = b.functions[1];
  ASSERT_EQ(sub.params.size(), 3u);
  EXPECT_EQ(sub.params[1].name, "v1");
  EXPECT_EQ(Strs(sub.params[1].max_extents), "32, 1");
  EXPECT_EQ(sub.scalar_params, (std::vector<std::string>{"g0", "g1"}));
}

TEST(FuseBlocksTest, IndependentNestsStaySeparate) {
  TensorGraphBuilder gb("two");
  int x = gb.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  int y = gb.add_param("y", {Expr(64), Expr(64)}, DataType::FP32);
  int ex = gb.add_unary(TensorOpKind::Exp, x, {32, 32}, TestLoc());
  int ey = gb.add_unary(TensorOpKind::Exp, y, {32, 32}, TestLoc());
  gb.set_outputs({ex, ey});
  BlockGraph b = Fuse(gb.finish());
  EXPECT_EQ(Names(b), (std::vector<std::string>{"exp_0", "exp_1"}));
}

// A column sum iterates a grid over columns; its consumer's grid starts with rows,
// so they share no outer loop and fusing would serialise the whole tensor.
TEST(FuseBlocksTest, ConsumersOnADifferentGridStaySeparate) {
  TensorGraphBuilder gb("colsum");
  int x = gb.add_param("x", {Expr(64), Expr(96)}, DataType::FP32);
  int s = gb.add_reduce(TensorOpKind::Sum, x, 0, true, {32, 32}, TestLoc());
  int y = gb.add_binary(TensorOpKind::Sub, x, s, {32, 32}, TestLoc());
  int e = gb.add_unary(TensorOpKind::Exp, y, {32, 32}, TestLoc());
  gb.set_outputs({e});
  BlockGraph b = Fuse(gb.finish());
  EXPECT_NO_THROW(verify(b));
  EXPECT_EQ(Names(b), (std::vector<std::string>{"sum_0", "colsum_fused_1"}));
  EXPECT_EQ(b.launches[0].grid[0].dim, 1);
  EXPECT_EQ(b.functions[1].fused_ops, (std::vector<std::string>{"sub_1", "exp_2"}));
  EXPECT_EQ(b.launches[1].grid.size(), 2u);
  // The column sums cross the boundary, so they stay a global workspace.
  EXPECT_EQ(b.memrefs[s].kind, MemKind::Workspace);
  EXPECT_EQ(b.memrefs[y].kind, MemKind::Local);
}

// A tensor the caller gets back must stay in global memory even when only the group reads it.
TEST(FuseBlocksTest, ReturnedIntermediatesAreNotLocal) {
  TensorGraphBuilder gb("both");
  int x = gb.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  int e = gb.add_unary(TensorOpKind::Exp, x, {32, 32}, TestLoc());
  int s = gb.add_reduce(TensorOpKind::Sum, e, 1, true, {32, 32}, TestLoc());
  gb.set_outputs({e, s});
  BlockGraph b = Fuse(gb.finish());
  ASSERT_EQ(b.functions.size(), 1u);
  EXPECT_TRUE(b.functions[0].locals.empty());
  ASSERT_EQ(b.functions[0].params.size(), 3u);
  EXPECT_TRUE(b.functions[0].params[1].is_output);
  EXPECT_TRUE(b.functions[0].params[2].is_output);
  EXPECT_EQ(OpcodeString(b.functions[0].body), "tload texp tstore tfill tload trowsum tadd tstore");
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

TEST(FuseBlocksTest, ACopyAndAScatterByDestinationShareATaskPerBlock) {
  const BlockGraph g = Fuse(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 16}));
  ASSERT_EQ(g.functions.size(), 1u);
  const InCoreFunction& f = g.functions[0];
  EXPECT_EQ(f.fused_ops.size(), 2u);
  EXPECT_EQ(OpcodeString(f.body), "tload tstore tload tload tscatter");
  // The destination's region is the task's block of rows, so the blocks' tasks are independent.
  for (const CallArg& a : g.launches[0].call.args)
    if (g.memrefs.at(a.memref).kind == MemKind::Output) {
      EXPECT_EQ(Strs(a.offsets), "(g0 * 16), (g1 * 16)");
      EXPECT_EQ(Strs(a.extents), "16, 16");
    }
  // A scatter that may land anywhere stays on its own.
  EXPECT_EQ(Fuse(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 8})).functions.size(), 2u);
}

}  // namespace
}  // namespace pypto
