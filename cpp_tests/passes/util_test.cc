// passes/util: matmul_output_tile's batch block.
#include "passes/util.h"

#include <gtest/gtest.h>

#include <vector>

#include "ir/tensor_graph.h"

namespace pypto {
namespace {

/// The output tile of a [batch.., m, k] @ [batch.., k, n] product with cube tile (cm, ck, cn).
std::vector<int64_t> TileOf(std::vector<Expr> batch, int64_t m, int64_t k, int64_t n, std::vector<int64_t> cube) {
  TensorGraphBuilder b("mm");
  std::vector<Expr> as = batch, bs = batch;
  as.insert(as.end(), {Expr(m), Expr(k)});
  bs.insert(bs.end(), {Expr(k), Expr(n)});
  int a = b.add_param("a", as, DataType::FP32);
  int w = b.add_param("w", bs, DataType::FP32);
  int mm = b.add_matmul(a, w, DataType::FP32, cube, cube, SourceLoc{"m.py", 1});
  b.set_outputs({mm});
  TensorGraph g = b.finish();
  return matmul_output_tile(g, g.ops.back());
}

TEST(MatmulOutputTileTest, TinyProductsOfABatchShareATask) {
  // One row against a 64 x 64 matrix: 4096 multiply-adds each, 64 would make a block (256K); the
  // batch dim of 8 caps it, 32 tasks.
  EXPECT_EQ(TileOf({Expr(32), Expr(8)}, 1, 64, 64, {8, 64, 64}), (std::vector<int64_t>{1, 8, 1, 64}));
  // Eight rows against a 64 x 64 matrix: 32K multiply-adds, 8 per task.
  EXPECT_EQ(TileOf({Expr(32), Expr(16)}, 8, 64, 64, {8, 64, 64}), (std::vector<int64_t>{1, 8, 8, 64}));
  // A symbolic batch dim: the block by the products' size alone.
  EXPECT_EQ(TileOf({Expr::var("C")}, 1, 64, 64, {8, 64, 64}), (std::vector<int64_t>{64, 1, 64}));
  // 16 tasks are kept: 64 products of 4096 make 8 blocks of 8, so the block halves to 4.
  EXPECT_EQ(TileOf({Expr(64)}, 1, 64, 64, {8, 64, 64}), (std::vector<int64_t>{4, 1, 64}));
  // A batch too small to keep 16 tasks at any block: one product per task, as before.
  EXPECT_EQ(TileOf({Expr(4)}, 1, 64, 64, {8, 64, 64}), (std::vector<int64_t>{1, 1, 64}));
}

TEST(MatmulOutputTileTest, ProductsWorthATaskAndUnbatchedProductsAreUnchanged) {
  // 64 x 128 x 64: 524288 multiply-adds, above the block's 256K.
  EXPECT_EQ(TileOf({Expr(128)}, 64, 128, 64, {64, 128, 64}), (std::vector<int64_t>{1, 64, 64}));
  // Exactly kBatchBlockMacs (64 x 64 x 64, or one row of 4096 by 64 columns): no block.
  EXPECT_EQ(TileOf({Expr(128)}, 64, 64, 64, {64, 64, 64}), (std::vector<int64_t>{1, 64, 64}));
  EXPECT_EQ(TileOf({Expr(128)}, 1, 4096, 64, {8, 64, 64}), (std::vector<int64_t>{1, 1, 64}));
  // The cube tile clamps to small static dims.
  EXPECT_EQ(TileOf({}, 16, 64, 40, {32, 64, 64}), (std::vector<int64_t>{16, 40}));
  // A symbolic contraction: no estimate, no block.
  TensorGraphBuilder b("mm");
  int a = b.add_param("a", {Expr(64), Expr(1), Expr::var("K")}, DataType::FP32);
  int w = b.add_param("w", {Expr(64), Expr::var("K"), Expr(64)}, DataType::FP32);
  int mm = b.add_matmul(a, w, DataType::FP32, {8, 64, 64}, {8, 64, 64}, SourceLoc{"m.py", 1});
  b.set_outputs({mm});
  TensorGraph g = b.finish();
  EXPECT_EQ(matmul_output_tile(g, g.ops.back()), (std::vector<int64_t>{1, 1, 64}));
}

}  // namespace
}  // namespace pypto
