// Tests of pass plan_matmul_panels (passes/plan_matmul_panels.h): which matmul operands are loaded
// in column panels, and the verifier's rules for the layout.
#include "passes/plan_matmul_panels.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/plan_view_loads.h"
#include "passes/util.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

/// A function multiplying a [M, K] tile of %x by a [K, N] tile of %w (fp32, or bf16 through
/// %h) into %y, K = kK, with `body` between the declarations and the return. %w and %h have
/// `wcols` columns (default 2N: the tile does not span their rows, so its load copies). b's block of
/// K rows is larger than a first-level cache (K x 48 floats: 96 KiB) unless a test says otherwise.
constexpr int64_t kK = 512;
std::string Module(int64_t m, int64_t n, const std::string& body, int64_t wcols = 0) {
  wcols = wcols > 0 ? wcols : 2 * n;
  const std::string x = fmt::format("!pto.memref<gm,{}x{},f32>", m, kK),
                    w = fmt::format("!pto.memref<gm,{}x{},f32>", kK, wcols),
                    h = fmt::format("!pto.memref<gm,{}x{},bf16>", kK, wcols), y = fmt::format("!pto.memref<gm,{}x{},f32>", m, n);
  const std::string params = fmt::format("%x: {}, %w: {}, %h: {}, %y: {} out", x, w, h, y);
  return fmt::format(R"(module @m entry @main

incore func @f({}) buffer_bytes=0 {{
  %a = alloc_tile : !pto.tile<{}x{}xf32>
  %b = alloc_tile : !pto.tile<{}x{}xf32>
  %c = alloc_tile : !pto.tile<{}x{}xf32>
{}  return
}}

orchestration func @main({}) {{
  CALL @f(%x -> %x[0, 0; {}, {}], %w -> %w[0, 0; {}, {}], %h -> %h[0, 0; {}, {}], %y -> %y[0, 0; {}, {}])
  return
}}
)",
                     params, m, kK, kK, n, m, n, body, params, m, kK, kK, n, kK, n, m, n);
}

BlockGraph Parse(const std::string& text) { return testing::BlockOf(parse_pto(text)); }

/// x86-64-v3 with a first-level cache of 32 KiB (the pass's rules, whatever this machine's cache).
PassOptions Avx2() {
  PassOptions o;
  o.target = target_by_name("x86-64-v3");
  o.target.l1d_bytes = kPanelMaxL1dBytes;
  return o;
}

/// The panel widths of the function's loads and matmuls, in program order.
std::vector<int64_t> Panels(const BlockGraph& g) {
  std::vector<int64_t> v;
  for_each_instr(g.functions[0].body, [&](const Instr& in) {
    if (in.op == Opcode::TLOAD || in.op == Opcode::TMATMUL || in.op == Opcode::TMATMUL_ACC) v.push_back(in.panels);
  });
  return v;
}

const std::string kProduct =
    "  %a = tload %x[0, 0] : !pto.tile<{M}x{K}xf32>\n"
    "  %b = tload %w[0, 0] view : !pto.tile<{K}x{N}xf32>\n"
    "  %c = tmatmul %a, %b : !pto.tile<{M}x{N}xf32>\n"
    "  tstore %c, %y[0, 0]\n";

std::string Product(int64_t m, int64_t n, std::string body = kProduct, int64_t wcols = 0) {
  for (auto [key, v] : {std::pair<std::string, int64_t>{"{M}", m}, {"{N}", n}, {"{K}", kK}})
    for (size_t at; (at = body.find(key)) != std::string::npos;) body.replace(at, key.size(), std::to_string(v));
  return Module(m, n, body, wcols);
}

TEST(PlanMatmulPanelsTest, BOfAFloatProductIsLoadedInPanelsOfTheTargetsWidth) {
  const int64_t w = target_by_name("x86-64-v3").matmul_panel_cols();
  ASSERT_EQ(w, 16);
  BlockGraph g = PlanMatmulPanels(Parse(Product(32, 64)), Avx2());
  verify(g);
  EXPECT_EQ(Panels(g), (std::vector<int64_t>{0, w, w}));
  const std::string text = print(g);
  EXPECT_NE(text.find("tload %w[0, 0] panels=16 :"), std::string::npos) << text;  // no view: a panel load copies
  EXPECT_NE(text.find("tmatmul %a, %b panels=16 :"), std::string::npos) << text;
  // plan_view_loads leaves a panel load a copy, and a's load may still view.
  BlockGraph v = PlanViewLoads(g, Avx2());
  verify(v);
  EXPECT_NE(print(v).find("tload %x[0, 0] view :"), std::string::npos);
  EXPECT_NE(print(v).find("tload %w[0, 0] panels=16 :"), std::string::npos);
  // The module's .pto text with the decisions parses back to the same text.
  ExecutionGraph e = parse_pto(Product(32, 64));
  e.functions = v.functions;
  const std::string pto = print_pto(e);
  EXPECT_NE(pto.find("panels=16"), std::string::npos);
  EXPECT_EQ(print_pto(parse_pto(pto)), pto);
  // Another target, another width.
  PassOptions v4;
  v4.target = target_by_name("x86-64-v4");
  v4.target.l1d_bytes = kPanelMaxL1dBytes;
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 128)), v4)), (std::vector<int64_t>{0, 32, 32}));
}

TEST(PlanMatmulPanelsTest, ALargerFirstLevelCacheKeepsRowsUnlessPanelsAreAskedFor) {
  PassOptions o = Avx2();
  o.target.l1d_bytes = kPanelMaxL1dBytes + (16 << 10);
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 64)), o)), (std::vector<int64_t>{0, 0, 0}));
  o.matmul_panels = true;
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 64)), o)), (std::vector<int64_t>{0, 16, 16}));
  // The shape rules still hold when panels are asked for.
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(kPanelMinRows - 1, 64)), o)), (std::vector<int64_t>{0, 0, 0}));
  // Asked not to, the pass keeps rows on the small cache too, and clears panels a .pto text had.
  PassOptions never = Avx2();
  never.matmul_panels = false;
  BlockGraph laid = PlanMatmulPanels(Parse(Product(32, 64)), Avx2());
  EXPECT_EQ(Panels(PlanMatmulPanels(laid, never)), (std::vector<int64_t>{0, 0, 0}));
}

TEST(PlanMatmulPanelsTest, FewRowsOtherWidthsAndOtherReadersKeepRows) {
  // Fewer than kPanelMinRows rows of a.
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(kPanelMinRows - 1, 64)), Avx2())), (std::vector<int64_t>{0, 0, 0}));
  // b's block of L0 k rows fits the first-level cache (32 rows of 64 columns: 8 KiB).
  std::string small_k = kProduct;
  small_k.replace(small_k.find(" : !pto.tile<{M}x{N}"), 0, " l0 [32, 32, 64]");
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 64, small_k)), Avx2())), (std::vector<int64_t>{0, 0, 0}));
  // Columns the width does not divide; two panels' worth (b's rows are 128 bytes apart).
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 40)), Avx2())), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 2 * 16)), Avx2())), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, kPanelMinPanels * 16)), Avx2())),
            (std::vector<int64_t>{0, 16, 16}));
  // An L0 n the width does not divide.
  std::string l0 = kProduct;
  l0.replace(l0.find(" : !pto.tile<{M}x{N}"), 0, " l0 [16, 128, 8]");
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(32, 64, l0)), Avx2())), (std::vector<int64_t>{0, 0, 0}));
  // A b whose load may view its source (an fp32 tensor whose rows the tile spans): panels only for
  // products of at least kPanelMinRowsInPlace rows and kPanelMinColsInPlace columns.
  const int64_t rows = kPanelMinRowsInPlace, cols = kPanelMinColsInPlace;
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(rows / 2, cols, kProduct, cols)), Avx2())),
            (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(rows, cols / 2, kProduct, cols / 2)), Avx2())),
            (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Panels(PlanMatmulPanels(Parse(Product(rows, cols, kProduct, cols)), Avx2())),
            (std::vector<int64_t>{0, 16, 16}));
  // b is also added to the product: another reader than a matmul's b.
  BlockGraph s = PlanMatmulPanels(Parse(Module(32, 64, "  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                                                      "  %b = tload %w[0, 0] : !pto.tile<512x64xf32>\n"
                                                      "  %c = tmatmul %a, %b : !pto.tile<32x64xf32>\n"
                                                      "  %c = tadd %c, %b : !pto.tile<32x64xf32>\n"
                                                      "  tstore %c, %y[0, 0]\n")),
                                  Avx2());
  EXPECT_EQ(Panels(s), (std::vector<int64_t>{0, 0, 0}));
  // The same without the addition takes panels.
  BlockGraph p = PlanMatmulPanels(Parse(Module(32, 64, "  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                                                      "  %b = tload %w[0, 0] : !pto.tile<512x64xf32>\n"
                                                      "  %c = tmatmul %a, %b : !pto.tile<32x64xf32>\n"
                                                      "  tstore %c, %y[0, 0]\n")),
                                  Avx2());
  EXPECT_EQ(Panels(p), (std::vector<int64_t>{0, 16, 16}));
}

TEST(PlanMatmulPanelsTest, BfloatSourcesWidenIntoPanelsAndAccumulationsShareThem) {
  // A bf16 weight loaded into the fp32 tile widens as it is laid out; the k loop's accumulating
  // product reads the panels too.
  BlockGraph g = PlanMatmulPanels(Parse(Module(32, 64, "  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                                                      "  %b = tload %h[0, 0] : !pto.tile<512x64xf32>\n"
                                                      "  %c = tmatmul %a, %b : !pto.tile<32x64xf32>\n"
                                                      "  FOR %k:idx, 1:idx, 4:idx, 1:idx\n"
                                                      "    %b = tload %w[0, 0] : !pto.tile<512x64xf32>\n"
                                                      "    %c = tmatmul_acc %c, %a, %b : !pto.tile<32x64xf32>\n"
                                                      "  ENDFOR\n"
                                                      "  tstore %c, %y[0, 0]\n")),
                                  Avx2());
  verify(g);
  EXPECT_EQ(Panels(g), (std::vector<int64_t>{0, 16, 16, 16, 16}));
}

TEST(PlanMatmulPanelsTest, TheVerifierHoldsBothSidesToOneLayout) {
  auto bad = [](const std::string& body, int64_t n = 64) {
    try {
      verify(Parse(Module(32, n, body)));
    } catch (const VerifyError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // A matmul reading panels from a tile loaded by rows, and the other way round.
  EXPECT_NE(bad("  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                "  %b = tload %w[0, 0] : !pto.tile<512x64xf32>\n"
                "  %c = tmatmul %a, %b panels=16 : !pto.tile<32x64xf32>\n"
                "  tstore %c, %y[0, 0]\n")
                .find("tile.layout"),
            std::string::npos);
  EXPECT_NE(bad("  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                "  %b = tload %w[0, 0] panels=16 : !pto.tile<512x64xf32>\n"
                "  %c = tmatmul %a, %b : !pto.tile<32x64xf32>\n"
                "  tstore %c, %y[0, 0]\n")
                .find("tile.layout"),
            std::string::npos);
  // Panels of another width than the matmul's, a store of a panel tile.
  EXPECT_NE(bad("  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                "  %b = tload %w[0, 0] panels=32 : !pto.tile<512x64xf32>\n"
                "  %c = tmatmul %a, %b panels=16 : !pto.tile<32x64xf32>\n"
                "  tstore %c, %y[0, 0]\n")
                .find("tile.layout"),
            std::string::npos);
  EXPECT_NE(bad("  %b = tload %w[0, 0] panels=16 : !pto.tile<512x64xf32>\n"
                "  tstore %b, %y[0, 0]\n", 64)
                .find("tile.layout"),
            std::string::npos);
  // A width that does not divide the columns; a viewing panel load; panels on another instruction;
  // a b_trans product in panels.
  EXPECT_NE(bad("  %b = tload %w[0, 0] panels=24 : !pto.tile<512x64xf32>\n").find("instr.panels"), std::string::npos);
  EXPECT_NE(bad("  %b = tload %w[0, 0] view panels=16 : !pto.tile<512x64xf32>\n").find("instr.panels"),
            std::string::npos);
  EXPECT_NE(bad("  %a = tload %x[0, 0] : !pto.tile<32x512xf32>\n"
                "  %b = tload %w[0, 0] panels=16 : !pto.tile<512x64xf32>\n"
                "  %c = tmatmul %a, %b panels=16 l0 [32, 128, 8] : !pto.tile<32x64xf32>\n"
                "  tstore %c, %y[0, 0]\n")
                .find("instr.panels"),
            std::string::npos);
  // The parser refuses panels on other instructions and a width of 0.
  EXPECT_THROW(Parse(Module(32, 64, "  %b = tload %w[0, 0] : !pto.tile<512x64xf32>\n"
                                    "  %b = texp %b panels=16 : !pto.tile<512x64xf32>\n")),
               PtoSyntaxError);
  EXPECT_THROW(Parse(Module(32, 64, "  %b = tload %w[0, 0] panels=0 : !pto.tile<512x64xf32>\n")), PtoSyntaxError);
}

}  // namespace
}  // namespace pypto
