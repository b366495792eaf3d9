#include "passes/build_orchestration.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::LoopsOf;

// Depth of the loop nest around the single CALL of a statement.
int CallDepth(const Stmt& s, const Call** call) {
  if (auto* c = std::get_if<Call>(&s.node)) {
    *call = c;
    return 0;
  }
  const Loop& l = std::get<Loop>(s.node);
  EXPECT_EQ(l.body.size(), 1u);
  return 1 + CallDepth(l.body.at(0), call);
}

TEST(BuildOrchestrationTest, WrapsTheFusedCallInItsGridLoop) {
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), PassOptions{});
  ExecutionGraph e = BuildOrchestration(r.block, PassOptions{});
  EXPECT_NO_THROW(verify(e));
  ASSERT_EQ(e.orchestration.size(), 1u);
  const Loop& grid = std::get<Loop>(e.orchestration[0].node);
  EXPECT_EQ(grid.var, "g0");
  EXPECT_TRUE(grid.parallel);
  EXPECT_EQ(grid.stop.as_const(), 2);
  ASSERT_EQ(grid.body.size(), 1u);
  const Call& call = std::get<Call>(grid.body[0].node);
  EXPECT_EQ(call.callee, 0);
  EXPECT_EQ(call.args.size(), 2u);
  EXPECT_EQ(e.functions.size(), 1u);
  EXPECT_EQ(e.functions[0].buffer_bytes, r.block.functions[0].buffer_bytes);
  EXPECT_EQ(e.params, r.block.params);
  EXPECT_EQ(e.outputs, r.block.outputs);
  EXPECT_EQ(print(e),
            "execution_graph @softmax(params %x; outputs %out) {\n"
            "  %x : !pto.memref<gm,64x1024,f32>  // input\n"
            "  %v3 : !pto.memref<local,32x1024,f32>  // local\n"
            "  %out : !pto.memref<gm,64x1024,f32>  // output\n"
            "  FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=32\n"
            "    CALL @softmax_fused_0(%x -> %x[(g0 * 32), 0; 32, 1024], %out -> %out[(g0 * 32), 0; 32, 1024], "
            "%g0 -> g0)\n"
            "  ENDFOR\n"
            "}\n");
}

TEST(BuildOrchestrationTest, RunsLaunchesInOrderWithTheirWholeGrid) {
  PassOptions opts;
  opts.fusion = false;
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  const ExecutionGraph& e = r.execution;
  ASSERT_EQ(e.orchestration.size(), 5u);
  std::vector<int> depths, callees;
  for (const Stmt& s : e.orchestration) {
    const Call* call = nullptr;
    depths.push_back(CallDepth(s, &call));
    callees.push_back(call->callee);
  }
  EXPECT_EQ(depths, (std::vector<int>{1, 2, 2, 1, 2}));
  EXPECT_EQ(callees, (std::vector<int>{0, 1, 2, 3, 4}));
  // Outermost grid loop first.
  const Loop& outer = std::get<Loop>(e.orchestration[1].node);
  EXPECT_EQ(outer.var, "g0");
  EXPECT_EQ(LoopsOf(outer.body).at(0)->var, "g1");
  EXPECT_EQ(LoopsOf(outer.body).at(0)->stop.as_const(), 32);
}

TEST(BuildOrchestrationTest, AnEmptyGridIsABareCall) {
  TensorGraphBuilder b("total");
  int x = b.add_param("x", {Expr(64)}, DataType::FP32);
  b.set_outputs({b.add_reduce(TensorOpKind::Sum, x, 0, true, {32}, testing::TestLoc())});
  PipelineResult r = run_pipeline(b.finish(), PassOptions{});
  ASSERT_TRUE(r.block.launches.at(0).grid.empty());
  ASSERT_EQ(r.execution.orchestration.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<Call>(r.execution.orchestration[0].node));
}

}  // namespace
}  // namespace pypto
