#include "passes/flatten_loops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/expand_tiles.h"
#include "passes/forward_tiles.h"
#include "passes/fuse_blocks.h"
#include "passes/fuse_loops.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::InstrsOf;
using testing::LoopsOf;
using testing::OpcodeString;

BlockGraph Fused(const TensorGraph& g) {
  PassOptions opts;
  return FuseLoops(FuseBlocks(ExpandTiles(g, opts), opts), opts);
}

TEST(FlattenLoopsTest, WholeRowTilesLeaveNoLoops) {
  // A tile as wide as the row: every inner loop of the fused kernel runs once.
  BlockGraph before = Fused(testing::SoftmaxGraph(64, 256, {4, 256}));
  ASSERT_EQ(LoopsOf(before.functions[0].body).size(), 3u);
  BlockGraph after = FlattenLoops(before, PassOptions{});
  EXPECT_NO_THROW(verify(after));
  const InCoreFunction& f = after.functions[0];
  EXPECT_TRUE(LoopsOf(f.body).empty());
  EXPECT_EQ(OpcodeString(f.body), OpcodeString(before.functions[0].body));
  // The loop variable is gone from the offsets: it was replaced by the loop's start, 0.
  for (const Instr* in : InstrsOf(f.body)) {
    for (const Expr& e : in->offsets) EXPECT_TRUE(e.is_const()) << print(after);
  }
}

TEST(FlattenLoopsTest, LoopsOfSeveralIterationsStay) {
  BlockGraph before = Fused(testing::SoftmaxGraph(64, 1024));  // 32 x 32 tiles: 32 column steps per row block
  BlockGraph after = FlattenLoops(before, PassOptions{});
  EXPECT_EQ(print(after), print(before));
}

TEST(FlattenLoopsTest, ForwardTilesThenDropsTheLocalRowBuffer) {
  // Flattened, the row that exp stores is the row div loads: forwarding removes the round trip.
  BlockGraph fused = Fused(testing::SoftmaxGraph(64, 256, {4, 256}));
  BlockGraph direct = ForwardTiles(fused, PassOptions{});
  EXPECT_EQ(direct.functions[0].locals.size(), 1u);
  BlockGraph flat = ForwardTiles(FlattenLoops(fused, PassOptions{}), PassOptions{});
  EXPECT_NO_THROW(verify(flat));
  const InCoreFunction& f = flat.functions[0];
  EXPECT_TRUE(f.locals.empty());
  EXPECT_EQ(OpcodeString(f.body),
            "tfill tload trowmax tmax tfill tload trowexpandsub texp trowsum tadd trowexpanddiv tstore");
}

}  // namespace
}  // namespace pypto
