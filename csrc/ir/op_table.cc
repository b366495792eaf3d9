#include "ir/op_table.h"

#include <fmt/format.h>

#include <map>

#include "ir/errors.h"

namespace pypto {

const std::vector<OpcodeInfo>& opcode_table() {
  static const std::vector<OpcodeInfo> table = {
#define PTO_OPCODE(ENUM, mnemonic, form, functor, base, identity, doc) \
  {Opcode::ENUM, mnemonic, OpForm::form, functor, Opcode::base, Identity::identity, doc},
#include "ir/ops.def"
  };
  return table;
}

const OpcodeInfo& opcode_info(Opcode op) {
  const auto& t = opcode_table();
  const auto i = static_cast<size_t>(op);
  if (i >= t.size()) throw InternalError(fmt::format("unknown Opcode {}", i));
  return t[i];
}

const char* opcode_name(Opcode op) { return opcode_info(op).name; }

std::optional<Opcode> opcode_by_name(const std::string& name) {
  static const std::map<std::string, Opcode> by_name = [] {
    std::map<std::string, Opcode> m;
    for (const OpcodeInfo& r : opcode_table()) m.emplace(r.name, r.op);
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

int opcode_num_srcs(Opcode op) {
  switch (opcode_info(op).form) {
    case OpForm::Load: case OpForm::Fill: case OpForm::Arange: case OpForm::Random: return 0;
    case OpForm::Store: case OpForm::Unary: case OpForm::Cast: case OpForm::RowReduce: case OpForm::ColReduce:
    case OpForm::AxisReduce: case OpForm::Sort: case OpForm::Expand: case OpForm::Reshape: case OpForm::Gather: return 1;
    case OpForm::Binary: case OpForm::RowExpand: case OpForm::ColExpand: case OpForm::Scatter:
    case OpForm::Matmul: case OpForm::Scan: return 2;
    case OpForm::Select: case OpForm::MatmulAcc: return 3;
  }
  throw InternalError("unknown OpForm");
}

std::string opcode_functor(Opcode op) {
  const OpcodeInfo& r = opcode_info(op);
  if (!*r.functor) throw InternalError(fmt::format("no functor for {}", r.name));
  return std::string("pto::") + r.functor;
}

bool has_fast_form(Opcode op) { return op == Opcode::TSIN || op == Opcode::TCOS || op == Opcode::TTAN; }

std::optional<Opcode> opcode_variant(Opcode base, OpForm form) {
  for (const OpcodeInfo& r : opcode_table())
    if (r.form == form && r.base == base) return r.op;
  return std::nullopt;
}

bool is_reduction(Opcode op) {
  OpForm f = opcode_info(op).form;
  return f == OpForm::RowReduce || f == OpForm::ColReduce || f == OpForm::AxisReduce;
}

bool is_row_expand(Opcode op) { return opcode_info(op).form == OpForm::RowExpand; }
bool is_col_expand(Opcode op) { return opcode_info(op).form == OpForm::ColExpand; }

const char* form_name(OpForm f) {
  switch (f) {
    case OpForm::Load: return "load";
    case OpForm::Store: return "store";
    case OpForm::Fill: return "fill";
    case OpForm::Arange: return "arange";
    case OpForm::Random: return "random";
    case OpForm::Unary: return "unary";
    case OpForm::Binary: return "binary";
    case OpForm::Select: return "select";
    case OpForm::Cast: return "cast";
    case OpForm::RowReduce: return "row reduce";
    case OpForm::ColReduce: return "column reduce";
    case OpForm::AxisReduce: return "axis reduce";
    case OpForm::RowExpand: return "row expand";
    case OpForm::ColExpand: return "column expand";
    case OpForm::Expand: return "expand";
    case OpForm::Reshape: return "reshape";
    case OpForm::Gather: return "gather";
    case OpForm::Scatter: return "scatter";
    case OpForm::Matmul: return "matmul";
    case OpForm::MatmulAcc: return "matmul accumulate";
    case OpForm::Scan: return "scan";
    case OpForm::Sort: return "sort";
  }
  return "?";
}

const char* identity_name(Identity i) {
  switch (i) {
    case Identity::None: return "";
    case Identity::Zero: return "0";
    case Identity::One: return "1";
    case Identity::Lowest: return "lowest";
    case Identity::Highest: return "highest";
  }
  return "?";
}

const std::vector<OpInfo>& op_table() {
#define OPC(x) std::optional<Opcode>(Opcode::x)
#define NO_OPC std::optional<Opcode>()
  static const std::vector<OpInfo> table = {
#define TENSOR_OP(Kind, name, cls, result, opcode, emits, method, signature, doc) \
  {TensorOpKind::Kind, name, OpClass::cls, ResultType::result, opcode, emits, method != 0, signature, doc},
#include "ir/ops.def"
  };
#undef OPC
#undef NO_OPC
  return table;
}

const std::vector<CompositeInfo>& composite_table() {
  static const std::vector<CompositeInfo> table = {
#define COMPOSITE(name, expands, method, signature, doc) {name, expands, method != 0, signature, doc},
#include "ir/ops.def"
  };
  return table;
}

const OpInfo& op_info(TensorOpKind kind) {
  const auto& t = op_table();
  const auto i = static_cast<size_t>(kind);
  if (i >= t.size()) throw InternalError(fmt::format("unknown TensorOpKind {}", i));
  return t[i];
}

TensorOpKind op_kind_from_name(const std::string& name) {
  for (const OpInfo& info : op_table())
    if (name == info.name) return info.kind;
  throw UserError(fmt::format("unknown op '{}'", name));
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::Unary: return "unary";
    case OpClass::Binary: return "binary";
    case OpClass::Where: return "where";
    case OpClass::Cast: return "cast";
    case OpClass::Reduce: return "reduce";
    case OpClass::Scan: return "scan";
    case OpClass::Sort: return "sort";
    case OpClass::View: return "view";
    case OpClass::Assemble: return "assemble";
    case OpClass::Create: return "create";
    case OpClass::Matmul: return "matmul";
    case OpClass::Gather: return "gather";
    case OpClass::Scatter: return "scatter";
    case OpClass::Attention: return "attention";
    case OpClass::Conv: return "conv";
  }
  return "?";
}

const char* result_type_name(ResultType r) {
  switch (r) {
    case ResultType::Same: return "same";
    case ResultType::Float: return "float";
    case ResultType::Bool: return "bool";
    case ResultType::Wide: return "wide";
    case ResultType::Integer: return "integer";
    case ResultType::Index: return "index";
  }
  return "?";
}

}  // namespace pypto

namespace pypto {

ScatterReduce scatter_reduce_by_name(const std::string& name) {
  if (name.empty() || name == "none") return ScatterReduce::None;
  if (name == "add") return ScatterReduce::Add;
  if (name == "multiply") return ScatterReduce::Multiply;
  throw UserError(fmt::format("pypto.scatter: reduce must be None, 'add' or 'multiply', found '{}'", name));
}

const char* scatter_reduce_name(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::Add: return "add";
    case ScatterReduce::Multiply: return "mul";
    case ScatterReduce::None: break;
  }
  return "";
}

}  // namespace pypto
