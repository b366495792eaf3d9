#include "passes/rematerialize.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/expand_tiles.h"
#include "passes/forward_tiles.h"
#include "passes/fuse_blocks.h"
#include "passes/fuse_loops.h"
#include "passes/plan_buffers.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::InstrsOf;
using testing::LoopsOf;
using testing::OpcodeString;

PassOptions Budget(int64_t kb) {
  PassOptions opts;
  opts.sram_budget_kb = kb;
  return opts;
}

/// The Block Graph rematerialize sees in the pipeline: fused, loops merged, tiles forwarded.
BlockGraph Before(const TensorGraph& g, bool fuse_loops = true) {
  PassOptions opts;
  BlockGraph b = FuseBlocks(ExpandTiles(g, opts), opts);
  if (fuse_loops) b = FuseLoops(b, opts);
  return ForwardTiles(b, opts);
}

std::vector<std::string> LocalNames(const BlockGraph& g, const InCoreFunction& f) {
  std::vector<std::string> out;
  for (int id : f.locals) out.push_back(g.memrefs[id].name);
  return out;
}

/// softmax centred on the row mean: sum -> div by a constant -> sub -> exp -> sum -> div.
/// The mean goes through a local buffer of its own, which exp's chain then loads.
TensorGraph MeanSoftmaxGraph(int64_t rows, int64_t cols, std::vector<int64_t> tile = {32, 32}) {
  TensorGraphBuilder b("mean_softmax");
  int x = b.add_param("x", {Expr(rows), Expr(cols)}, DataType::FP32);
  int s = b.add_reduce(TensorOpKind::Sum, x, -1, true, tile, testing::TestLoc(2));
  int m = b.add_elementwise(TensorOpKind::Div, {Operand::tensor(s), Operand::scalar(double(cols), true)}, tile,
                            testing::TestLoc(3));
  int d = b.add_binary(TensorOpKind::Sub, x, m, tile, testing::TestLoc(4));
  int e = b.add_unary(TensorOpKind::Exp, d, tile, testing::TestLoc(5));
  int z = b.add_reduce(TensorOpKind::Sum, e, -1, true, tile, testing::TestLoc(6));
  b.set_outputs({b.add_binary(TensorOpKind::Div, e, z, tile, testing::TestLoc(7))});
  return b.finish();
}

TEST(RematerializeTest, FunctionWithinTheBudgetIsUnchanged) {
  BlockGraph before = Before(testing::SoftmaxGraph(64, 1024));
  ASSERT_EQ(LocalNames(before, before.functions[0]), std::vector<std::string>{"v3"});
  // 128 KB of exp(x - max) plus the tiles fit the default 256 KB.
  BlockGraph after = Rematerialize(before, PassOptions{});
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(print(after), print(before));
}

TEST(RematerializeTest, SoftmaxRecomputesExpInTheLastLoop) {
  BlockGraph before = Before(testing::SoftmaxGraph(64, 1024));
  ASSERT_EQ(OpcodeString(before.functions[0].body),
            "tfill tload trowmax tmax "
            "tfill tload trowexpandsub texp tstore trowsum tadd "
            "tload trowexpanddiv tstore");
  BlockGraph after = Rematerialize(before, Budget(64));  // the 32x1024 row block is 128 KB
  EXPECT_NO_THROW(verify(after));
  const InCoreFunction& f = after.functions[0];
  EXPECT_TRUE(f.locals.empty());
  EXPECT_EQ(print(after).find("alloc_local"), std::string::npos);
  // The middle loop no longer stores exp; the last loop loads x and recomputes
  // sub and exp right before the division instead of loading the row block.
  EXPECT_EQ(OpcodeString(f.body),
            "tfill tload trowmax tmax "
            "tfill tload trowexpandsub texp trowsum tadd "
            "tload trowexpandsub texp trowexpanddiv tstore");
  std::vector<const Loop*> loops = LoopsOf(f.body);
  ASSERT_EQ(loops.size(), 3u);
  std::vector<const Instr*> last = InstrsOf(loops[2]->body);
  ASSERT_EQ(last.size(), 5u);
  const Instr* ld = last[0];
  EXPECT_EQ(after.memrefs[ld->memref].name, "x");
  EXPECT_TRUE(ld->offsets[1].uses(loops[2]->var));
  EXPECT_FALSE(ld->offsets[1].uses(loops[1]->var));
  const Instr* max_acc = InstrsOf(f.body)[0];
  ASSERT_EQ(max_acc->op, Opcode::TFILL);
  EXPECT_EQ(last[1]->srcs, (std::vector<int>{ld->dst, max_acc->dst}));  // x - the final row max
  EXPECT_EQ(last[2]->srcs, std::vector<int>{last[1]->dst});
  EXPECT_EQ(last[3]->srcs[0], last[2]->dst);  // the division reads the recomputed exp
  // The recomputation has fresh tiles, and every declared tile is used.
  std::set<int> before_tiles;
  for (const TileDecl& t : before.functions[0].tiles) before_tiles.insert(t.id);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(before_tiles.count(last[i]->dst)) << i;
  std::set<int> used;
  for (const Instr* in : InstrsOf(f.body)) {
    if (in->dst >= 0) used.insert(in->dst);
    used.insert(in->srcs.begin(), in->srcs.end());
  }
  for (const TileDecl& t : f.tiles) EXPECT_TRUE(used.count(t.id)) << t.name;
  // After planning the function fits the budget; before it did not.
  EXPECT_GT(PlanBuffers(before, Budget(64)).functions[0].buffer_bytes, 64 * 1024);
  BlockGraph planned = PlanBuffers(after, Budget(64));
  EXPECT_NO_THROW(verify(planned));
  EXPECT_LE(planned.functions[0].buffer_bytes, 64 * 1024);
}

// Without loop fusion sub and exp each keep a row block; both go, and every
// later loop that loaded exp's block recomputes the whole chain from x.
TEST(RematerializeTest, EveryLaterLoadRecomputesTheChain) {
  BlockGraph before = Before(testing::SoftmaxGraph(64, 1024), /*fuse_loops=*/false);
  ASSERT_EQ(LocalNames(before, before.functions[0]), (std::vector<std::string>{"v2", "v3"}));
  BlockGraph after = Rematerialize(before, Budget(64));
  EXPECT_NO_THROW(verify(after));
  const InCoreFunction& f = after.functions[0];
  EXPECT_TRUE(f.locals.empty());
  std::vector<const Loop*> loops = LoopsOf(f.body);
  ASSERT_EQ(loops.size(), 5u);
  EXPECT_EQ(OpcodeString(loops[2]->body), "tload trowexpandsub texp");
  EXPECT_EQ(OpcodeString(loops[3]->body), "tload trowexpandsub texp trowsum tadd");
  EXPECT_EQ(OpcodeString(loops[4]->body), "tload trowexpandsub texp trowexpanddiv tstore");
  for (const Instr* in : InstrsOf(f.body))
    if (in->op == Opcode::TLOAD) EXPECT_EQ(after.memrefs[in->memref].name, "x");
  EXPECT_LE(PlanBuffers(after, Budget(64)).functions[0].buffer_bytes, 64 * 1024);
}

// Dropping sub's block is enough for 200 KB; exp's block is kept. (exp's chain
// loads sub's block, so it can only go once sub's block is recomputed.)
TEST(RematerializeTest, StopsOnceTheFunctionFits) {
  BlockGraph before = Before(testing::SoftmaxGraph(64, 1024), /*fuse_loops=*/false);
  BlockGraph after = Rematerialize(before, Budget(200));
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(LocalNames(after, after.functions[0]), std::vector<std::string>{"v3"});
  std::vector<const Loop*> loops = LoopsOf(after.functions[0].body);
  ASSERT_EQ(loops.size(), 5u);
  EXPECT_EQ(OpcodeString(loops[2]->body), "tload trowexpandsub texp tstore");
  EXPECT_EQ(OpcodeString(loops[4]->body), "tload trowexpanddiv tstore");
  EXPECT_LE(PlanBuffers(after, Budget(200)).functions[0].buffer_bytes, 200 * 1024);
}

// exp's chain loads the mean from another local buffer, which is not
// read-only memory: the row block is kept (the pipeline splits instead).
TEST(RematerializeTest, ChainOverALocalBufferIsLeftAlone) {
  BlockGraph before = Before(MeanSoftmaxGraph(64, 1024));
  ASSERT_EQ(OpcodeString(before.functions[0].body),
            "tfill tload trowsum tadd tstore "
            "tload tdiv tstore "  // the mean: the sum divided by a constant
            "tfill tload tload trowexpandsub texp tstore trowsum tadd "
            "tload trowexpanddiv tstore");
  BlockGraph after = Rematerialize(before, Budget(64));
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(print(after), print(before));
  EXPECT_GT(PlanBuffers(after, Budget(64)).functions[0].buffer_bytes, 64 * 1024);
}

// The last loop reads exp's row block in reversed column order: not the box
// the same iteration stored, so there is nothing to recompute in its place.
TEST(RematerializeTest, ALoadOfAnotherBoxKeepsTheBuffer) {
  BlockGraph before = Before(testing::SoftmaxGraph(64, 1024));
  Loop& div = std::get<Loop>(before.functions[0].body.back().node);
  Instr& ld = std::get<Instr>(div.body[0].node);
  ASSERT_EQ(ld.op, Opcode::TLOAD);
  ld.offsets[1] = Expr(992) - Expr::var(div.var) * Expr(32);
  BlockGraph after = Rematerialize(before, Budget(64));
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(print(after), print(before));
}

TEST(RematerializeTest, DynamicLocalBuffersAreSkipped) {
  BlockGraph before = Before(testing::DynamicColsGraph());
  ASSERT_EQ(before.functions[0].locals.size(), 1u);
  ASSERT_TRUE(local_is_dynamic(before.memrefs[before.functions[0].locals[0]]));
  // Even a budget the tiles alone exceed leaves the run-time sized [32, N] block.
  BlockGraph after = Rematerialize(before, Budget(1));
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(print(after), print(before));
}

}  // namespace
}  // namespace pypto
