// Tests of pass fuse_chains (passes/fuse_chains.h): which runs become Fused statements, their loop,
// the tiles kept in registers, the relocation of a tile whose planned bytes the loop would
// overwrite, the budget, and that the .pto text of a fused program parses back.
#include "passes/fuse_chains.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "passes/plan_buffers.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

std::vector<const Fused*> FusedRuns(const std::vector<Stmt>& body) {
  std::vector<const Fused*> out;
  for (const Stmt& s : body) {
    if (auto* f = std::get_if<Fused>(&s.node)) out.push_back(f);
    else if (auto* l = std::get_if<Loop>(&s.node))
      for (const Fused* x : FusedRuns(l->body)) out.push_back(x);
  }
  return out;
}

std::vector<FuseRole> Roles(const Fused& f) {
  std::vector<FuseRole> r;
  for (const Stmt& s : f.body) r.push_back(fuse_role(f, std::get<Instr>(s.node)));
  return r;
}

/// A function `@f(x, y out)` over tiles of `shape`, its body `body`, planned by plan_buffers.
BlockGraph Function(const std::string& tiles, const std::string& body, int64_t rows = 16, int64_t cols = 64) {
  const std::string text = fmt::format(R"(module @m entry @main

incore func @f(%x: !pto.memref<gm,{0}x{1},f32>, %r: !pto.memref<gm,{0}x1,f32>, %y: !pto.memref<gm,{0}x{1},f32> out, %s: !pto.memref<gm,{0}x1,f32> out) buffer_bytes=0 {{
{2}{3}  return
}}

orchestration func @main(%x: !pto.memref<gm,{0}x{1},f32>, %r: !pto.memref<gm,{0}x1,f32>, %y: !pto.memref<gm,{0}x{1},f32> out, %s: !pto.memref<gm,{0}x1,f32> out) {{
  CALL @f(%x -> %x[0, 0; {0}, {1}], %r -> %r[0, 0; {0}, 1], %y -> %y[0, 0; {0}, {1}], %s -> %s[0, 0; {0}, 1])
  return
}}
)",
                                       rows, cols, tiles, body);
  ExecutionGraph e = parse_pto(text);
  BlockGraph b = testing::BlockOf(e);
  return PlanBuffers(b, PassOptions{});
}

const char* kTiles =
    "  %a = alloc_tile : !pto.tile<16x64xf32>\n"
    "  %b = alloc_tile : !pto.tile<16x64xf32>\n"
    "  %c = alloc_tile : !pto.tile<16x64xf32>\n"
    "  %m = alloc_tile : !pto.tile<16x1xf32>\n"
    "  %q = alloc_tile : !pto.tile<16x1xf32>\n";

TEST(FuseChainsTest, AChainWithItsRowSumAndStoreIsOneRunKeepingTheTemporaryInRegisters) {
  BlockGraph g = Function(kTiles,
                          "  %a = tload %x[0, 0] : !pto.tile<16x64xf32>\n"
                          "  %m = tload %r[0, 0] : !pto.tile<16x1xf32>\n"
                          "  %b = trowexpandsub %a, %m : !pto.tile<16x64xf32>\n"
                          "  %c = texp %b : !pto.tile<16x64xf32>\n"
                          "  %q = trowsum %c : !pto.tile<16x1xf32>\n"
                          "  tstore %c, %y[0, 0]\n"
                          "  tstore %q, %s[0, 0]\n");
  BlockGraph out = FuseChains(g, PassOptions{});
  verify(out);
  auto runs = FusedRuns(out.functions[0].body);
  ASSERT_EQ(runs.size(), 1u);
  const Fused& f = *runs[0];
  // Sums and a store make the loop walk rows; the rows are narrower than a strip.
  EXPECT_EQ(f.rows, 16);
  EXPECT_EQ(f.cols, 64);
  EXPECT_EQ(f.strip, 64);
  EXPECT_EQ(Roles(f), (std::vector<FuseRole>{FuseRole::Chain, FuseRole::Chain, FuseRole::RowSum, FuseRole::Store}));
  // %b is read only by texp: never written to its buffer. %c is stored and summed inside the run.
  EXPECT_EQ(f.registers.size(), 2u);
  const std::string text = print(out);
  EXPECT_NE(text.find("FUSED rows=16 cols=64 strip=64 registers=[%b, %c]"), std::string::npos) << text;
}

TEST(FuseChainsTest, AChainWithoutBroadcastsRunsFlatInStripsOfTheTarget) {
  const std::string tiles = "  %a = alloc_tile : !pto.tile<16x256xf32>\n  %b = alloc_tile : !pto.tile<16x256xf32>\n"
                            "  %c = alloc_tile : !pto.tile<16x256xf32>\n";
  BlockGraph g = Function(tiles,
                          "  %a = tload %x[0, 0] : !pto.tile<16x256xf32>\n"
                          "  %b = texp %a : !pto.tile<16x256xf32>\n"
                          "  %c = tadds %b, 1 : !pto.tile<16x256xf32>\n"
                          "  tstore %c, %y[0, 0] valid [8, 256]\n",
                          16, 256);
  PassOptions opts;
  opts.target.l1d_bytes = 32 << 10;
  BlockGraph out = FuseChains(g, opts);
  auto runs = FusedRuns(out.functions[0].body);
  ASSERT_EQ(runs.size(), 1u);
  // The store covers half the tile: it is not part of the run, which walks the tiles as one row.
  EXPECT_EQ(runs[0]->rows, 1);
  EXPECT_EQ(runs[0]->cols, 16 * 256);
  EXPECT_EQ(runs[0]->strip, 512);
  EXPECT_EQ(strip_elems(opts.target), 512);
  opts.target.l1d_bytes = 48 << 10;  // a power of two at most a 64th of L1
  EXPECT_EQ(strip_elems(opts.target), 512);
  opts.target.l1d_bytes = 64 << 10;
  EXPECT_EQ(strip_elems(opts.target), 1024);
  EXPECT_EQ(FusedRuns(FuseChains(g, opts).functions[0].body)[0]->strip, 1024);
}

TEST(FuseChainsTest, ASingleInstructionOrAStoreOfAnotherShapeIsNoRun) {
  BlockGraph g = Function(kTiles,
                          "  %a = tload %x[0, 0] : !pto.tile<16x64xf32>\n"
                          "  %b = texp %a : !pto.tile<16x64xf32>\n"
                          "  %q = trowmax %b : !pto.tile<16x1xf32>\n"
                          "  tstore %q, %s[0, 0]\n");
  BlockGraph out = FuseChains(g, PassOptions{});
  EXPECT_TRUE(FusedRuns(out.functions[0].body).empty());
  EXPECT_EQ(print(out), print(g));
}

TEST(FuseChainsTest, ATileWhosePlannedBytesTheLoopWouldOverwriteMovesPastTheArena) {
  BlockGraph g = Function(kTiles,
                          "  %a = tload %x[0, 0] : !pto.tile<16x64xf32>\n"
                          "  %m = tload %r[0, 0] : !pto.tile<16x1xf32>\n"
                          "  %b = trowexpandsub %a, %m : !pto.tile<16x64xf32>\n"
                          "  %c = texp %b : !pto.tile<16x64xf32>\n"
                          "  tstore %c, %y[0, 0]\n"
                          "  tstore %b, %y[0, 0]\n");
  // Make %b (written: a later store reads it) share %m's bytes: the broadcast operand would be
  // overwritten while later rows still read it.
  InCoreFunction& fn = g.functions[0];
  const int m = fn.tiles[3].id, c = fn.tiles[1].id;
  fn.tile_offsets[c] = fn.tile_offsets[m];
  const int64_t before = fn.buffer_bytes;
  BlockGraph out = FuseChains(g, PassOptions{});
  verify(out);
  const InCoreFunction& f = out.functions[0];
  ASSERT_EQ(FusedRuns(f.body).size(), 1u);
  EXPECT_GE(f.tile_offsets.at(c), (before + 63) / 64 * 64);
  EXPECT_EQ(f.buffer_bytes, f.tile_offsets.at(c) + tile_bytes(fn.tiles[1]));
  // Over the budget, the run is not formed instead.
  PassOptions tight;
  tight.sram_budget_kb = 1;
  g.functions[0].buffer_bytes = 1000;
  BlockGraph kept = FuseChains(g, tight);
  // Only texp and its store, which need no bytes of their own, still form a run.
  auto runs = FusedRuns(kept.functions[0].body);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(Roles(*runs[0]), (std::vector<FuseRole>{FuseRole::Chain, FuseRole::Store}));
  EXPECT_EQ(kept.functions[0].buffer_bytes, 1000);
  EXPECT_EQ(kept.functions[0].tile_offsets, g.functions[0].tile_offsets);
}

TEST(FuseChainsTest, TheFusedProgramPrintsAndParsesBackAndRunsAreFormedAgainFromText) {
  PipelineResult r = run_pipeline(testing::SoftmaxGraph(64, 1024), PassOptions{});
  const std::string text = print_pto(r.execution);
  ASSERT_NE(text.find("FUSED rows="), std::string::npos) << text;
  ExecutionGraph parsed = parse_pto(text);
  verify(parsed);
  EXPECT_EQ(print_pto(parsed), text);
  // Fusing the parsed program again gives the same program.
  BlockGraph b = testing::BlockOf(parsed);
  EXPECT_EQ(print(FuseChains(b, PassOptions{})), print(b));
}

TEST(FuseChainsTest, TheVerifierRejectsMalformedRuns) {
  BlockGraph g = Function(kTiles,
                          "  %a = tload %x[0, 0] : !pto.tile<16x64xf32>\n"
                          "  %b = texp %a : !pto.tile<16x64xf32>\n"
                          "  %c = tadds %b, 1 : !pto.tile<16x64xf32>\n"
                          "  tstore %c, %y[0, 0]\n");
  BlockGraph out = FuseChains(g, PassOptions{});
  ASSERT_EQ(FusedRuns(out.functions[0].body).size(), 1u);
  auto mutate = [&](auto fn) {
    BlockGraph bad = out;
    for (Stmt& s : bad.functions[0].body)
      if (auto* f = std::get_if<Fused>(&s.node)) fn(*f);
    return bad;
  };
  EXPECT_THROW(verify(mutate([](Fused& f) { f.strip = 48; })), VerifyError);
  EXPECT_THROW(verify(mutate([](Fused& f) { f.cols = 32; })), VerifyError);
  EXPECT_THROW(verify(mutate([](Fused& f) { f.registers.push_back(12345); })), VerifyError);
  EXPECT_THROW(verify(mutate([](Fused& f) { f.aliases.push_back(f.registers.at(0)); })), VerifyError);
}

}  // namespace
}  // namespace pypto
