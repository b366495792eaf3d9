#include "passes/fuse_loops.h"

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

using testing::LoopsOf;
using testing::OpcodeString;

BlockGraph Blocks(const TensorGraph& g) {
  PassOptions opts;
  return FuseBlocks(ExpandTiles(g, opts), opts);
}

std::string TopLevel(const std::vector<Stmt>& body) {
  std::string s;
  for (const Stmt& st : body) {
    std::string item = std::holds_alternative<Loop>(st.node) ? "FOR" : opcode_name(std::get<Instr>(st.node).op);
    s += (s.empty() ? "" : " ") + item;
  }
  return s;
}

TEST(FuseLoopsTest, SoftmaxMergesSubExpAndSumIntoOnePass) {
  BlockGraph before = Blocks(testing::SoftmaxGraph(64, 1024));
  ASSERT_EQ(TopLevel(before.functions[0].body), "tfill FOR tstore FOR FOR tfill FOR tstore FOR");
  BlockGraph after = FuseLoops(before, PassOptions{});
  EXPECT_NO_THROW(verify(after));
  const std::vector<Stmt>& body = after.functions[0].body;
  // sum's accumulator initialisation moves ahead of the merged loop.
  EXPECT_EQ(TopLevel(body), "tfill FOR tstore tfill FOR tstore FOR");
  std::vector<const Loop*> loops = LoopsOf(body);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(OpcodeString(loops[0]->body), "tload trowmax tmax");
  EXPECT_EQ(OpcodeString(loops[1]->body),
            "tload tload trowexpandsub tstore tload texp tstore tload trowsum tadd");
  EXPECT_EQ(OpcodeString(loops[2]->body), "tload tload trowexpanddiv tstore");
  // The merged body uses the first loop's variable only.
  EXPECT_EQ(loops[1]->var, "i1_1");
  for (const Instr* in : testing::InstrsOf(loops[1]->body)) {
    for (const Expr& e : in->offsets) {
      EXPECT_FALSE(e.uses("i2_1"));
      EXPECT_FALSE(e.uses("i3_1"));
    }
  }
}

// The max must be complete before sub reads it, and the sum before div reads it.
TEST(FuseLoopsTest, ReductionBoundariesKeepLoopsApart) {
  BlockGraph after = FuseLoops(Blocks(testing::SoftmaxGraph(64, 1024)), PassOptions{});
  std::vector<const Loop*> loops = LoopsOf(after.functions[0].body);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(loops[0]->var, "i0_1");
  EXPECT_EQ(loops[2]->var, "i4_1");
}

// exp reading sub's output at another column than sub wrote in the same
// iteration would read a tile that does not exist yet in a merged loop.
TEST(FuseLoopsTest, MismatchedBoxesKeepLoopsApart) {
  BlockGraph b = Blocks(testing::SoftmaxGraph(64, 1024));
  std::vector<Stmt>& body = b.functions[0].body;
  Loop& exp_loop = std::get<Loop>(body[4].node);
  ASSERT_EQ(OpcodeString(exp_loop.body), "tload texp tstore");
  Instr& ld = std::get<Instr>(exp_loop.body[0].node);
  ld.offsets[1] = Expr(992) - Expr::var(exp_loop.var) * Expr(32);  // reversed column order
  BlockGraph after = FuseLoops(b, PassOptions{});
  EXPECT_NO_THROW(verify(after));
  std::vector<const Loop*> loops = LoopsOf(after.functions[0].body);
  ASSERT_EQ(loops.size(), 4u);
  EXPECT_EQ(OpcodeString(loops[1]->body), "tload tload trowexpandsub tstore");
  // exp and sum still agree on their boxes and merge.
  EXPECT_EQ(OpcodeString(loops[2]->body), "tload texp tstore tload trowsum tadd");
}

TEST(FuseLoopsTest, DifferentTripCountsDoNotMerge) {
  BlockGraph b = Blocks(testing::SoftmaxGraph(64, 1024));
  std::get<Loop>(b.functions[0].body[4].node).stop = Expr(16);
  BlockGraph after = FuseLoops(b, PassOptions{});
  // exp no longer matches sub (before it) nor sum (after it).
  EXPECT_EQ(TopLevel(after.functions[0].body), "tfill FOR tstore FOR FOR tfill FOR tstore FOR");
}

TEST(FuseLoopsTest, NothingToFuseLeavesTheGraphUnchanged) {
  BlockGraph b = Blocks(testing::AddGraph({Expr(64), Expr(100)}));
  EXPECT_EQ(print(FuseLoops(b, PassOptions{})), print(b));
}

}  // namespace
}  // namespace pypto
