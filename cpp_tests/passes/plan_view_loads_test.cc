// Tests of pass plan_view_loads (passes/plan_view_loads.h): which loads may view their source.
#include "passes/plan_view_loads.h"

#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/util.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

BlockGraph Parse(const std::string& body) {
  const std::string text = R"(module @m entry @main

incore func @f(%x: !pto.memref<gm,8x32,f32>, %h: !pto.memref<gm,8x32,f16>, %y: !pto.memref<gm,8x32,f32> out) buffer_bytes=0 {
  %a = alloc_tile : !pto.tile<8x32xf32>
  %b = alloc_tile : !pto.tile<8x32xf32>
  %c = alloc_tile : !pto.tile<8x32xf32>
)" + body + R"(  return
}

orchestration func @main(%x: !pto.memref<gm,8x32,f32>, %h: !pto.memref<gm,8x32,f16>, %y: !pto.memref<gm,8x32,f32> out) {
  CALL @f(%x -> %x[0, 0; 8, 32], %h -> %h[0, 0; 8, 32], %y -> %y[0, 0; 8, 32])
  return
}
)";
  ExecutionGraph e = parse_pto(text);
  return testing::BlockOf(e);
}

std::vector<bool> Views(const BlockGraph& g) {
  std::vector<bool> v;
  for_each_instr(g.functions[0].body, [&](const Instr& in) {
    if (in.op == Opcode::TLOAD) v.push_back(in.view);
  });
  return v;
}

TEST(PlanViewLoadsTest, ALoadReadBeforeAnyStoreViews) {
  BlockGraph g = PlanViewLoads(Parse("  %a = tload %x[0, 0] : !pto.tile<8x32xf32>\n"
                                     "  %b = texp %a : !pto.tile<8x32xf32>\n"
                                     "  tstore %b, %y[0, 0]\n"),
                               PassOptions{});
  verify(g);
  EXPECT_EQ(Views(g), std::vector<bool>{true});
  EXPECT_NE(print(g).find("tload %x[0, 0] view :"), std::string::npos);
}

TEST(PlanViewLoadsTest, AStoreBeforeTheLastReadOrAnotherWriterOrAConversionCopies) {
  // A store between the load and the read of its value.
  EXPECT_EQ(Views(PlanViewLoads(Parse("  %a = tload %x[0, 0] : !pto.tile<8x32xf32>\n"
                                      "  tstore %a, %y[0, 0]\n"
                                      "  %b = texp %a : !pto.tile<8x32xf32>\n"
                                      "  tstore %b, %y[0, 0]\n"),
                                PassOptions{})),
            std::vector<bool>{false});
  // The tile is also written by an instruction.
  EXPECT_EQ(Views(PlanViewLoads(Parse("  %a = tload %x[0, 0] : !pto.tile<8x32xf32>\n"
                                      "  %a = texp %a : !pto.tile<8x32xf32>\n"
                                      "  tstore %a, %y[0, 0]\n"),
                                PassOptions{})),
            std::vector<bool>{false});
  // The load converts f16 to f32.
  EXPECT_EQ(Views(PlanViewLoads(Parse("  %a = tload %h[0, 0] : !pto.tile<8x32xf32>\n"
                                      "  tstore %a, %y[0, 0]\n"),
                                PassOptions{})),
            std::vector<bool>{false});
  // A flag written in the text is planned again.
  EXPECT_EQ(Views(PlanViewLoads(Parse("  %a = tload %x[0, 0] view : !pto.tile<8x32xf32>\n"
                                      "  %a = texp %a : !pto.tile<8x32xf32>\n"
                                      "  tstore %a, %y[0, 0]\n"),
                                PassOptions{})),
            std::vector<bool>{false});
}

}  // namespace
}  // namespace pypto
