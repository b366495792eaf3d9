#include "ir/tensor_graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/errors.h"
#include "ir/verifier.h"

namespace pypto {

std::string SourceLoc::str() const {
  if (file.empty()) return "";
  return fmt::format("{}:{}", file, line);
}

namespace {
using K = TensorOpKind;
using C = OpClass;
using R = ResultType;
const OpInfo kOps[] = {
    {K::Neg, "neg", C::Unary, R::Same},         {K::Abs, "abs", C::Unary, R::Same},
    {K::Exp, "exp", C::Unary, R::Float},        {K::Log, "log", C::Unary, R::Float},
    {K::Sqrt, "sqrt", C::Unary, R::Float},      {K::Rsqrt, "rsqrt", C::Unary, R::Float},
    {K::Reciprocal, "reciprocal", C::Unary, R::Float}, {K::Relu, "relu", C::Unary, R::Same},
    {K::Sigmoid, "sigmoid", C::Unary, R::Float}, {K::Tanh, "tanh", C::Unary, R::Float},
    {K::Silu, "silu", C::Unary, R::Float},      {K::Gelu, "gelu", C::Unary, R::Float},
    {K::Erf, "erf", C::Unary, R::Float},        {K::Erfc, "erfc", C::Unary, R::Float},
    {K::Floor, "floor", C::Unary, R::Same},     {K::Ceil, "ceil", C::Unary, R::Same},
    {K::Round, "round", C::Unary, R::Same},     {K::Trunc, "trunc", C::Unary, R::Same},
    {K::Exp2, "exp2", C::Unary, R::Float},      {K::Expm1, "expm1", C::Unary, R::Float},
    {K::LogicalNot, "logical_not", C::Unary, R::Bool},
    {K::Add, "add", C::Binary, R::Same},        {K::Sub, "sub", C::Binary, R::Same},
    {K::Mul, "mul", C::Binary, R::Same},        {K::Div, "div", C::Binary, R::Float},
    {K::Max, "maximum", C::Binary, R::Same},    {K::Min, "minimum", C::Binary, R::Same},
    {K::Pow, "pow", C::Binary, R::Same},        {K::Gt, "gt", C::Binary, R::Bool},
    {K::Ge, "ge", C::Binary, R::Bool},          {K::Lt, "lt", C::Binary, R::Bool},
    {K::Le, "le", C::Binary, R::Bool},          {K::Eq, "eq", C::Binary, R::Bool},
    {K::Ne, "ne", C::Binary, R::Bool},          {K::Where, "where", C::Where, R::Same},
    {K::Cast, "cast", C::Cast, R::Same},        {K::Sum, "sum", C::Reduce, R::Wide},
    {K::Amax, "amax", C::Reduce, R::Same},      {K::Amin, "amin", C::Reduce, R::Same},
    {K::Prod, "prod", C::Reduce, R::Wide},
};

DataType apply_result(ResultType r, DataType t) {
  switch (r) {
    case ResultType::Same: return t;
    case ResultType::Float: return dtype_is_float(t) ? t : DataType::FP32;
    case ResultType::Bool: return DataType::BOOL;
    case ResultType::Wide: return dtype_is_float(t) ? t : DataType::INT64;
  }
  return t;
}

/// Prefix for messages: "pypto.add at file.py:12: ".
std::string where(const char* op, const SourceLoc& loc) {
  std::string s = fmt::format("pypto.{}", op);
  if (!loc.file.empty()) s += fmt::format(" at {}", loc.str());
  return s + ": ";
}
}  // namespace

const OpInfo& op_info(TensorOpKind kind) {
  for (const auto& info : kOps)
    if (info.kind == kind) return info;
  throw InternalError("unknown TensorOpKind");
}

TensorOpKind op_kind_from_name(const std::string& name) {
  for (const auto& info : kOps)
    if (name == info.name) return info.kind;
  throw UserError(fmt::format("unknown op '{}'", name));
}

std::string shape_str(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const TensorValue& TensorGraph::value(int id) const {
  if (id < 0 || id >= static_cast<int>(values.size()))
    throw InternalError(fmt::format("value id {} out of range", id));
  return values[id];
}

TensorGraphBuilder::TensorGraphBuilder(std::string name) { g_.name = std::move(name); }

int TensorGraphBuilder::new_value(const std::vector<Expr>& shape, DataType dtype) {
  TensorValue v;
  v.id = static_cast<int>(g_.values.size());
  v.name = fmt::format("v{}", v.id);
  v.shape = shape;
  v.dtype = dtype;
  g_.values.push_back(v);
  return v.id;
}

const TensorValue& TensorGraphBuilder::value(int id) const { return g_.value(id); }

void TensorGraphBuilder::check_value(int id, const char* op, const SourceLoc& loc) const {
  if (id < 0 || id >= static_cast<int>(g_.values.size()))
    throw UserError(where(op, loc) + fmt::format("operand is not a tensor of this function (id {})", id));
}

void TensorGraphBuilder::check_tile(const char* op, const std::vector<int64_t>& tile, size_t rank,
                                    const SourceLoc& loc) const {
  if (tile.empty())
    throw UserError(where(op, loc) +
                    "no vec tile shape is set; call pypto.set_vec_tile_shapes(...) before this op");
  if (tile.size() != rank)
    throw UserError(where(op, loc) + fmt::format("vec tile shape {} has rank {}, expected rank {} of the operand",
                                                 ints_str(tile), tile.size(), rank));
  for (int64_t t : tile)
    if (t <= 0) throw UserError(where(op, loc) + fmt::format("vec tile shape {} must be positive", ints_str(tile)));
}

int TensorGraphBuilder::add_param(const std::string& name, const std::vector<Expr>& shape, DataType dtype) {
  if (shape.empty() || shape.size() > 6)
    throw NotSupportedError(fmt::format("parameter '{}': rank {} is not supported yet (1 to 6)", name, shape.size()));
  for (const auto& d : shape)
    if (d.is_const() && d.value() <= 0)
      throw UserError(fmt::format("parameter '{}': dims must be positive, found shape {}", name, shape_str(shape)));
  int id = new_value(shape, dtype);
  g_.values[id].name = name;
  g_.params.push_back(id);
  return id;
}

int TensorGraphBuilder::add_binary(TensorOpKind kind, int a, int b, const std::vector<int64_t>& tile,
                                   const SourceLoc& loc) {
  return add_elementwise(kind, {Operand::tensor(a), Operand::tensor(b)}, tile, loc);
}

int TensorGraphBuilder::add_elementwise(TensorOpKind kind, const std::vector<Operand>& operands,
                                        const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  size_t arity = info.cls == OpClass::Where ? 3 : info.cls == OpClass::Binary ? 2 : 1;
  if (operands.size() != arity || info.cls == OpClass::Reduce || info.cls == OpClass::Cast)
    throw InternalError(fmt::format("add_elementwise: {} takes {} operands", info.name, arity));
  // Broadcasting as in torch: align from the right, size-1 dims stretch.
  std::vector<Expr> out;
  const TensorValue* first = nullptr;
  std::vector<int> inputs;
  for (const Operand& o : operands) {
    if (!o.is_tensor()) continue;
    check_value(o.value, info.name, loc);
    const TensorValue& v = g_.values[o.value];
    inputs.push_back(o.value);
    if (!first) {
      first = &v;
      out = v.shape;
      continue;
    }
    size_t rank = std::max(out.size(), v.shape.size());
    std::vector<Expr> merged(rank);
    for (size_t i = 0; i < rank; ++i) {
      size_t ia = i + out.size(), ib = i + v.shape.size();
      Expr da = ia >= rank ? out[ia - rank] : Expr(1);
      Expr db = ib >= rank ? v.shape[ib - rank] : Expr(1);
      auto ca = da.as_const(), cb = db.as_const();
      if (ca && *ca == 1) {
        merged[i] = db;
      } else if ((cb && *cb == 1) || da.equals(db)) {
        merged[i] = da;
      } else {
        std::string shapes;
        for (const Operand& x : operands)
          if (x.is_tensor()) shapes += (shapes.empty() ? "" : " and ") + shape_str(g_.values[x.value].shape);
        throw UserError(where(info.name, loc) + fmt::format("shapes {} do not broadcast: dim {} is {} versus {}",
                                                            shapes, i, da.str(), db.str()));
      }
    }
    out = merged;
  }
  if (!first) throw UserError(where(info.name, loc) + "at least one operand must be a tensor");
  // Type promotion: tensors first, then constants of a higher category.
  std::optional<DataType> dt;
  size_t first_data = info.cls == OpClass::Where ? 1 : 0;  // where's condition does not take part
  for (size_t i = first_data; i < operands.size(); ++i)
    if (operands[i].is_tensor()) {
      DataType t = g_.values[operands[i].value].dtype;
      dt = dt ? promote_types(*dt, t) : t;
    }
  for (size_t i = first_data; i < operands.size(); ++i)
    if (!operands[i].is_tensor()) {
      if (!dt) dt = operands[i].is_float ? DataType::FP32 : operands[i].is_bool ? DataType::BOOL : DataType::INT64;
      else dt = promote_with_scalar(*dt, operands[i].is_float, operands[i].is_bool);
    }
  if (info.cls == OpClass::Where && operands[0].is_tensor() && g_.values[operands[0].value].dtype != DataType::BOOL)
    throw TypeError(where(info.name, loc) + fmt::format("condition must be DT_BOOL, found {}",
                                                        dtype_name(g_.values[operands[0].value].dtype)));
  if (info.cls == OpClass::Where && !operands[0].is_tensor())
    throw UserError(where(info.name, loc) + "condition must be a tensor");
  DataType operand_type = *dt;
  DataType result = apply_result(info.result, operand_type);
  // Division and float functions compute in the float result type.
  DataType compute = compute_dtype(info.result == ResultType::Bool ? operand_type : result);
  check_tile(info.name, tile, out.size(), loc);
  int id = new_value(out, result);
  TensorOp op{kind, inputs, id, -1, false, tile, loc};
  op.operands = operands;
  op.compute = compute;
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_unary(TensorOpKind kind, int x, const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Unary) throw InternalError("add_unary with a non-unary op");
  check_value(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  if (kind == TensorOpKind::LogicalNot && vx.dtype != DataType::BOOL)
    throw TypeError(where(info.name, loc) + fmt::format("expects a DT_BOOL tensor, found {}", dtype_name(vx.dtype)));
  check_tile(info.name, tile, vx.shape.size(), loc);
  DataType result = apply_result(info.result, vx.dtype);
  int id = new_value(vx.shape, result);
  TensorOp op{kind, {x}, id, -1, false, tile, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(result);
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_cast(int x, DataType dtype, const std::vector<int64_t>& tile, const SourceLoc& loc) {
  check_value(x, "cast", loc);
  const TensorValue& vx = g_.values[x];
  check_tile("cast", tile, vx.shape.size(), loc);
  int id = new_value(vx.shape, dtype);
  TensorOp op{TensorOpKind::Cast, {x}, id, -1, false, tile, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(dtype);
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_reduce(TensorOpKind kind, int x, int dim, bool keepdim, const std::vector<int64_t>& tile,
                                   const SourceLoc& loc) {
  return add_reduce(kind, x, std::vector<int>{dim}, keepdim, tile, loc);
}

int TensorGraphBuilder::add_reduce(TensorOpKind kind, int x, const std::vector<int>& dims_in, bool keepdim,
                                   const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Reduce) throw InternalError("add_reduce with a non-reduction");
  check_value(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  int rank = static_cast<int>(vx.shape.size());
  if (dims_in.empty()) throw UserError(where(info.name, loc) + "no dim to reduce");
  std::vector<int> dims;
  for (int dim : dims_in) {
    if (dim < -rank || dim >= rank)
      throw UserError(where(info.name, loc) +
                      fmt::format("dim {} is out of range for a tensor of rank {} (expected {} to {})", dim, rank, -rank,
                                  rank - 1));
    if (dim < 0) dim += rank;
    if (std::find(dims.begin(), dims.end(), dim) != dims.end())
      throw UserError(where(info.name, loc) + fmt::format("dim {} is given twice", dim));
    dims.push_back(dim);
  }
  std::sort(dims.begin(), dims.end());
  check_tile(info.name, tile, vx.shape.size(), loc);
  std::vector<Expr> out;
  for (int i = 0; i < rank; ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) out.push_back(vx.shape[i]);
    else if (keepdim) out.push_back(Expr(1));
  }
  if (out.empty())
    throw NotSupportedError(where(info.name, loc) + "reducing every dim to a 0-d tensor is not supported yet; use keepdim=True");
  DataType result = apply_result(info.result, vx.dtype);
  if (vx.dtype == DataType::BOOL && (kind == TensorOpKind::Amax || kind == TensorOpKind::Amin)) result = DataType::BOOL;
  int id = new_value(out, result);
  TensorOp op{kind, {x}, id, dims.front(), keepdim, tile, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(result);
  op.dims = dims;
  g_.ops.push_back(op);
  return id;
}

void TensorGraphBuilder::add_dyn_dim(const std::string& name) {
  if (std::find(g_.dyn_dims.begin(), g_.dyn_dims.end(), name) == g_.dyn_dims.end()) g_.dyn_dims.push_back(name);
}

void TensorGraphBuilder::set_outputs(const std::vector<int>& ids) {
  for (int id : ids)
    if (id < 0 || id >= static_cast<int>(g_.values.size()))
      throw UserError(fmt::format("returned value is not a tensor of this function (id {})", id));
  g_.outputs = ids;
  // Returned values are named after their position, as the orchestration's output parameters.
  for (size_t i = 0; i < ids.size(); ++i) {
    TensorValue& v = g_.values[ids[i]];
    bool is_param = std::find(g_.params.begin(), g_.params.end(), v.id) != g_.params.end();
    if (!is_param) v.name = ids.size() == 1 ? "out" : fmt::format("out{}", i);
  }
}

TensorGraph TensorGraphBuilder::finish() const {
  if (g_.outputs.empty()) throw UserError(fmt::format("function '{}' returns no tensor", g_.name));
  verify(g_);
  return g_;
}

}  // namespace pypto
