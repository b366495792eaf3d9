/// Small Tensor Graphs shared by the C++ tests, built through the public builder
/// so that every test starts from a graph the frontend could have produced.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ir/program.h"
#include "ir/tensor_graph.h"

namespace pypto::testing {

inline SourceLoc TestLoc(int line = 1) { return SourceLoc{"model.py", line}; }

/// The InCore functions of a parsed or built module as a Block Graph (what the block passes take).
inline BlockGraph BlockOf(const ExecutionGraph& e) {
  BlockGraph b;
  b.name = e.name;
  b.memrefs = e.memrefs;
  b.functions = e.functions;
  return b;
}

/// softmax(x, dim=-1) as amax -> sub -> exp -> sum -> div, the chain the
/// architecture's worked example fuses into one InCore function.
inline TensorGraph SoftmaxGraph(int64_t rows, int64_t cols, std::vector<int64_t> tile = {32, 32}) {
  TensorGraphBuilder b("softmax");
  int x = b.add_param("x", {Expr(rows), Expr(cols)}, DataType::FP32);
  int m = b.add_reduce(TensorOpKind::Amax, x, -1, true, tile, TestLoc(2));
  int d = b.add_binary(TensorOpKind::Sub, x, m, tile, TestLoc(3));
  int e = b.add_unary(TensorOpKind::Exp, d, tile, TestLoc(4));
  int s = b.add_reduce(TensorOpKind::Sum, e, -1, true, tile, TestLoc(5));
  int y = b.add_binary(TensorOpKind::Div, e, s, tile, TestLoc(6));
  b.set_outputs({y});
  return b.finish();
}

/// out = a + b over two parameters of the same shape.
inline TensorGraph AddGraph(std::vector<Expr> shape, std::vector<int64_t> tile = {32, 32}) {
  TensorGraphBuilder b("add");
  int a = b.add_param("a", shape, DataType::FP32);
  int c = b.add_param("b", shape, DataType::FP32);
  int y = b.add_binary(TensorOpKind::Add, a, c, tile, TestLoc(2));
  b.set_outputs({y});
  return b.finish();
}

/// index_add as the frontend builds it: a copy of x (a fill covered by an assemble into a view of
/// all of it), then the rows of src added at the row positions idx (an index seen as [t, cols]).
/// With `tile` {rows, cols}: cols covering the columns, the scatter goes by destination blocks.
inline TensorGraph IndexAddGraph(const Expr& m, const Expr& t, int64_t cols, std::vector<int64_t> tile) {
  TensorGraphBuilder b("index_add");
  for (const Expr& d : {m, t})
    if (!d.is_const()) b.add_dyn_dim(d.name());
  int x = b.add_param("x", {m, Expr(cols)}, DataType::FP32);
  int idx = b.add_param("idx", {t}, DataType::INT64);
  int src = b.add_param("src", {t, Expr(cols)}, DataType::FP32);
  int out = b.add_full({m, Expr(cols)}, Operand::scalar(0, true), DataType::FP32, {}, tile, TestLoc(2));
  b.mark_covered(out);
  int all = b.add_view(out, {m, Expr(cols)}, {Expr(0), Expr(0)}, {0, 1}, {1, 1}, {}, TestLoc(2));
  b.add_assemble(x, all, tile, TestLoc(2));
  int rows = b.add_reshape(idx, {t, Expr(1)}, TestLoc(3));
  int each = b.add_view(rows, {t, Expr(cols)}, {Expr(0), Expr(0)}, {0, -1}, {1, 1}, {}, TestLoc(3));
  b.set_outputs({b.add_scatter(out, 0, each, src, ScatterReduce::Add, tile, TestLoc(3))});
  return b.finish();
}

/// exp(x) / sum(exp(x), -1) over (64, N) with a dynamic N: exp's [32, N]
/// block is a local buffer sized at run time.
inline TensorGraph DynamicColsGraph() {
  TensorGraphBuilder b("dyn_cols");
  b.add_dyn_dim("N");
  int x = b.add_param("x", {Expr(64), Expr::var("N")}, DataType::FP32);
  int e = b.add_unary(TensorOpKind::Exp, x, {32, 32}, TestLoc());
  int s = b.add_reduce(TensorOpKind::Sum, e, 1, true, {32, 32}, TestLoc());
  b.set_outputs({b.add_binary(TensorOpKind::Div, e, s, {32, 32}, TestLoc())});
  return b.finish();
}

/// The loops of a statement list, in order (instructions and calls skipped).
inline std::vector<const Loop*> LoopsOf(const std::vector<Stmt>& body) {
  std::vector<const Loop*> out;
  for (const Stmt& s : body)
    if (auto* l = std::get_if<Loop>(&s.node)) out.push_back(l);
  return out;
}

/// Opcodes of every instruction in `body`, loops included, in program order.
inline std::vector<Opcode> OpcodesOf(const std::vector<Stmt>& body) {
  std::vector<Opcode> out;
  for (const Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) out.push_back(in->op);
    else if (auto* l = std::get_if<Loop>(&s.node)) {
      auto inner = OpcodesOf(l->body);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

/// Every instruction in `body` (loops included), in program order.
inline std::vector<const Instr*> InstrsOf(const std::vector<Stmt>& body) {
  std::vector<const Instr*> out;
  for (const Stmt& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) out.push_back(in);
    else if (auto* l = std::get_if<Loop>(&s.node)) {
      auto inner = InstrsOf(l->body);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

/// Opcode mnemonics joined by spaces, for readable expectations.
inline std::string OpcodeString(const std::vector<Stmt>& body) {
  std::string s;
  for (Opcode op : OpcodesOf(body)) s += (s.empty() ? "" : " ") + std::string(opcode_name(op));
  return s;
}

}  // namespace pypto::testing
