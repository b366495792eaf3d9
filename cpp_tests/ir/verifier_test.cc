// One test per verifier rule: start from a graph the pipeline produced (so it
// is valid), break exactly one invariant and check that the rule that guards
// it is the one that fires.
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <functional>

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/errors.h"
#include "passes/pipeline.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

template <typename G>
void ExpectRule(const G& g, const std::string& rule) {
  try {
    verify(g);
    ADD_FAILURE() << "verify passed; expected [" << rule << "]";
  } catch (const VerifyError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[" + rule + "]", 0), 0u) << "expected [" << rule << "], got: " << e.what();
  }
}

PipelineResult Lower(const TensorGraph& g) { return run_pipeline(g, PassOptions{}); }

// add [64, 100] with tile [32, 32]: one nest, FOR i0_0 { FOR i0_1 { TLOAD a; TLOAD b; TADD; TSTORE out } }.
PipelineResult AddProgram() { return Lower(testing::AddGraph({Expr(64), Expr(100)})); }

std::vector<Stmt>& Body(Stmt& s) { return std::get<Loop>(s.node).body; }
Loop& LoopOf(Stmt& s) { return std::get<Loop>(s.node); }
Instr& InstrOf(Stmt& s) { return std::get<Instr>(s.node); }

// The instructions inside the two parallel loops of a binary/unary nest.
std::vector<Stmt>& Inner(TileNest& n) { return Body(Body(n.body.at(0)).at(0)); }

constexpr int kA = 0, kB = 1, kOut = 2;  // memrefs of AddProgram
constexpr size_t kLoadA = 0, kLoadB = 1, kAdd = 2, kStore = 3;

// ---------------------------------------------------------------- baselines

TEST(VerifierTest, PipelineOutputsVerify) {
  for (const TensorGraph& g : {testing::SoftmaxGraph(64, 1024), testing::SoftmaxGraph(50, 100),
                               testing::AddGraph({Expr(64), Expr(100)})}) {
    PipelineResult r = Lower(g);
    EXPECT_NO_THROW(verify(r.tensor));
    EXPECT_NO_THROW(verify(r.tile));
    EXPECT_NO_THROW(verify(r.block));
    EXPECT_NO_THROW(verify(r.execution));
  }
}

TEST(VerifierTest, TheCorruptedInstructionsAreTheOnesExpected) {
  // Guards the indices the tests below rely on.
  PipelineResult r = AddProgram();
  EXPECT_EQ(testing::OpcodeString(Inner(r.tile.nests[0])), "tload tload tadd tstore");
  EXPECT_EQ(InstrOf(Inner(r.tile.nests[0])[kLoadA]).memref, kA);
  EXPECT_EQ(InstrOf(Inner(r.tile.nests[0])[kLoadB]).memref, kB);
  EXPECT_EQ(InstrOf(Inner(r.tile.nests[0])[kStore]).memref, kOut);
  EXPECT_EQ(testing::OpcodeString(r.block.functions[0].body), "tload tload tadd tstore");
  EXPECT_EQ(r.block.launches[0].grid.size(), 2u);
}

// ---------------------------------------------------------------- Tensor Graph

TEST(VerifierTest, TensorValueExistsForParams) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.params.push_back(99);
  ExpectRule(g, "tensor.value-exists");
}

TEST(VerifierTest, TensorValueExistsForOpOutputs) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.ops[4].output = 99;
  ExpectRule(g, "tensor.value-exists");
}

TEST(VerifierTest, TensorArity) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.ops[2].inputs.push_back(0);  // exp with two inputs
  ExpectRule(g, "tensor.arity");
}

TEST(VerifierTest, TensorUseBeforeDefOfAnInput) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  std::swap(g.ops[0], g.ops[1]);  // sub now reads amax's result before amax runs
  ExpectRule(g, "tensor.use-before-def");
}

TEST(VerifierTest, TensorUseBeforeDefOfAnOutput) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  TensorValue orphan = g.values[5];
  orphan.id = static_cast<int>(g.values.size());
  g.values.push_back(orphan);
  g.outputs = {orphan.id};
  ExpectRule(g, "tensor.use-before-def");
}

TEST(VerifierTest, TensorSsa) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.ops[2].output = g.params[0];
  ExpectRule(g, "tensor.ssa");
}

TEST(VerifierTest, TensorTileRank) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.ops[2].tile_shape = {32};
  ExpectRule(g, "tensor.tile-rank");
}

TEST(VerifierTest, TensorReduceDim) {
  TensorGraph g = testing::SoftmaxGraph(64, 1024);
  g.ops[0].dim = 2;
  g.ops[0].dims = {2};
  ExpectRule(g, "tensor.reduce-dim");
}

// ---------------------------------------------------------------- Tile Graph

TEST(VerifierTest, TileUnique) {
  TileGraph g = AddProgram().tile;
  g.tiles.push_back(g.tiles[0]);
  ExpectRule(g, "tile.unique");
}

TEST(VerifierTest, TileShape) {
  TileGraph g = AddProgram().tile;
  g.tiles[1].shape = {32, 0};
  ExpectRule(g, "tile.shape");
}

TEST(VerifierTest, MemrefExistsForOutputs) {
  TileGraph g = AddProgram().tile;
  g.outputs.push_back(99);
  ExpectRule(g, "memref.exists");
}

TEST(VerifierTest, MemrefExistsForInstructions) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kLoadB]).memref = 99;
  ExpectRule(g, "memref.exists");
}

TEST(VerifierTest, TileNoLocal) {
  TileGraph g = AddProgram().tile;
  g.memrefs[kOut].kind = MemKind::Local;
  ExpectRule(g, "tile.no-local");
}

TEST(VerifierTest, LevelNoCallInTileNests) {
  TileGraph g = AddProgram().tile;
  Inner(g.nests[0]).push_back(Stmt{Call{}});
  ExpectRule(g, "level.no-call");
}

TEST(VerifierTest, InstrArity) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kAdd]).srcs = {0};
  ExpectRule(g, "instr.arity");
}

TEST(VerifierTest, TileDeclaredForSources) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kAdd]).srcs = {0, 99};
  ExpectRule(g, "tile.declared");
}

TEST(VerifierTest, TileDeclaredForDestinations) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kAdd]).dst = 99;
  ExpectRule(g, "tile.declared");
}

TEST(VerifierTest, TileUseBeforeDef) {
  TileGraph g = AddProgram().tile;
  std::vector<Stmt>& body = Inner(g.nests[0]);
  std::swap(body[kLoadB], body[kAdd]);  // tadd reads b's tile before the load
  ExpectRule(g, "tile.use-before-def");
}

TEST(VerifierTest, MemrefRankOfInstructionOffsets) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kLoadA]).offsets.pop_back();
  ExpectRule(g, "memref.rank");
}

TEST(VerifierTest, TileRank) {
  TileGraph g = AddProgram().tile;
  g.tiles[0].shape = {32};
  ExpectRule(g, "tile.rank");
}

TEST(VerifierTest, TileDtype) {
  TileGraph g = AddProgram().tile;
  g.tiles[0].dtype = DataType::FP16;
  ExpectRule(g, "tile.dtype");
}

TEST(VerifierTest, TileValidRank) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kLoadA]).valid.pop_back();
  ExpectRule(g, "tile.valid-rank");
}

TEST(VerifierTest, ScopeOfOffsets) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kLoadA]).offsets[0] = Expr::var("k");
  ExpectRule(g, "scope");
}

TEST(VerifierTest, ScopeOfLoopBounds) {
  TileGraph g = AddProgram().tile;
  LoopOf(Body(g.nests[0].body[0])[0]).stop = Expr::var("i0_1");  // a loop's own var is not in scope of its bound
  ExpectRule(g, "scope");
}

TEST(VerifierTest, InstrShapeOfElementwiseBinary) {
  TileGraph g = AddProgram().tile;
  g.tiles[2].shape = {32, 16};  // tadd's destination
  ExpectRule(g, "instr.shape");
}

TEST(VerifierTest, InstrShapeOfUnary) {
  TileGraph g = Lower(testing::SoftmaxGraph(64, 1024)).tile;
  ASSERT_EQ(testing::OpcodeString(g.nests[2].body), "tload texp tstore");
  int dst = InstrOf(Inner(g.nests[2])[1]).dst;
  g.tiles.at(dst).shape = {32, 16};
  ExpectRule(g, "instr.shape");
}

TEST(VerifierTest, InstrShapeOfRowExpand) {
  TileGraph g = Lower(testing::SoftmaxGraph(64, 1024)).tile;
  ASSERT_EQ(testing::OpcodeString(g.nests[1].body), "tload tload trowexpandsub tstore");
  int row = InstrOf(Inner(g.nests[1])[2]).srcs.at(1);
  g.tiles.at(row).shape = {32, 32};  // src1 is no longer a column of per-row values
  ExpectRule(g, "instr.shape");
}

/// The last instruction with opcode `op` in any nest of `g` (null if none).
Instr* FindInstr(TileGraph& g, Opcode op) {
  Instr* found = nullptr;
  std::function<void(std::vector<Stmt>&)> walk = [&](std::vector<Stmt>& body) {
    for (Stmt& s : body) {
      if (auto* in = std::get_if<Instr>(&s.node); in && in->op == op) found = in;
      if (auto* l = std::get_if<Loop>(&s.node)) walk(l->body);
    }
  };
  for (TileNest& n : g.nests) walk(n.body);
  return found;
}

TEST(VerifierTest, AWindowIsATscattersBaseAndBound) {
  TileGraph g = Lower(testing::IndexAddGraph(Expr(64), Expr(40), 16, {16, 16})).tile;
  Instr* sc = FindInstr(g, Opcode::TSCATTER);
  ASSERT_NE(sc, nullptr);
  ASSERT_EQ(sc->window.size(), 2u);
  verify(g);
  sc->window.pop_back();
  ExpectRule(g, "instr.window");
  Instr* st = FindInstr(g, Opcode::TSTORE);
  ASSERT_NE(st, nullptr);
  sc->window.push_back(Expr(64));
  st->window = sc->window;
  ExpectRule(g, "instr.window");
}

TEST(VerifierTest, InstrShapeAndAxisOfScan) {
  TensorGraphBuilder b("scan");
  int x = b.add_param("x", {Expr(64), Expr(100)}, DataType::FP32);
  b.set_outputs({b.add_scan(TensorOpKind::Cumsum, x, 1, {32, 32}, testing::TestLoc(2))});
  TileGraph g = Lower(b.finish()).tile;
  Instr* scan = FindInstr(g, Opcode::TCUMSUM);
  ASSERT_NE(scan, nullptr);
  verify(g);
  const int axis = scan->axis;
  scan->axis = 2;
  ExpectRule(g, "instr.axis");
  scan->axis = axis;
  g.tiles.at(scan->srcs[1]).shape = {32, 32};  // the carry is no longer one value per row
  ExpectRule(g, "instr.shape");
}

TEST(VerifierTest, InstrShapeAndDtypeOfSort) {
  TensorGraphBuilder b("sort");
  int x = b.add_param("x", {Expr(64), Expr(100)}, DataType::FP32);
  b.set_outputs({b.add_sort(TensorOpKind::Argsort, x, 8, true, {32, 32}, testing::TestLoc(2))});
  TileGraph g = Lower(b.finish()).tile;
  Instr* sort = FindInstr(g, Opcode::TSORTDESC);
  ASSERT_NE(sort, nullptr);
  verify(g);
  EXPECT_EQ(g.tiles.at(sort->dst).shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(g.tiles.at(sort->srcs[0]).shape, (std::vector<int64_t>{32, 100}));  // the whole sorted dim
  g.tiles.at(sort->dst).dtype = DataType::INT64;
  ExpectRule(g, "instr.dtype");
  g.tiles.at(sort->dst).dtype = DataType::INT32;
  g.tiles.at(sort->dst).shape = {32, 101};  // keeps more than the row has
  ExpectRule(g, "instr.shape");
}

TEST(VerifierTest, LoopStep) {
  TileGraph g = AddProgram().tile;
  LoopOf(g.nests[0].body[0]).step = Expr(0);
  ExpectRule(g, "loop.step");
}

TEST(VerifierTest, LoopShadow) {
  TileGraph g = AddProgram().tile;
  LoopOf(Body(g.nests[0].body[0])[0]).var = LoopOf(g.nests[0].body[0]).var;
  ExpectRule(g, "loop.shadow");
}

// ---------------------------------------------------------------- Block Graph

TEST(VerifierTest, MemrefVisibleInFunctions) {
  BlockGraph g = AddProgram().block;
  MemRef extra = g.memrefs[kA];
  extra.id = static_cast<int>(g.memrefs.size());
  extra.name = "w";
  extra.kind = MemKind::Workspace;
  g.memrefs.push_back(extra);
  InstrOf(g.functions[0].body[kLoadA]).memref = extra.id;  // not a parameter of the function
  ExpectRule(g, "memref.visible");
}

TEST(VerifierTest, MemrefExistsForFunctionParams) {
  BlockGraph g = AddProgram().block;
  g.functions[0].params[1].memref = 99;
  ExpectRule(g, "memref.exists");
}

TEST(VerifierTest, FunctionParamLocal) {
  BlockGraph g = Lower(testing::SoftmaxGraph(64, 1024)).block;
  ASSERT_EQ(g.functions[0].locals.size(), 1u);
  g.functions[0].params[0].memref = g.functions[0].locals[0];
  ExpectRule(g, "function.param-local");
}

TEST(VerifierTest, MemrefRankOfFunctionParams) {
  BlockGraph g = AddProgram().block;
  g.functions[0].params[0].max_extents.pop_back();
  ExpectRule(g, "memref.rank");
}

TEST(VerifierTest, FunctionLocal) {
  BlockGraph g = AddProgram().block;
  g.functions[0].locals.push_back(kA);  // an input, not a local buffer
  ExpectRule(g, "function.local");
}

TEST(VerifierTest, FunctionStoreToInput) {
  BlockGraph g = AddProgram().block;
  InstrOf(g.functions[0].body[kStore]).memref = kA;
  ExpectRule(g, "function.store-to-input");
}

TEST(VerifierTest, LevelNoCallInFunctions) {
  BlockGraph g = AddProgram().block;
  g.functions[0].body.push_back(Stmt{g.launches[0].call});
  ExpectRule(g, "level.no-call");
}

TEST(VerifierTest, BlockGridParallel) {
  BlockGraph g = AddProgram().block;
  g.launches[0].grid[1].parallel = false;
  ExpectRule(g, "block.grid-parallel");
}

TEST(VerifierTest, CallCalleeOfALaunch) {
  BlockGraph g = AddProgram().block;
  g.functions.push_back(g.functions[0]);
  g.functions[1].name = "add_copy";
  g.launches[0].call.callee = 1;  // exists, but is not the launched function
  ExpectRule(g, "call.callee");
}

TEST(VerifierTest, CallArityOfRegions) {
  BlockGraph g = AddProgram().block;
  g.launches[0].call.args.pop_back();
  ExpectRule(g, "call.arity");
}

TEST(VerifierTest, CallArityOfScalars) {
  BlockGraph g = AddProgram().block;
  g.launches[0].call.scalars.pop_back();
  ExpectRule(g, "call.arity");
}

TEST(VerifierTest, CallDtype) {
  BlockGraph g = AddProgram().block;
  g.functions[0].params[1].dtype = DataType::FP16;
  ExpectRule(g, "call.dtype");
}

TEST(VerifierTest, MemrefRankOfCallRegions) {
  BlockGraph g = AddProgram().block;
  g.launches[0].call.args[0].extents.pop_back();
  ExpectRule(g, "memref.rank");
}

TEST(VerifierTest, ScopeOfCallArguments) {
  BlockGraph g = AddProgram().block;
  g.launches[0].grid.pop_back();  // g1 is still used by the call
  ExpectRule(g, "scope");
}

// "call.local" cannot fire: check_call runs the orchestration's visibility
// check (which hides local buffers) before its own local-buffer test, so a
// CALL passing a local buffer is reported as "memref.visible".
TEST(VerifierTest, CallPassingALocalBufferIsRejected) {
  BlockGraph g = Lower(testing::SoftmaxGraph(64, 1024)).block;
  int local = g.functions[0].locals.at(0);
  g.launches[0].call.args[0].memref = local;
  try {
    verify(g);
    FAIL() << "a CALL passing a local buffer verified";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("%" + g.memrefs[local].name), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("[call.local]", 0), 0u) << e.what();
  }
}

// ---------------------------------------------------------------- Execution Graph

Call& OrchestrationCall(ExecutionGraph& g) { return std::get<Call>(Body(Body(g.orchestration.at(0)).at(0)).at(0).node); }

TEST(VerifierTest, LevelNoInstrInOrchestration) {
  ExecutionGraph g = AddProgram().execution;
  Instr fill{Opcode::TFILL};
  fill.dst = 0;
  g.orchestration.push_back(Stmt{fill});
  ExpectRule(g, "level.no-instr");
}

TEST(VerifierTest, CallCalleeThatDoesNotExist) {
  ExecutionGraph g = AddProgram().execution;
  OrchestrationCall(g).callee = 5;
  ExpectRule(g, "call.callee");
}

TEST(VerifierTest, MemrefExistsForCallRegions) {
  ExecutionGraph g = AddProgram().execution;
  OrchestrationCall(g).args[2].memref = 99;
  ExpectRule(g, "memref.exists");
}

TEST(VerifierTest, ScopeOfOrchestrationCalls) {
  ExecutionGraph g = AddProgram().execution;
  Call c = OrchestrationCall(g);
  g.orchestration = {Stmt{c}};  // outside the grid loops that define g0 and g1
  ExpectRule(g, "scope");
}

TEST(VerifierTest, MessagesNameTheOffender) {
  TileGraph g = AddProgram().tile;
  InstrOf(Inner(g.nests[0])[kLoadA]).offsets[1] = Expr::var("k") * Expr(32);
  try {
    verify(g);
    FAIL();
  } catch (const VerifyError& e) {
    EXPECT_STREQ(e.what(), "[scope] tload uses 'k' outside its scope");
  }
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

// Rules added with views, assemble, matmul, scatter and conditions.

TensorGraph ViewAssembleGraph() {
  TensorGraphBuilder b("va");
  int x = b.add_param("x", {Expr(8), Expr(8)}, DataType::FP32);
  int out = b.add_param("out", {Expr(8), Expr(8)}, DataType::FP32);
  int v = b.add_view(out, {Expr(4), Expr(8)}, {Expr(0), Expr(0)}, {0, 1}, {1, 1}, {}, testing::TestLoc());
  int y = b.add_view(x, {Expr(4), Expr(8)}, {Expr(4), Expr(0)}, {0, 1}, {1, 1}, {}, testing::TestLoc());
  b.add_assemble(y, v, {4, 8}, testing::TestLoc());
  return b.finish();
}

TEST(VerifierTest, TensorAssembleMustWriteItsView) {
  TensorGraph g = ViewAssembleGraph();
  verify(g);
  for (TensorOp& op : g.ops)
    if (op.kind == TensorOpKind::Assemble) op.output = op.inputs[0];
  ExpectRule(g, "tensor.assemble");
}

TEST(VerifierTest, TensorViewNeedsItsViewMap) {
  TensorGraph g = ViewAssembleGraph();
  for (TensorOp& op : g.ops)
    if (op.kind == TensorOpKind::View) {
      g.values[op.output].view.reset();
      break;
    }
  ExpectRule(g, "tensor.view");
}

TEST(VerifierTest, TensorMatmulNeedsACubeTile) {
  TensorGraphBuilder b("mm");
  int x = b.add_param("x", {Expr(8), Expr(8)}, DataType::FP32);
  b.set_outputs({b.add_matmul(x, x, DataType::FP32, {8, 8, 8}, {8, 8, 8}, testing::TestLoc())});
  TensorGraph g = b.finish();
  g.ops[0].cube_tile.clear();
  ExpectRule(g, "tensor.cube-tile");
}

TEST(VerifierTest, TensorConvChecksItsGeometry) {
  TensorGraphBuilder b("conv");
  b.add_dyn_dim("N");
  int x = b.add_param("x", {Expr::var("N"), Expr(3), Expr(9), Expr(8)}, DataType::FP32);
  int w = b.add_param("w", {Expr(4), Expr(27)}, DataType::FP32);
  int y = b.add_conv(x, w, DataType::FP32, {3, 3, 1, 1}, {4, 3, 2}, testing::TestLoc());
  EXPECT_EQ(shape_str(b.value(y).shape), "[N, 4, 7, 6]");
  // Dilation 2 along the width: 8 - 2 * 2 columns.
  EXPECT_EQ(shape_str(b.value(b.add_conv(x, w, DataType::FP32, {3, 3, 1, 2}, {4, 3, 2}, testing::TestLoc())).shape),
            "[N, 4, 7, 4]");
  b.set_outputs({y});
  TensorGraph g = b.finish();
  g.ops[0].conv[2] = 2;  // the output no longer matches the dilated kernel
  ExpectRule(g, "tensor.conv");
  // A weight that is not [Cout, kh kw Cin], a kernel larger than the input: errors naming the op.
  TensorGraphBuilder c("conv");
  int cx = c.add_param("x", {Expr(1), Expr(3), Expr(4), Expr(4)}, DataType::FP32);
  int cw = c.add_param("w", {Expr(4), Expr(26)}, DataType::FP32);
  EXPECT_THROW(c.add_conv(cx, cw, DataType::FP32, {3, 3, 1, 1}, {4, 3, 2}, testing::TestLoc()), UserError);
  int cw2 = c.add_param("w2", {Expr(4), Expr(75)}, DataType::FP32);
  EXPECT_THROW(c.add_conv(cx, cw2, DataType::FP32, {5, 5, 1, 1}, {4, 3, 2}, testing::TestLoc()), UserError);
  EXPECT_THROW(c.add_conv(cx, cw2, DataType::FP32, {5, 5, 0, 1}, {4, 3, 2}, testing::TestLoc()), UserError);
}

TEST(VerifierTest, TensorScatterMustWriteItsTarget) {
  TensorGraphBuilder b("sc");
  int x = b.add_param("x", {Expr(4), Expr(4)}, DataType::FP32);
  int i = b.add_param("i", {Expr(4), Expr(2)}, DataType::INT64);
  int s = b.add_param("s", {Expr(4), Expr(2)}, DataType::FP32);
  int o = b.add_full({Expr(4), Expr(4)}, Operand::scalar(0, true), DataType::FP32, {}, {4, 4}, testing::TestLoc());
  b.add_scatter(o, 1, i, s, ScatterReduce::Add, {4, 2}, testing::TestLoc());
  b.set_outputs({o});
  TensorGraph g = b.finish();
  (void)x;
  g.ops.back().output = g.ops.back().inputs[0];
  ExpectRule(g, "tensor.scatter");
}

TEST(VerifierTest, IfIsNotAllowedInATileGraphNest) {
  PipelineResult r = AddProgram();
  r.tile.nests[0].body.push_back(Stmt{IfThen{Expr(1), {}, {}}});
  ExpectRule(r.tile, "level.no-if");
  // Functions and the orchestration may branch.
  ExecutionGraph g = r.execution;
  g.functions[0].body.push_back(Stmt{IfThen{Expr(1), {}, {}}});
  EXPECT_NO_THROW(verify(g));
}

}  // namespace
}  // namespace pypto
