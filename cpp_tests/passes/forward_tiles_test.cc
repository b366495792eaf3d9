#include "passes/forward_tiles.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/expand_tiles.h"
#include "passes/fuse_blocks.h"
#include "passes/fuse_loops.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using testing::InstrsOf;
using testing::LoopsOf;
using testing::OpcodeString;

BlockGraph Blocks(const TensorGraph& g, PassOptions opts = {}) { return FuseBlocks(ExpandTiles(g, opts), opts); }

std::vector<std::string> LocalNames(const BlockGraph& g, const InCoreFunction& f) {
  std::vector<std::string> out;
  for (int id : f.locals) out.push_back(g.memrefs[id].name);
  return out;
}

TEST(ForwardTilesTest, FusedSoftmaxKeepsOnlyTheExpBuffer) {
  BlockGraph before = FuseLoops(Blocks(testing::SoftmaxGraph(64, 1024)), PassOptions{});
  ASSERT_EQ(before.functions[0].locals.size(), 4u);
  BlockGraph after = ForwardTiles(before, PassOptions{});
  EXPECT_NO_THROW(verify(after));
  const InCoreFunction& f = after.functions[0];
  // exp's result is still needed by div in a later loop, after the sum is complete.
  EXPECT_EQ(LocalNames(after, f), std::vector<std::string>{"v3"});
  EXPECT_EQ(OpcodeString(f.body),
            "tfill tload trowmax tmax "
            "tfill tload trowexpandsub texp tstore trowsum tadd "
            "tload trowexpanddiv tstore");
  EXPECT_EQ(f.tiles.size(), 10u);
}

TEST(ForwardTilesTest, ForwardedLoadsReadTheStoredTile) {
  BlockGraph after = ForwardTiles(FuseLoops(Blocks(testing::SoftmaxGraph(64, 1024)), PassOptions{}), PassOptions{});
  const InCoreFunction& f = after.functions[0];
  std::vector<const Instr*> in = InstrsOf(f.body);
  const Instr* max_acc = in[0];
  ASSERT_EQ(max_acc->op, Opcode::TFILL);
  const Instr* sub = in[6];
  ASSERT_EQ(sub->op, Opcode::TROWEXPANDSUB);
  EXPECT_EQ(sub->srcs[1], max_acc->dst);  // the row max, straight from its accumulator
  const Instr* exp = in[7];
  ASSERT_EQ(exp->op, Opcode::TEXP);
  EXPECT_EQ(exp->srcs[0], sub->dst);
  const Instr* rowsum = in[9];
  ASSERT_EQ(rowsum->op, Opcode::TROWSUM);
  EXPECT_EQ(rowsum->srcs[0], exp->dst);
  const Instr* div = in[12];
  ASSERT_EQ(div->op, Opcode::TROWEXPANDDIV);
  EXPECT_EQ(div->srcs[1], in[4]->dst);  // the sum accumulator
  // Every remaining tile is used.
  std::set<int> used;
  for (const Instr* i : in) {
    if (i->dst >= 0) used.insert(i->dst);
    used.insert(i->srcs.begin(), i->srcs.end());
  }
  for (const TileDecl& t : f.tiles) EXPECT_TRUE(used.count(t.id)) << t.name;
}

// Without loop fusion, sub's and exp's stores are loaded in later loops:
// a store made in another loop is not a box this iteration has in a tile.
TEST(ForwardTilesTest, DoesNotForwardAcrossLoops) {
  BlockGraph after = ForwardTiles(Blocks(testing::SoftmaxGraph(64, 1024)), PassOptions{});
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(LocalNames(after, after.functions[0]), (std::vector<std::string>{"v2", "v3"}));
  std::vector<const Loop*> loops = LoopsOf(after.functions[0].body);
  ASSERT_EQ(loops.size(), 5u);
  EXPECT_EQ(OpcodeString(loops[2]->body), "tload texp tstore");
}

TEST(ForwardTilesTest, GlobalStoresAreKept) {
  PassOptions opts;
  opts.fusion = false;
  BlockGraph before = Blocks(testing::SoftmaxGraph(64, 1024), opts);
  BlockGraph after = ForwardTiles(before, opts);
  // Every intermediate is a workspace other tasks read: nothing to forward or drop.
  EXPECT_EQ(print(after), print(before));
}

TEST(ForwardTilesTest, ADifferentValidBoxIsNotForwarded) {
  BlockGraph b = FuseLoops(Blocks(testing::SoftmaxGraph(64, 1024)), PassOptions{});
  // Make the load of the row max read a narrower box than amax stored.
  for (Stmt& s : b.functions[0].body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (!l || l->var != "i1_1") continue;
    Instr& ld = std::get<Instr>(l->body[1].node);
    ASSERT_EQ(ld.op, Opcode::TLOAD);
    ld.valid[0] = Expr(16);
  }
  BlockGraph after = ForwardTiles(b, PassOptions{});
  EXPECT_EQ(LocalNames(after, after.functions[0]), (std::vector<std::string>{"v1", "v3"}));
}

// Two products of one operand, %w @ %x and %v @ %x, stored to %y and %z at the end, with
// `between` (statements) after the first product.
BlockGraph TwoProducts(const std::string& between) {
  const std::string text = fmt::format(R"(module @m entry @main

incore func @f(%w: !pto.memref<gm,64x64,f32>, %v: !pto.memref<gm,64x64,f32>, %x: !pto.memref<gm,64x32,f32>, %y: !pto.memref<gm,64x32,f32> out, %z: !pto.memref<gm,64x32,f32> out) buffer_bytes=0 {{
  %l = alloc_local : !pto.memref<local,64x32,f32>
  %a = alloc_tile : !pto.tile<64x64xf32>
  %b = alloc_tile : !pto.tile<64x32xf32>
  %c = alloc_tile : !pto.tile<64x32xf32>
  %d = alloc_tile : !pto.tile<64x64xf32>
  %e = alloc_tile : !pto.tile<64x32xf32>
  %g = alloc_tile : !pto.tile<64x32xf32>
  %a = tload %w[0, 0] : !pto.tile<64x64xf32>
  %b = tload %x[0, 0] : !pto.tile<64x32xf32>
  %c = tmatmul %a, %b : !pto.tile<64x32xf32>
{0}  %d = tload %v[0, 0] : !pto.tile<64x64xf32>
  %e = tload %x[0, 0] : !pto.tile<64x32xf32>
  %g = tmatmul %d, %e : !pto.tile<64x32xf32>
  tstore %g, %z[0, 0]
  tstore %c, %y[0, 0]
  return
}}

orchestration func @main(%w: !pto.memref<gm,64x64,f32>, %v: !pto.memref<gm,64x64,f32>, %x: !pto.memref<gm,64x32,f32>, %y: !pto.memref<gm,64x32,f32> out, %z: !pto.memref<gm,64x32,f32> out) {{
  CALL @f(%w -> %w[0, 0; 64, 64], %v -> %v[0, 0; 64, 64], %x -> %x[0, 0; 64, 32], %y -> %y[0, 0; 64, 32], %z -> %z[0, 0; 64, 32])
  return
}}
)",
                                       between);
  return ForwardTiles(testing::BlockOf(parse_pto(text)), PassOptions{});
}

// The loads of %x left, and whether the second product reads the first one's tile of it.
int LoadsOfX(const BlockGraph& g) {
  int n = 0;
  for (const Instr* in : InstrsOf(g.functions[0].body))
    if (in->op == Opcode::TLOAD && g.memrefs[in->memref].name == "x") ++n;
  return n;
}
bool ProductsShareB(const BlockGraph& g) {
  std::vector<const Instr*> mm;
  for (const Instr* in : InstrsOf(g.functions[0].body))
    if (in->op == Opcode::TMATMUL) mm.push_back(in);
  return mm.size() == 2 && mm[0]->srcs[1] == mm[1]->srcs[1];
}

TEST(ForwardTilesTest, ASecondLoadOfAProductsOperandReadsTheFirstTile) {
  BlockGraph after = TwoProducts("");
  EXPECT_NO_THROW(verify(after));
  EXPECT_EQ(LoadsOfX(after), 1);
  EXPECT_TRUE(ProductsShareB(TwoProducts("")));
  // A store to the function's own local buffer in between aliases no parameter.
  BlockGraph local = TwoProducts("  tstore %c, %l[0, 0]\n");
  EXPECT_EQ(LoadsOfX(local), 1);
  EXPECT_TRUE(ProductsShareB(local));
}

TEST(ForwardTilesTest, AStoreToAParameterBetweenTheLoadsKeepsBoth) {
  // %y might be %x's memory under another name: the second load reads what the store left.
  BlockGraph after = TwoProducts("  tstore %c, %y[0, 0]\n");
  EXPECT_EQ(LoadsOfX(after), 2);
  EXPECT_FALSE(ProductsShareB(after));
}

}  // namespace
}  // namespace pypto
