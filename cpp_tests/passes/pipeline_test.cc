#include "passes/pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

std::vector<std::string> RecordNames(const PipelineResult& r) {
  std::vector<std::string> out;
  for (const PassRecord& p : r.passes) out.push_back(p.name);
  return out;
}

const PassRecord& Record(const PipelineResult& r, const std::string& name) {
  for (const PassRecord& p : r.passes)
    if (p.name == name) return p;
  throw std::runtime_error("no record for " + name);
}

TEST(PipelineTest, RegistryListsThePassesInOrder) {
  EXPECT_EQ(pass_names(), (std::vector<std::string>{"fuse_attention", "retile_epilogues", "expand_tiles", "reorder_loops", "fuse_blocks", "fuse_loops",
                                                    "flatten_loops", "forward_tiles", "rematerialize", "plan_buffers",
                                                    "plan_matmul_panels", "plan_view_loads", "stream_stores", "fuse_chains", "fast_forms",
                                                    "build_orchestration", "binary_expand"}));
}

TEST(PipelineTest, RecordsOnePassRecordPerPassInRegistryOrder) {
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), PassOptions{});
  EXPECT_EQ(RecordNames(r), pass_names());
  for (const PassRecord& p : r.passes) {
    EXPECT_FALSE(p.skipped) << p.name;
    // rematerialize only acts on functions over the budget (this one fits);
    // reorder_loops only when a producer's grid differs from its consumer's;
    // binary_expand only on loops with max_range/min_range; flatten_loops only on loops of one
    // iteration (tiles as wide as the tensor); fuse_attention only on attention chains;
    // retile_epilogues only on elementwise ops over a matmul; stream_stores only on outputs far
    // larger than the caches; fast_forms only on fused sines, cosines and tangents;
    // plan_matmul_panels only on matmuls.
    EXPECT_EQ(p.changed, p.name != "rematerialize" && p.name != "reorder_loops" && p.name != "binary_expand" &&
                             p.name != "flatten_loops" && p.name != "fuse_attention" && p.name != "retile_epilogues" &&
                             p.name != "stream_stores" && p.name != "fast_forms" &&
                             p.name != "plan_matmul_panels")
        << p.name;
    EXPECT_GE(p.seconds, 0.0) << p.name;
  }
  // Each record holds the IR right after its pass.
  EXPECT_EQ(Record(r, "expand_tiles").ir, print(r.tile));
  EXPECT_EQ(Record(r, "fuse_chains").ir, print(r.block));
  EXPECT_EQ(Record(r, "build_orchestration").ir, print(r.execution));
  EXPECT_EQ(print(r.tensor), print(testing::SoftmaxGraph(64, 1024)));
}

TEST(PipelineTest, OptionalPassesThatChangeNothingSayUnchanged) {
  PipelineResult r = run_pipeline(testing::AddGraph({Expr(64), Expr(100)}), PassOptions{});
  for (const char* name : {"fuse_loops", "forward_tiles"}) {
    const PassRecord& p = Record(r, name);
    EXPECT_FALSE(p.changed) << name;
    EXPECT_FALSE(p.skipped) << name;
    EXPECT_TRUE(p.ir.empty()) << name;
  }
  EXPECT_TRUE(Record(r, "fuse_blocks").changed);
}

TEST(PipelineTest, DisablingFuseLoopsSkipsIt) {
  PassOptions opts;
  opts.disabled = {"fuse_loops"};
  opts.sram_budget_kb = 4096;  // unfused loops keep big locals; do not split here
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  EXPECT_EQ(RecordNames(r), pass_names());
  const PassRecord& p = Record(r, "fuse_loops");
  EXPECT_TRUE(p.skipped);
  EXPECT_FALSE(p.changed);
  EXPECT_TRUE(p.ir.empty());
  EXPECT_FALSE(Record(r, "forward_tiles").skipped);
  // The five per-op loops stay separate, so sub's and exp's results stay in local buffers.
  EXPECT_EQ(testing::LoopsOf(r.block.functions.at(0).body).size(), 5u);
  EXPECT_EQ(r.block.functions[0].locals.size(), 2u);
}

TEST(PipelineTest, DisablingBothOptionalPassesKeepsEveryLocal) {
  PassOptions opts;
  opts.disabled = {"fuse_loops", "forward_tiles"};
  opts.sram_budget_kb = 4096;
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  EXPECT_TRUE(Record(r, "forward_tiles").skipped);
  EXPECT_EQ(r.block.functions.at(0).locals.size(), 4u);
}

TEST(PipelineTest, UnknownDisabledPassIsAUserError) {
  PassOptions opts;
  opts.disabled = {"fuse_everything"};
  try {
    run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
    FAIL() << "an unknown pass name was accepted";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown pass 'fuse_everything'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expand_tiles, reorder_loops, fuse_blocks"), std::string::npos) << msg;  // the valid names
  }
}

TEST(PipelineTest, RequiredPassCannotBeDisabled) {
  for (const std::string& name : {"expand_tiles", "build_orchestration"}) {
    PassOptions opts;
    opts.disabled = {name};
    try {
      run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
      ADD_FAILURE() << name << " was disabled";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + name + "' builds the next graph level"), std::string::npos)
          << e.what();
    }
  }
}

TEST(PipelineTest, DisablingFuseBlocksRunsItWithoutFusion) {
  PassOptions opts;
  opts.disabled = {"fuse_blocks"};
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  EXPECT_EQ(r.block.functions.size(), 5u);
  const PassRecord& p = Record(r, "fuse_blocks");
  EXPECT_TRUE(p.skipped);
  EXPECT_FALSE(p.ir.empty());  // the Block Graph it built, one function per nest
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0], "disabled: one InCore function per tile nest");
}

TEST(PipelineTest, DisablingPlanBuffersGivesEveryBufferItsOwnBytes) {
  PipelineResult planned = run_pipeline(testing::SoftmaxGraph(64, 128), PassOptions{});
  PassOptions opts;
  opts.disabled = {"plan_buffers"};
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 128), opts);
  const InCoreFunction& f = r.block.functions.at(0);
  int64_t sum = 0;
  for (const TileDecl& t : f.tiles) sum += tile_bytes(t);
  for (int l : f.locals) sum += local_bytes(r.block.memrefs.at(l));
  EXPECT_EQ(f.buffer_bytes, sum);
  EXPECT_LT(planned.block.functions.at(0).buffer_bytes, sum);
  EXPECT_TRUE(Record(r, "plan_buffers").skipped);
}

/// x (rows x k) @ w (k x n) with the given cube tile (L1 sizes; L0 the same).
TensorGraph MatmulGraph(int64_t rows, int64_t k, int64_t n, std::vector<int64_t> cube) {
  TensorGraphBuilder b("mm");
  int x = b.add_param("x", {Expr(rows), Expr(k)}, DataType::FP32);
  int w = b.add_param("w", {Expr(k), Expr(n)}, DataType::FP32);
  int y = b.add_matmul(x, w, DataType::FP32, cube, cube, testing::TestLoc(2));
  b.set_outputs({y});
  return b.finish();
}

TEST(PipelineTest, MatmulOverBudgetShrinksItsCubeTileAndSaysSo) {
  PassOptions opts;
  opts.sram_budget_kb = 8;
  PipelineResult r = run_pipeline(MatmulGraph(128, 256, 128, {64, 128, 64}), opts);
  ASSERT_EQ(r.block.functions.size(), 1u);
  EXPECT_LE(r.block.functions[0].buffer_bytes, 8 * 1024);
  const PassRecord& p = Record(r, "expand_tiles");
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0], "shrank the cube tile of matmul_0 from m=64, k=128, n=64 to m=32, k=16, n=32 to fit the budget of 8 KB");
  EXPECT_EQ(print(r.tensor), print(MatmulGraph(128, 256, 128, {64, 128, 64})));  // the input graph is untouched
}

TEST(PipelineTest, AnEpilogueOverBudgetShrinksItsMatmulAndFusesAgain) {
  // relu(x @ w + bias) with 256 x 128 output tiles: the product fits 256 KB, the epilogue does not
  // (alone or fused); the matmul's cube tile shrinks and the whole chain fits as one function.
  TensorGraphBuilder b("mm");
  int x = b.add_param("x", {Expr(512), Expr(64)}, DataType::FP32);
  int w = b.add_param("w", {Expr(64), Expr(128)}, DataType::FP32);
  int bias = b.add_param("bias", {Expr(1), Expr(128)}, DataType::FP32);
  int mm = b.add_matmul(x, w, DataType::FP32, {256, 16, 128}, {64, 16, 64}, testing::TestLoc(2));
  int add = b.add_binary(TensorOpKind::Add, mm, bias, {64, 128}, testing::TestLoc(3));
  b.set_outputs({b.add_unary(TensorOpKind::Relu, add, {64, 128}, testing::TestLoc(4))});
  PipelineResult r = run_pipeline(b.finish(), PassOptions{});
  ASSERT_EQ(r.block.functions.size(), 1u);
  EXPECT_LE(r.block.functions[0].buffer_bytes, 256 * 1024);
  const PassRecord& p = Record(r, "expand_tiles");
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0], "shrank the cube tile of matmul_0 from m=256, k=16, n=128 to m=128, k=16, n=128 to fit the budget of 256 KB");
  EXPECT_TRUE(Record(r, "fuse_blocks").notes.empty());  // no split left behind
}

TEST(PipelineTest, CubeTilesShrinkNoFurtherThanEight) {
  PassOptions opts;
  opts.sram_budget_kb = 1;
  PipelineResult r = run_pipeline(MatmulGraph(100, 200, 72, {64, 128, 64}), opts);
  EXPECT_LE(r.block.functions.at(0).buffer_bytes, 1024);
  const std::string& note = Record(r, "expand_tiles").notes.at(0);
  EXPECT_NE(note.find("to m=8, k=8, n=8 to fit"), std::string::npos) << note;
}

TEST(PipelineTest, FusionOffGivesOneFunctionPerOp) {
  PassOptions opts;
  opts.fusion = false;
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  EXPECT_EQ(r.execution.functions.size(), 5u);
  EXPECT_EQ(r.execution.orchestration.size(), 5u);
}

TEST(PipelineTest, VerifiesItsInput) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.ops[0].dim = 7;
  g.ops[0].dims = {7};
  EXPECT_THROW(run_pipeline(g, PassOptions{}), VerifyError);
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

TEST(PipelineTest, OverBudgetLocalsAreRecomputedFirst) {
  PassOptions opts;
  opts.sram_budget_kb = 64;  // the 32x1024 block of exp(x - max) does not fit
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  ASSERT_EQ(r.block.functions.size(), 1u);
  EXPECT_TRUE(r.block.functions[0].locals.empty());
  EXPECT_LE(r.block.functions[0].buffer_bytes, 64 * 1024);
  EXPECT_TRUE(Record(r, "rematerialize").changed);
}

TEST(PipelineTest, OverBudgetFunctionsAreSplitAndNoted) {
  PassOptions opts;
  opts.sram_budget_kb = 64;  // the fused softmax over 1024 columns needs more
  opts.disabled = {"rematerialize"};
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
  EXPECT_GT(r.block.functions.size(), 1u);
  for (const InCoreFunction& f : r.block.functions) EXPECT_LE(f.buffer_bytes, 64 * 1024) << f.name;
  const PassRecord& fuse = Record(r, "fuse_blocks");
  ASSERT_FALSE(fuse.notes.empty());
  EXPECT_NE(fuse.notes[0].find("split @"), std::string::npos) << fuse.notes[0];
}

TEST(PipelineTest, ATileBeyondTheBudgetNamesOpTileAndBudget) {
  PassOptions opts;
  opts.sram_budget_kb = 1;
  try {
    run_pipeline(testing::SoftmaxGraph(64, 1024), opts);
    FAIL() << "a 4 KB tile fit a 1 KB budget";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("tile shape [32, 32]"), std::string::npos) << m;
    EXPECT_NE(m.find("budget of 1 KB"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace pypto
