#include "passes/reorder_loops.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/expand_tiles.h"
#include "passes/fuse_blocks.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::TestLoc;

/// exp over (rows x cols) with `prod_tile`, then a sum over `dim` with `red_tile`.
TensorGraph ExpThenSum(int64_t rows, int64_t cols, std::vector<int64_t> prod_tile, int dim,
                       std::vector<int64_t> red_tile) {
  TensorGraphBuilder b("exp_sum");
  int x = b.add_param("x", {Expr(rows), Expr(cols)}, DataType::FP32);
  int e = b.add_unary(TensorOpKind::Exp, x, prod_tile, TestLoc(2));
  int s = b.add_reduce(TensorOpKind::Sum, e, dim, true, red_tile, TestLoc(3));
  b.set_outputs({s});
  return b.finish();
}

/// The (dim, tile, trips) of a nest's leading parallel loops.
std::vector<std::string> Grid(const TileNest& n) {
  std::vector<std::string> out;
  const std::vector<Stmt>* body = &n.body;
  while (body->size() == 1) {
    auto* l = std::get_if<Loop>(&(*body)[0].node);
    if (!l || !l->parallel) break;
    out.push_back(fmt::format("d{} t{} x{}", l->dim, l->tile, l->stop.str()));
    body = &l->body;
  }
  return out;
}

TEST(ReorderLoopsTest, ColumnReductionInterchangesItsProducersGrid) {
  PassOptions opts;
  TileGraph before = ExpandTiles(ExpThenSum(96, 64, {32, 32}, 0, {32, 32}), opts);
  ASSERT_EQ(Grid(before.nests[0]), (std::vector<std::string>{"d0 t32 x3", "d1 t32 x2"}));
  ASSERT_EQ(Grid(before.nests[1]), (std::vector<std::string>{"d1 t32 x2"}));
  TileGraph after = ReorderLoops(before, opts);
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(Grid(after.nests[0]), (std::vector<std::string>{"d1 t32 x2", "d0 t32 x3"}));
  EXPECT_EQ(after.nests[0].note, "interchanged grid loops to (dim 1 tile 32), (dim 0 tile 32) to fuse with sum_1");
  EXPECT_TRUE(after.nests[1].note.empty());  // the consumer keeps its loops
  // Without the interchange the two cannot fuse; with it they do.
  EXPECT_EQ(FuseBlocks(before, opts).functions.size(), 2u);
  BlockGraph fused = FuseBlocks(after, opts);
  EXPECT_NO_THROW(verify(fused));
  ASSERT_EQ(fused.functions.size(), 1u);
  EXPECT_EQ(fused.functions[0].locals.size(), 1u);  // exp's column block stays on chip
}

TEST(ReorderLoopsTest, FinerProducerTilesAreChunkedToTheConsumersTile) {
  PassOptions opts;
  // 100 rows: 7 row tiles of 16 in 4 chunks of 32 (the last chunk holds one tile).
  TileGraph before = ExpandTiles(ExpThenSum(100, 64, {16, 64}, 1, {32, 64}), opts);
  ASSERT_EQ(Grid(before.nests[0]), (std::vector<std::string>{"d0 t16 x7", "d1 t64 x1"}));
  TileGraph after = ReorderLoops(before, opts);
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(Grid(after.nests[0]),
            (std::vector<std::string>{"d0 t32 x4", "d0 t16 x" + min(Expr(2), Expr(7) - Expr::var("i0_0_o") * Expr(2)).str(),
                                      "d1 t64 x1"}));
  EXPECT_EQ(after.nests[0].note, "chunked dim 0 tile 16 into 2 chunks of dim 0 tile 32 to fuse with sum_1");
  BlockGraph fused = FuseBlocks(after, opts);
  EXPECT_NO_THROW(verify(fused));
  ASSERT_EQ(fused.functions.size(), 1u);
  // The local holds one 32-row block, written in two 16-row chunks.
  ASSERT_EQ(fused.functions[0].locals.size(), 1u);
  const MemRef& local = fused.memrefs[fused.functions[0].locals[0]];
  EXPECT_EQ(local.shape[0].str(), "32");
  EXPECT_EQ(FuseBlocks(before, opts).functions.size(), 2u);
}

TEST(ReorderLoopsTest, AlignedChainIsLeftAlone) {
  PassOptions opts;
  TileGraph before = ExpandTiles(testing::SoftmaxGraph(64, 128), opts);
  TileGraph after = ReorderLoops(before, opts);
  EXPECT_EQ(print(after), print(before));
}

TEST(ReorderLoopsTest, TilesThatDoNotDivideAreLeftAlone) {
  PassOptions opts;
  TileGraph before = ExpandTiles(ExpThenSum(96, 64, {24, 64}, 1, {32, 64}), opts);
  EXPECT_EQ(print(ReorderLoops(before, opts)), print(before));
}

TEST(ReorderLoopsTest, FusionOffLeavesTheGraphAlone) {
  PassOptions opts;
  opts.fusion = false;
  TileGraph before = ExpandTiles(ExpThenSum(96, 64, {32, 32}, 0, {32, 32}), opts);
  EXPECT_EQ(print(ReorderLoops(before, opts)), print(before));
}

}  // namespace
}  // namespace pypto
