#include "passes/fuse_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/expand_tiles.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::InstrsOf;
using testing::LoopsOf;
using testing::TestLoc;

/// softmax(q @ k^T * scale) @ v over q [s, d], k and v [t, d], written from primitives; with
/// `return_probs` the probabilities are returned too.
TensorGraph AttentionGraph(int64_t s, int64_t t, int64_t d, double scale, bool return_probs = false) {
  TensorGraphBuilder b("attention");
  const std::vector<int64_t> tile = {8, 64};
  int q = b.add_param("q", {Expr(s), Expr(d)}, DataType::FP32);
  int k = b.add_param("k", {Expr(t), Expr(d)}, DataType::FP32);
  int v = b.add_param("v", {Expr(t), Expr(d)}, DataType::FP32);
  int kt = b.add_view(k, {Expr(d), Expr(t)}, {Expr(0), Expr(0)}, {1, 0}, {1, 1}, {}, TestLoc(2));
  int sc = b.add_matmul(q, kt, DataType::FP32, {32, d, 64}, {32, d, 64}, TestLoc(2));
  sc = b.add_elementwise(TensorOpKind::Mul, {Operand::tensor(sc), Operand::scalar(scale, true)}, tile, TestLoc(2));
  int m = b.add_reduce(TensorOpKind::Amax, sc, -1, true, tile, TestLoc(3));
  int e = b.add_unary(TensorOpKind::Exp, b.add_binary(TensorOpKind::Sub, sc, m, tile, TestLoc(3)), tile, TestLoc(3));
  int p = b.add_binary(TensorOpKind::Div, e, b.add_reduce(TensorOpKind::Sum, e, -1, true, tile, TestLoc(4)), tile,
                       TestLoc(4));
  int o = b.add_matmul(p, v, DataType::FP32, {32, 64, d}, {32, 64, d}, TestLoc(5));
  b.set_outputs(return_probs ? std::vector<int>{o, p} : std::vector<int>{o});
  return b.finish();
}

std::vector<std::string> OpNames(const TensorGraph& g) {
  std::vector<std::string> names;
  for (const TensorOp& op : g.ops) names.push_back(op_info(op.kind).name);
  return names;
}

TEST(FuseAttentionTest, TheChainBecomesAKeyCopyAndOneAttentionOp) {
  TensorGraph g = FuseAttention(AttentionGraph(100, 70, 32, 0.25), PassOptions{});
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(OpNames(g), (std::vector<std::string>{"view", "cast", "attention"}));
  const TensorOp& att = g.ops.back();
  EXPECT_EQ(att.scale, 0.25);
  EXPECT_EQ(att.cube_tile, (std::vector<int64_t>{32, 32, 64}));
  EXPECT_EQ(g.value(att.inputs[1]).name, "k_t");
  EXPECT_EQ(shape_str(g.value(att.inputs[1]).shape), "[32, 70]");
  EXPECT_EQ(g.outputs, std::vector<int>{att.output});
  // The scores, exponentials and row statistics are gone with their ops.
  EXPECT_EQ(g.values.size(), 6u) << print(g);
  EXPECT_NE(print(g).find("attention(%q, %k_t, %v, scale=0.25, rows=32, key_block=64)"), std::string::npos) << print(g);
}

TEST(FuseAttentionTest, ReturnedProbabilitiesKeepThePrimitives) {
  TensorGraph in = AttentionGraph(64, 64, 32, 0.5, true);
  EXPECT_EQ(print(FuseAttention(in, PassOptions{})), print(in));
}

TEST(FuseAttentionTest, TilesAsAnOnlineSoftmaxOverKeyBlocks) {
  TileGraph t = ExpandTiles(FuseAttention(AttentionGraph(100, 70, 32, 0.25), PassOptions{}), PassOptions{});
  EXPECT_NO_THROW(verify(t));
  ASSERT_EQ(t.nests.size(), 2u);
  EXPECT_EQ(t.nests[1].name, "attention_2");
  // The query-row grid is parallel; the key blocks (70 = 64 + a tail of 6) are one sequential loop.
  std::vector<const Loop*> loops;
  for (const std::vector<Stmt>* body = &t.nests[1].body; !LoopsOf(*body).empty(); body = &loops.back()->body)
    loops.push_back(LoopsOf(*body).front());
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_TRUE(loops[0]->parallel && loops[1]->parallel);
  EXPECT_FALSE(loops[2]->parallel);
  EXPECT_EQ(loops[2]->stop.str(), "2");
  std::string ops;
  for (const Instr* in : InstrsOf(loops[2]->body)) ops += std::string(opcode_name(in->op)) + " ";
  EXPECT_EQ(ops,
            "tload tmatmul trowmax tmax tsub texp tmax tmul trowexpandsub tmin texp trowsum tadd trowexpandmul tload "
            "tmatmul_acc ");
  // No memory instruction touches a score-shaped memref.
  for (const Instr* in : InstrsOf(t.nests[1].body))
    if (in->memref >= 0) EXPECT_NE(shape_str(t.memrefs[in->memref].shape), "[100, 70]");
}

/// Grouped-query attention with an additive mask: q [2, 3, s, d], k and v [2, 1, t, d] (one head per
/// group of three), softmax(q @ k^T * 0.5 + mask) @ v with a mask of shape `mask_shape`.
/// `make_mask`, when given, builds the mask in the graph instead of taking it as a parameter.
TensorGraph MaskedGroupedGraph(int64_t s, int64_t t, int64_t d, const std::vector<Expr>& mask_shape,
                               const std::function<int(TensorGraphBuilder&)>& make_mask = nullptr) {
  TensorGraphBuilder b("masked");
  const std::vector<int64_t> tile = {1, 1, 8, 64};
  int q = b.add_param("q", {Expr(2), Expr(3), Expr(s), Expr(d)}, DataType::FP32);
  int k = b.add_param("k", {Expr(2), Expr(1), Expr(t), Expr(d)}, DataType::FP32);
  int v = b.add_param("v", {Expr(2), Expr(1), Expr(t), Expr(d)}, DataType::FP32);
  int mask = make_mask ? make_mask(b) : b.add_param("mask", mask_shape, DataType::FP32);
  int kt = b.add_view(k, {Expr(2), Expr(1), Expr(d), Expr(t)}, {Expr(0), Expr(0), Expr(0), Expr(0)}, {0, 1, 3, 2},
                      {1, 1, 1, 1}, {}, TestLoc(2));
  int sc = b.add_matmul(q, kt, DataType::FP32, {32, d, 64}, {32, d, 64}, TestLoc(2));
  sc = b.add_elementwise(TensorOpKind::Mul, {Operand::tensor(sc), Operand::scalar(0.5, true)}, tile, TestLoc(2));
  sc = b.add_binary(TensorOpKind::Add, mask, sc, tile, TestLoc(2));
  int m = b.add_reduce(TensorOpKind::Amax, sc, -1, true, tile, TestLoc(3));
  int e = b.add_unary(TensorOpKind::Exp, b.add_binary(TensorOpKind::Sub, sc, m, tile, TestLoc(3)), tile, TestLoc(3));
  int p = b.add_binary(TensorOpKind::Div, e, b.add_reduce(TensorOpKind::Sum, e, -1, true, tile, TestLoc(4)), tile,
                       TestLoc(4));
  b.set_outputs({b.add_matmul(p, v, DataType::FP32, {32, 64, d}, {32, 64, d}, TestLoc(5))});
  return b.finish();
}

TEST(FuseAttentionTest, AMaskAndSharedKeyHeadsJoinTheAttentionOp) {
  TensorGraph g = FuseAttention(MaskedGroupedGraph(40, 70, 16, {Expr(40), Expr(70)}), PassOptions{});
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(OpNames(g), (std::vector<std::string>{"view", "cast", "attention"}));
  EXPECT_NE(print(g).find("attention(%q, %k_t, %v, %mask, scale=0.5"), std::string::npos) << print(g);
  // Per key block: the mask block is loaded, reshaped to the scores' rank and added.
  TileGraph t = ExpandTiles(g, PassOptions{});
  EXPECT_NO_THROW(verify(t));
  std::string ops;
  for (const Instr* in : InstrsOf(t.nests.back().body)) ops += std::string(opcode_name(in->op)) + " ";
  EXPECT_NE(ops.find("tload tmatmul tload treshape tadd trowmax"), std::string::npos) << ops;
  // A mask that is not [.., S, T] (here a row of keys for every query) keeps the primitives.
  TensorGraph row = MaskedGroupedGraph(40, 70, 16, {Expr(1), Expr(70)});
  EXPECT_EQ(print(FuseAttention(row, PassOptions{})), print(row));
}

/// A mask of s queries at the end of t keys written from primitives, as a kernel builds a causal
/// one: where(compare(arange(t)[1, t] - arange(s)[s, 1], bound), -inf, 0).
int IndexMask(TensorGraphBuilder& b, int64_t s, int64_t t, TensorOpKind compare, double bound,
              DataType index = DataType::INT32) {
  const std::vector<int64_t> tile = {64, 64};
  int rows = b.add_reshape(b.add_arange(Expr(s), 0, 1, index, {64}, TestLoc(1)), {Expr(s), Expr(1)}, TestLoc(1));
  int cols = b.add_reshape(b.add_arange(Expr(t), 0, 1, index, {64}, TestLoc(1)), {Expr(1), Expr(t)}, TestLoc(1));
  int diff = b.add_binary(TensorOpKind::Sub, cols, rows, tile, TestLoc(1));
  int cond = b.add_elementwise(compare, {Operand::tensor(diff), Operand::scalar(bound, false)}, tile, TestLoc(1));
  int zero = b.add_full({Expr(s), Expr(t)}, Operand::scalar(0.0, true), DataType::FP32, {Expr(s), Expr(t)}, tile,
                        TestLoc(1));
  return b.add_elementwise(TensorOpKind::Where,
                           {Operand::tensor(cond), Operand::scalar(-INFINITY, true), Operand::tensor(zero)}, tile,
                           TestLoc(1));
}

TEST(FuseAttentionTest, ACausalMaskFromPrimitivesBoundsEachTasksKeyLoop) {
  auto causal = [](TensorOpKind compare, double bound, DataType index = DataType::INT32) {
    return FuseAttention(MaskedGroupedGraph(100, 130, 16, {}, [=](TensorGraphBuilder& b) {
                           return IndexMask(b, 100, 130, compare, bound, index);
                         }),
                         PassOptions{});
  };
  TensorGraph g = causal(TensorOpKind::Gt, 30);
  EXPECT_NO_THROW(verify(g));
  ASSERT_EQ(g.ops.back().kind, TensorOpKind::Attention);
  ASSERT_TRUE(g.ops.back().causal.has_value()) << print(g);
  EXPECT_EQ(g.ops.back().causal->str(), "30");
  EXPECT_NE(print(g).find("key_block=64, causal=30)"), std::string::npos) << print(g);
  // j - i >= 31 masks the same keys; j - i > 30.5 too.
  EXPECT_EQ(causal(TensorOpKind::Ge, 31).ops.back().causal->str(), "30");
  EXPECT_EQ(causal(TensorOpKind::Gt, 30.5).ops.back().causal->str(), "30");
  // Masking the keys before the diagonal is no causal mask: every key block is visited.
  TensorGraph before = causal(TensorOpKind::Lt, 30);
  ASSERT_EQ(before.ops.back().kind, TensorOpKind::Attention);
  EXPECT_FALSE(before.ops.back().causal.has_value());
  // Indices whose difference is exact and signed give the bound; narrow or unsigned ones wrap
  // (uint8 129 - 0 is fine, 0 - 129 is 127), so their mask is kept whole.
  EXPECT_EQ(causal(TensorOpKind::Gt, 30, DataType::INT64).ops.back().causal->str(), "30");
  EXPECT_EQ(causal(TensorOpKind::Gt, 30, DataType::FP32).ops.back().causal->str(), "30");
  for (DataType narrow : {DataType::INT8, DataType::UINT8, DataType::INT16, DataType::UINT32}) {
    TensorGraph wraps = causal(TensorOpKind::Gt, 30, narrow);
    ASSERT_EQ(wraps.ops.back().kind, TensorOpKind::Attention) << print(wraps);
    EXPECT_FALSE(wraps.ops.back().causal.has_value()) << print(wraps);
  }
  // The key loop of a task stops at the bound of its last query row: row offset + 32 rows + 30.
  TileGraph t = ExpandTiles(g, PassOptions{});
  EXPECT_NO_THROW(verify(t));
  const Loop* keys = nullptr;
  for (const std::vector<Stmt>* body = &t.nests.back().body; !LoopsOf(*body).empty(); body = &keys->body)
    keys = LoopsOf(*body).front();
  ASSERT_NE(keys, nullptr);
  EXPECT_FALSE(keys->parallel);
  EXPECT_NE(keys->stop.str().find("min(130, max(0, "), std::string::npos) << keys->stop.str();
}

TEST(FuseAttentionTest, TheVerifierChecksTheMaskShape) {
  TensorGraph g = FuseAttention(MaskedGroupedGraph(40, 70, 16, {Expr(40), Expr(70)}), PassOptions{});
  g.values[g.ops.back().inputs[3]].shape = {Expr(41), Expr(70)};
  try {
    verify(g);
    FAIL() << "expected a VerifyError";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("has a mask of shape [41, 70]; expected [.., S, T] = [.., 40, 70]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pypto
