#include "passes/retile_epilogues.h"

#include <gtest/gtest.h>

#include "ir/printer.h"
#include "ir/verifier.h"

namespace pypto {
namespace {

/// relu(a @ w + bias) with a 16x16 vec tile and a 32x64 output tile.
TensorGraph MatmulEpilogue() {
  TensorGraphBuilder b("mm");
  int a = b.add_param("a", {Expr(64), Expr(96)}, DataType::FP32);
  int w = b.add_param("w", {Expr(96), Expr(128)}, DataType::FP32);
  int bias = b.add_param("bias", {Expr(128)}, DataType::FP32);
  int mm = b.add_matmul(a, w, DataType::FP32, {32, 32, 64}, {32, 32, 64}, SourceLoc{"m.py", 1});
  int add = b.add_binary(TensorOpKind::Add, mm, bias, {16, 16}, SourceLoc{"m.py", 2});
  int relu = b.add_unary(TensorOpKind::Relu, add, {16, 16}, SourceLoc{"m.py", 3});
  b.set_outputs({relu});
  return b.finish();
}

TEST(RetileEpiloguesTest, TheEpilogueTakesTheMatmulsOutputTile) {
  TensorGraph g = MatmulEpilogue();
  TensorGraph out = RetileEpilogues(g, PassOptions{});
  verify(out);
  ASSERT_EQ(out.ops.size(), 3u);
  EXPECT_EQ(out.ops[0].tile_shape, g.ops[0].tile_shape);  // the matmul itself is untouched
  for (int i : {1, 2}) {
    EXPECT_EQ(out.ops[i].tile_shape, (std::vector<int64_t>{32, 64})) << i;
    EXPECT_EQ(out.ops[i].tile_note, "retiled to [32, 64] (the output tile of @matmul_0) to fuse with it") << i;
    EXPECT_EQ(out.ops[i].retiled_from, 0) << i;  // the matmul whose cube tile shrinks for them
  }
  EXPECT_EQ(out.ops[0].retiled_from, -1);
}

TEST(RetileEpiloguesTest, TheEpilogueOfTinyBatchedProductsTakesTheBatchBlock) {
  // 32 x 8 products of one row by a 64 x 64 matrix: 8 of them per task (matmul_output_tile).
  TensorGraphBuilder b("bmm");
  int a = b.add_param("a", {Expr(32), Expr(8), Expr(1), Expr(64)}, DataType::FP32);
  int w = b.add_param("w", {Expr(32), Expr(8), Expr(64), Expr(64)}, DataType::FP32);
  int mm = b.add_matmul(a, w, DataType::FP32, {8, 64, 64}, {8, 64, 64}, SourceLoc{"m.py", 1});
  int add = b.add_binary(TensorOpKind::Add, mm, a, {2, 2, 1, 64}, SourceLoc{"m.py", 2});
  b.set_outputs({add});
  TensorGraph out = RetileEpilogues(b.finish(), PassOptions{});
  verify(out);
  EXPECT_EQ(out.ops[1].tile_shape, (std::vector<int64_t>{1, 8, 1, 64}));
  EXPECT_EQ(out.ops[1].tile_note, "retiled to [1, 8, 1, 64] (the output tile of @matmul_0) to fuse with it");
}

TEST(RetileEpiloguesTest, OpsNotOverAMatmulKeepTheirTile) {
  TensorGraphBuilder b("plain");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  int e = b.add_unary(TensorOpKind::Exp, x, {16, 16}, SourceLoc{});
  b.set_outputs({e});
  TensorGraph g = b.finish();
  TensorGraph out = RetileEpilogues(g, PassOptions{});
  EXPECT_EQ(print(out), print(g));
  EXPECT_TRUE(out.ops[0].tile_note.empty());
  EXPECT_EQ(out.ops[0].retiled_from, -1);
}

}  // namespace
}  // namespace pypto
