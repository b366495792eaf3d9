#include "ir/tensor_graph.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::TestLoc;

const std::vector<int64_t> kTile = {32, 32};

std::string Shape(const TensorGraphBuilder& b, int id) { return shape_str(b.value(id).shape); }

// Runs `fn` and returns the message of the exception of type E it must throw.
template <typename E, typename Fn>
std::string MessageOf(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

TEST(TensorGraphBuilderTest, BroadcastsSizeOneDims) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(1024)}, DataType::FP32);
  int m = b.add_param("m", {Expr(64), Expr(1)}, DataType::FP32);
  int r = b.add_param("r", {Expr(1), Expr(1024)}, DataType::FP32);
  EXPECT_EQ(Shape(b, b.add_binary(TensorOpKind::Sub, x, m, kTile, TestLoc())), "[64, 1024]");
  EXPECT_EQ(Shape(b, b.add_binary(TensorOpKind::Sub, m, x, kTile, TestLoc())), "[64, 1024]");
  EXPECT_EQ(Shape(b, b.add_binary(TensorOpKind::Mul, m, r, kTile, TestLoc())), "[64, 1024]");
}

TEST(TensorGraphBuilderTest, BroadcastsMissingLeadingDims) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(4), Expr(64), Expr(128)}, DataType::FP32);
  int v = b.add_param("v", {Expr(128)}, DataType::FP32);
  int id = b.add_binary(TensorOpKind::Add, v, x, {1, 32, 32}, TestLoc());
  EXPECT_EQ(Shape(b, id), "[4, 64, 128]");
  b.set_outputs({id});
  TensorGraph g = b.finish();
  const TensorOp& op = g.ops.back();
  EXPECT_EQ(op.inputs, (std::vector<int>{v, x}));
  EXPECT_EQ(op.tile_shape, (std::vector<int64_t>{1, 32, 32}));
}

TEST(TensorGraphBuilderTest, BroadcastsSymbolicDims) {
  TensorGraphBuilder b("f");
  b.add_dyn_dim("M");
  b.add_dyn_dim("M");  // declaring twice keeps one scalar argument
  int x = b.add_param("x", {Expr::var("M"), Expr(256)}, DataType::FP32);
  int m = b.add_param("m", {Expr::var("M"), Expr(1)}, DataType::FP32);
  int id = b.add_binary(TensorOpKind::Div, x, m, kTile, TestLoc());
  EXPECT_EQ(Shape(b, id), "[M, 256]");
  b.set_outputs({id});
  EXPECT_EQ(b.finish().dyn_dims, std::vector<std::string>{"M"});
}

TEST(TensorGraphBuilderTest, DynamicDimAgainstAStaticSizeIsAssumedEqualAndRecordedForEachCall) {
  TensorGraphBuilder b("f");
  b.add_dyn_dim("y_0");
  int x = b.add_param("x", {Expr(8), Expr(16)}, DataType::FP32);
  int y = b.add_param("y", {Expr::var("y_0"), Expr(16)}, DataType::FP32);
  int id = b.add_binary(TensorOpKind::Mul, x, y, kTile, SourceLoc{"model.py", 7});
  EXPECT_EQ(Shape(b, id), "[8, 16]");  // the static size
  ASSERT_EQ(b.dim_checks().size(), 1u);
  const DimCheck& c = b.dim_checks()[0];
  EXPECT_EQ(c.a.str(), "8");
  EXPECT_EQ(c.b.str(), "y_0");
  EXPECT_NE(c.what.find("pypto.mul at model.py:7"), std::string::npos) << c.what;
  EXPECT_NE(c.what.find("[8, 16] and [y_0, 16] must agree in dim 0"), std::string::npos) << c.what;
  // A static 1 still broadcasts, with nothing to check.
  int one = b.add_param("one", {Expr(1), Expr(16)}, DataType::FP32);
  EXPECT_EQ(Shape(b, b.add_binary(TensorOpKind::Add, one, y, kTile, TestLoc())), "[y_0, 16]");
  EXPECT_EQ(b.dim_checks().size(), 1u);
}

TEST(TensorGraphBuilderTest, DimsThatDependOnALoopIndexAreNotAssumedEqual) {
  TensorGraphBuilder b("f");
  b.add_dyn_dim("M");
  int x = b.add_param("x", {Expr::var("M"), Expr(8)}, DataType::FP32);
  int y = b.add_param("y", {Expr::var("M") - Expr::var("i"), Expr(8)}, DataType::FP32);  // i: no dynamic dim
  std::string msg = MessageOf<UserError>([&] { b.add_binary(TensorOpKind::Sub, x, y, {8, 8}, TestLoc()); });
  EXPECT_NE(msg.find("do not broadcast: dim 0 is M versus (M - i)"), std::string::npos) << msg;
  EXPECT_TRUE(b.dim_checks().empty());
}

TEST(TensorGraphBuilderTest, NonBroadcastableShapesNameOpLocationAndBothShapes) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(100)}, DataType::FP32);
  int y = b.add_param("y", {Expr(64), Expr(50)}, DataType::FP32);
  std::string msg =
      MessageOf<UserError>([&] { b.add_binary(TensorOpKind::Add, x, y, kTile, SourceLoc{"model.py", 42}); });
  EXPECT_NE(msg.find("pypto.add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.py:42"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 100]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 50]"), std::string::npos) << msg;
}

TEST(TensorGraphBuilderTest, DistinctSymbolicDimsAreCheckedEqualAtEachCall) {
  TensorGraphBuilder b("f");
  b.add_dyn_dim("M");
  b.add_dyn_dim("N");
  int x = b.add_param("x", {Expr::var("M"), Expr(8)}, DataType::FP32);
  int y = b.add_param("y", {Expr::var("N"), Expr(8)}, DataType::FP32);
  EXPECT_EQ(Shape(b, b.add_binary(TensorOpKind::Sub, x, y, {8, 8}, TestLoc())), "[M, 8]");
  ASSERT_EQ(b.dim_checks().size(), 1u);
  EXPECT_NE(b.dim_checks()[0].what.find("pypto.sub"), std::string::npos);
  EXPECT_NE(b.dim_checks()[0].what.find("(M versus N)"), std::string::npos) << b.dim_checks()[0].what;
}

TEST(TensorGraphBuilderTest, TileRankMismatchIsAUserError) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  std::string msg = MessageOf<UserError>([&] { b.add_unary(TensorOpKind::Exp, x, {32}, SourceLoc{"k.py", 7}); });
  EXPECT_NE(msg.find("pypto.exp at k.py:7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1, expected rank 2"), std::string::npos) << msg;
  // A broadcast raises the rank of the iteration space: the tile must match the result.
  int v = b.add_param("v", {Expr(64)}, DataType::FP32);
  EXPECT_THROW(b.add_binary(TensorOpKind::Add, v, x, {32}, TestLoc()), UserError);
}

TEST(TensorGraphBuilderTest, NonPositiveTileIsAUserError) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  EXPECT_THROW(b.add_unary(TensorOpKind::Exp, x, {32, 0}, TestLoc()), UserError);
}

TEST(TensorGraphBuilderTest, MissingTileShapeSaysHowToSetIt) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  for (auto add : {+[](TensorGraphBuilder& b, int x) { b.add_unary(TensorOpKind::Exp, x, {}, TestLoc()); },
                   +[](TensorGraphBuilder& b, int x) { b.add_binary(TensorOpKind::Add, x, x, {}, TestLoc()); },
                   +[](TensorGraphBuilder& b, int x) { b.add_reduce(TensorOpKind::Sum, x, 0, true, {}, TestLoc()); }}) {
    std::string msg = MessageOf<UserError>([&] { add(b, x); });
    EXPECT_NE(msg.find("no vec tile shape is set"), std::string::npos) << msg;
    EXPECT_NE(msg.find("pypto.set_vec_tile_shapes"), std::string::npos) << msg;
  }
}

TEST(TensorGraphBuilderTest, ReduceDimOutOfRangeIsAUserError) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  std::string msg =
      MessageOf<UserError>([&] { b.add_reduce(TensorOpKind::Amax, x, 2, true, kTile, SourceLoc{"k.py", 9}); });
  EXPECT_NE(msg.find("pypto.amax at k.py:9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 2 is out of range"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-2 to 1"), std::string::npos) << msg;
  EXPECT_THROW(b.add_reduce(TensorOpKind::Sum, x, -3, true, kTile, TestLoc()), UserError);
}

TEST(TensorGraphBuilderTest, MixedDtypesPromoteAsTorch) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  int h = b.add_param("h", {Expr(64), Expr(64)}, DataType::FP16);
  int i = b.add_param("i", {Expr(64), Expr(64)}, DataType::INT32);
  EXPECT_EQ(b.value(b.add_binary(TensorOpKind::Mul, x, h, kTile, TestLoc(5))).dtype, DataType::FP32);
  EXPECT_EQ(b.value(b.add_binary(TensorOpKind::Add, i, h, kTile, TestLoc(5))).dtype, DataType::FP16);
  EXPECT_EQ(b.value(b.add_binary(TensorOpKind::Div, i, i, kTile, TestLoc(5))).dtype, DataType::FP32);
  EXPECT_EQ(b.value(b.add_binary(TensorOpKind::Gt, i, x, kTile, TestLoc(5))).dtype, DataType::BOOL);
  // A where's condition must be boolean.
  std::string msg = MessageOf<TypeError>([&] {
    b.add_elementwise(TensorOpKind::Where, {Operand::tensor(x), Operand::tensor(x), Operand::tensor(h)}, kTile,
                      TestLoc(6));
  });
  EXPECT_NE(msg.find("pypto.where"), std::string::npos) << msg;
  EXPECT_NE(msg.find("condition must be DT_BOOL, found DT_FP32"), std::string::npos) << msg;
}

TEST(TensorGraphBuilderTest, OperandOfAnotherFunctionIsAUserError) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(64)}, DataType::FP32);
  EXPECT_THROW(b.add_binary(TensorOpKind::Add, x, 17, kTile, TestLoc()), UserError);
  EXPECT_THROW(b.add_unary(TensorOpKind::Exp, -1, kTile, TestLoc()), UserError);
  EXPECT_THROW(b.set_outputs({5}), UserError);
}

TEST(TensorGraphBuilderTest, BadParametersAndEmptyResults) {
  TensorGraphBuilder b("f");
  EXPECT_THROW(b.add_param("x", {Expr(0), Expr(4)}, DataType::FP32), UserError);
  EXPECT_THROW(b.add_param("s", {}, DataType::FP32), NotSupportedError);
  b.add_param("x", {Expr(4)}, DataType::FP32);
  EXPECT_THROW(b.finish(), UserError);  // returns nothing
}

TEST(TensorGraphBuilderTest, ReduceOutputShapes) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(64), Expr(1024)}, DataType::FP32);
  int keep_last = b.add_reduce(TensorOpKind::Amax, x, -1, true, kTile, TestLoc());
  int drop_last = b.add_reduce(TensorOpKind::Sum, x, -1, false, kTile, TestLoc());
  int keep_first = b.add_reduce(TensorOpKind::Sum, x, 0, true, kTile, TestLoc());
  int drop_first = b.add_reduce(TensorOpKind::Amax, x, 0, false, kTile, TestLoc());
  EXPECT_EQ(Shape(b, keep_last), "[64, 1]");
  EXPECT_EQ(Shape(b, drop_last), "[64]");
  EXPECT_EQ(Shape(b, keep_first), "[1, 1024]");
  EXPECT_EQ(Shape(b, drop_first), "[1024]");
  b.set_outputs({keep_last});
  TensorGraph g = b.finish();
  // Negative dims are stored normalised, so later passes never see them.
  EXPECT_EQ(g.ops[0].dim, 1);
  EXPECT_TRUE(g.ops[0].keepdim);
  EXPECT_EQ(g.ops[1].dim, 1);
  EXPECT_FALSE(g.ops[1].keepdim);
}

TEST(TensorGraphBuilderTest, ReducingAVectorToAScalarIsNotSupported) {
  TensorGraphBuilder b("f");
  int v = b.add_param("v", {Expr(64)}, DataType::FP32);
  EXPECT_THROW(b.add_reduce(TensorOpKind::Sum, v, 0, false, {32}, TestLoc()), NotSupportedError);
  EXPECT_EQ(shape_str(b.value(b.add_reduce(TensorOpKind::Sum, v, 0, true, {32}, TestLoc())).shape), "[1]");
}

TEST(TensorGraphBuilderTest, OutputsAreNamedByPosition) {
  TensorGraphBuilder b("f");
  int x = b.add_param("x", {Expr(8), Expr(8)}, DataType::FP32);
  int e = b.add_unary(TensorOpKind::Exp, x, {8, 8}, TestLoc());
  int s = b.add_reduce(TensorOpKind::Sum, e, 1, true, {8, 8}, TestLoc());
  b.set_outputs({e, s});
  TensorGraph g = b.finish();
  EXPECT_EQ(g.value(e).name, "out0");
  EXPECT_EQ(g.value(s).name, "out1");
  EXPECT_EQ(g.value(x).name, "x");
}

TEST(TensorGraphBuilderTest, OpNamesRoundTrip) {
  for (TensorOpKind k : {TensorOpKind::Add, TensorOpKind::Sub, TensorOpKind::Mul, TensorOpKind::Div,
                         TensorOpKind::Max, TensorOpKind::Exp, TensorOpKind::Amax, TensorOpKind::Sum})
    EXPECT_EQ(op_kind_from_name(op_info(k).name), k);
  EXPECT_EQ(op_info(TensorOpKind::Max).name, std::string("maximum"));
  EXPECT_EQ(op_kind_from_name("matmul"), TensorOpKind::Matmul);
  EXPECT_THROW(op_kind_from_name("conv2d"), UserError);
}

TEST(TensorGraphBuilderTest, PrintsTheSoftmaxChain) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  EXPECT_EQ(print(g),
            "tensor_graph @softmax(%x: DT_FP32[64, 1024]) {\n"
            "  %v1 = amax(%x, dim=1, keepdim) : DT_FP32[64, 1]  tile [32, 32]  @ model.py:2\n"
            "  %v2 = sub(%x, %v1) : DT_FP32[64, 1024]  tile [32, 32]  @ model.py:3\n"
            "  %v3 = exp(%v2) : DT_FP32[64, 1024]  tile [32, 32]  @ model.py:4\n"
            "  %v4 = sum(%v3, dim=1, keepdim) : DT_FP32[64, 1]  tile [32, 32]  @ model.py:5\n"
            "  %out = div(%v3, %v4) : DT_FP32[64, 1024]  tile [32, 32]  @ model.py:6\n"
            "  return %out\n"
            "}\n");
}

}  // namespace
}  // namespace pypto
