// Tests of pass fast_forms (passes/fast_forms.h): which fused chain values take fast forms, the
// verifier's rules for them, and that `fast=` prints and parses back.
#include "passes/fast_forms.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

std::vector<Fused*> Runs(std::vector<Stmt>& body) {
  std::vector<Fused*> out;
  for (Stmt& s : body) {
    if (auto* f = std::get_if<Fused>(&s.node)) out.push_back(f);
    else if (auto* l = std::get_if<Loop>(&s.node))
      for (Fused* x : Runs(l->body)) out.push_back(x);
  }
  return out;
}

/// y = op(x) over (rows, cols) tiles of dtype `dt`; with `twice`, also y2 = op(x) + op(x), so
/// op's value is stored on its own and cannot stay in registers.
TensorGraph TrigGraph(TensorOpKind kind, DataType dt, bool twice = false) {
  TensorGraphBuilder b("trig");
  int x = b.add_param("x", {Expr(64), Expr(256)}, dt);
  int y = b.add_unary(kind, x, {16, 256}, testing::TestLoc(2));
  if (!twice) {
    b.set_outputs({y});
  } else {
    b.set_outputs({y, b.add_binary(TensorOpKind::Add, y, y, {16, 256}, testing::TestLoc(3))});
  }
  return b.finish();
}

TEST(FastFormsTest, AFusedTrigValueInRegistersTakesItsFastForm) {
  for (TensorOpKind k : {TensorOpKind::Sin, TensorOpKind::Cos, TensorOpKind::Tan}) {
    PipelineResult r = run_pipeline(TrigGraph(k, DataType::FP32), PassOptions{});
    std::vector<Fused*> runs = Runs(r.block.functions.at(0).body);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0]->fast, runs[0]->registers);
    EXPECT_NE(print(r.block).find(" fast=[%"), std::string::npos);
    bool noted = false;
    for (const PassRecord& p : r.passes)
      if (p.name == "fast_forms")
        for (const std::string& n : p.notes) noted |= n.find("by fast forms") != std::string::npos;
    EXPECT_TRUE(noted);
  }
}

TEST(FastFormsTest, WriteBacksOtherDtypesAndOtherOpsKeepTheFullForms) {
  // sin's value is also stored on its own: written back, so the strip cannot be redone.
  PipelineResult twice = run_pipeline(TrigGraph(TensorOpKind::Sin, DataType::FP32, true), PassOptions{});
  for (const InCoreFunction& f : twice.block.functions) {
    std::vector<Stmt> body = f.body;
    for (Fused* run : Runs(body)) EXPECT_TRUE(run->fast.empty());
  }
  // fp16 chains and functions without a fast form.
  for (auto [k, dt] : {std::pair{TensorOpKind::Sin, DataType::FP16}, std::pair{TensorOpKind::Exp, DataType::FP32}}) {
    PipelineResult r = run_pipeline(TrigGraph(k, dt), PassOptions{});
    std::vector<Fused*> runs = Runs(r.block.functions.at(0).body);
    for (Fused* run : runs) EXPECT_TRUE(run->fast.empty());
  }
  // Disabled by name, the pass leaves every run on the full forms.
  PassOptions off;
  off.disabled.insert("fast_forms");
  PipelineResult r = run_pipeline(TrigGraph(TensorOpKind::Sin, DataType::FP32), off);
  for (Fused* run : Runs(r.block.functions.at(0).body)) EXPECT_TRUE(run->fast.empty());
}

TEST(FastFormsTest, FastPrintsAndParsesBackAndTheVerifierChecksIt) {
  PipelineResult r = run_pipeline(TrigGraph(TensorOpKind::Sin, DataType::FP32), PassOptions{});
  const std::string text = print_pto(r.execution);
  ASSERT_NE(text.find(" fast=[%"), std::string::npos) << text;
  ExecutionGraph parsed = parse_pto(text);
  verify(parsed);
  EXPECT_EQ(print_pto(parsed), text);
  // Running the pass on the parsed program decides the same.
  BlockGraph b = testing::BlockOf(parsed);
  EXPECT_EQ(print(FastForms(b, PassOptions{})), print(b));
  auto mutate = [&](auto fn) {
    BlockGraph bad = b;
    for (Fused* f : Runs(bad.functions.at(0).body)) fn(*f);
    return bad;
  };
  // A tile no chain instruction with a fast form writes; a run with a value written back.
  EXPECT_THROW(verify(mutate([](Fused& f) { f.fast.push_back(12345); })), VerifyError);
  EXPECT_THROW(verify(mutate([](Fused& f) { f.registers.clear(); })), VerifyError);
  try {
    verify(mutate([](Fused& f) { f.registers.clear(); }));
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("fused.fast"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pypto
