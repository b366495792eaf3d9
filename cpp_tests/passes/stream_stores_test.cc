// Tests of pass stream_stores (passes/stream_stores.h): which stores stream, by the target's caches.
#include "passes/stream_stores.h"

#include <gtest/gtest.h>

#include "ir/printer.h"
#include "passes/pipeline.h"
#include "passes/util.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

int Streamed(const BlockGraph& g) {
  int n = 0;
  for (const InCoreFunction& f : g.functions)
    for_each_instr(f.body, [&](const Instr& in) { n += in.stream; });
  return n;
}

TEST(StreamStoresTest, OutputsFromSixteenL2sOnStream) {
  PassOptions opts;
  opts.target.l2_bytes = 1 << 20;
  EXPECT_EQ(stream_store_bytes(opts.target), 16 << 20);
  // 2048 x 2048 f32 is 16 MiB: streamed; 2048 x 1024 is not.
  EXPECT_GT(Streamed(run_pipeline(testing::AddGraph({Expr(2048), Expr(2048)}), opts).block), 0);
  EXPECT_EQ(Streamed(run_pipeline(testing::AddGraph({Expr(2048), Expr(1024)}), opts).block), 0);
  // A core with a 2 MiB L2 streams from 32 MiB.
  opts.target.l2_bytes = 2 << 20;
  EXPECT_EQ(Streamed(run_pipeline(testing::AddGraph({Expr(2048), Expr(2048)}), opts).block), 0);
  // Outputs of a symbolic size never stream; the flag prints as `stream`.
  TensorGraphBuilder b("add_dyn");
  b.add_dyn_dim("M");
  int x = b.add_param("x", {Expr::var("M"), Expr(4096)}, DataType::FP32);
  b.set_outputs({b.add_binary(TensorOpKind::Add, x, x, {32, 32}, testing::TestLoc(2))});
  EXPECT_EQ(Streamed(run_pipeline(b.finish(), opts).block), 0);
  opts.target.l2_bytes = 1 << 20;
  EXPECT_NE(print(run_pipeline(testing::AddGraph({Expr(2048), Expr(2048)}), opts).block).find("] stream\n"),
            std::string::npos);
}

TEST(StreamStoresTest, AnOutputScatteredIntoAfterItsStoreDoesNotStream) {
  // index_add's 16 MiB copy of x is updated by the scatter right after: it stays in the caches.
  PassOptions opts;
  opts.target.l2_bytes = 1 << 20;
  EXPECT_EQ(Streamed(run_pipeline(testing::IndexAddGraph(Expr(4096), Expr(64), 1024, {32, 1024}), opts).block), 0);
}

}  // namespace
}  // namespace pypto
