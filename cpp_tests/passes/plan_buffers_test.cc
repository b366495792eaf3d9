#include "passes/plan_buffers.h"

#include <gtest/gtest.h>

#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

int64_t ExpectedBytes(const BlockGraph& g, const InCoreFunction& f) {
  int64_t bytes = 0;
  for (const TileDecl& t : f.tiles) bytes += tile_bytes(t);
  for (int l : f.locals) bytes += local_bytes(g.memrefs.at(l));
  return bytes;
}

TEST(PlanBuffersTest, TileAndLocalSizesRoundToSixtyFourBytes) {
  EXPECT_EQ(tile_bytes(TileDecl{0, "t", {32, 32}, DataType::FP32}), 4096);
  EXPECT_EQ(tile_bytes(TileDecl{0, "t", {32, 1}, DataType::FP32}), 128);
  EXPECT_EQ(tile_bytes(TileDecl{0, "t", {1, 1}, DataType::FP32}), 64);
  EXPECT_EQ(tile_bytes(TileDecl{0, "t", {3, 5}, DataType::FP16}), 64);
  EXPECT_EQ(tile_bytes(TileDecl{0, "t", {65}, DataType::INT8}), 128);
  EXPECT_EQ(local_bytes(MemRef{0, "m", DataType::FP32, {Expr(1), Expr(33)}, MemKind::Local}), 192);
  EXPECT_THROW(local_bytes(MemRef{0, "m", DataType::FP32, {Expr::var("N")}, MemKind::Local}), NotSupportedError);
}

TEST(PlanBuffersTest, FusedSoftmaxBytesAreTilesPlusLocals) {
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), PassOptions{});
  ASSERT_EQ(r.block.functions.size(), 1u);
  const InCoreFunction& f = r.block.functions[0];
  // 6 tiles of 32x32, 4 of 32x1 and one 32x1024 local buffer, some sharing bytes.
  EXPECT_EQ(ExpectedBytes(r.block, f), 6 * 4096 + 4 * 128 + 32 * 1024 * 4);
  EXPECT_LT(f.buffer_bytes, ExpectedBytes(r.block, f));
  EXPECT_GE(f.buffer_bytes, 32 * 1024 * 4 + 4096);
  EXPECT_EQ(f.tile_offsets.size(), f.tiles.size());
  EXPECT_EQ(r.execution.functions[0].buffer_bytes, f.buffer_bytes);
}

TEST(PlanBuffersTest, EveryUnfusedFunctionGetsItsOwnBytes) {
  PassOptions opts;
  opts.fusion = false;
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(50, 100), opts);
  ASSERT_EQ(r.block.functions.size(), 5u);
  std::vector<int64_t> bytes;
  for (const InCoreFunction& f : r.block.functions) {
    EXPECT_LE(f.buffer_bytes, ExpectedBytes(r.block, f)) << f.name;
    for (const TileDecl& t : f.tiles) EXPECT_LE(f.tile_offsets.at(t.id) + tile_bytes(t), f.buffer_bytes) << f.name;
    bytes.push_back(f.buffer_bytes);
  }
  // Each single-op function keeps at least its widest two live tiles apart.
  for (int64_t b : bytes) EXPECT_GE(b, 4096 + 128);
}

TEST(PlanBuffersTest, OnlyBufferBytesChange) {
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(1, 33), PassOptions{});
  BlockGraph before = r.block;
  before.functions[0].buffer_bytes = 0;
  BlockGraph after = PlanBuffers(before, PassOptions{});
  EXPECT_EQ(after.functions[0].buffer_bytes, r.block.functions[0].buffer_bytes);
  EXPECT_LE(after.functions[0].buffer_bytes, 4 * 64 + 6 * 128 + 192);
  after.functions[0].buffer_bytes = 0;
  EXPECT_EQ(print(after), print(before));
}

TEST(PlanBuffersTest, DynamicLocalBuffersAreSizedAtRunTime) {
  // exp's block [32, N] outlives the sum in a local buffer sized when the
  // kernel runs: it is not in the static byte count, and N becomes a scalar.
  PipelineResult r = run_pipeline(testing::DynamicColsGraph(), PassOptions{});
  ASSERT_EQ(r.block.functions.size(), 1u);
  const InCoreFunction& f = r.block.functions[0];
  ASSERT_EQ(f.locals.size(), 1u);
  EXPECT_TRUE(local_is_dynamic(r.block.memrefs[f.locals[0]]));
  int64_t tiles = 0;
  for (const TileDecl& t : f.tiles) tiles += tile_bytes(t);
  EXPECT_LE(f.buffer_bytes, tiles);
  EXPECT_GT(f.buffer_bytes, 0);
  EXPECT_NE(std::find(f.scalar_params.begin(), f.scalar_params.end(), "N"), f.scalar_params.end());
}

}  // namespace
}  // namespace pypto
