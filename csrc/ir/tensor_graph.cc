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
const OpInfo kOps[] = {
    {TensorOpKind::Add, "add", OpClass::Binary},   {TensorOpKind::Sub, "sub", OpClass::Binary},
    {TensorOpKind::Mul, "mul", OpClass::Binary},   {TensorOpKind::Div, "div", OpClass::Binary},
    {TensorOpKind::Max, "maximum", OpClass::Binary}, {TensorOpKind::Exp, "exp", OpClass::Unary},
    {TensorOpKind::Amax, "amax", OpClass::Reduce}, {TensorOpKind::Sum, "sum", OpClass::Reduce},
};

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
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Binary) throw InternalError("add_binary with a non-binary op");
  check_value(a, info.name, loc);
  check_value(b, info.name, loc);
  const TensorValue& va = g_.values[a];
  const TensorValue& vb = g_.values[b];
  if (va.dtype != vb.dtype)
    throw TypeError(where(info.name, loc) + fmt::format("operands have dtypes {} and {}; mixed dtypes are not supported yet",
                                                        dtype_name(va.dtype), dtype_name(vb.dtype)));
  // Broadcasting as in torch: align from the right, size-1 dims stretch.
  size_t rank = std::max(va.shape.size(), vb.shape.size());
  std::vector<Expr> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    size_t ia = i + va.shape.size(), ib = i + vb.shape.size();
    Expr da = ia >= rank ? va.shape[ia - rank] : Expr(1);
    Expr db = ib >= rank ? vb.shape[ib - rank] : Expr(1);
    auto ca = da.as_const(), cb = db.as_const();
    if (ca && *ca == 1) {
      out[i] = db;
    } else if ((cb && *cb == 1) || da.equals(db)) {
      out[i] = da;
    } else {
      throw UserError(where(info.name, loc) +
                      fmt::format("shapes {} and {} do not broadcast: dim {} is {} versus {}", shape_str(va.shape),
                                  shape_str(vb.shape), i, da.str(), db.str()));
    }
  }
  check_tile(info.name, tile, rank, loc);
  int id = new_value(out, va.dtype);
  g_.ops.push_back(TensorOp{kind, {a, b}, id, -1, false, tile, loc});
  return id;
}

int TensorGraphBuilder::add_unary(TensorOpKind kind, int x, const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Unary) throw InternalError("add_unary with a non-unary op");
  check_value(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  check_tile(info.name, tile, vx.shape.size(), loc);
  int id = new_value(vx.shape, vx.dtype);
  g_.ops.push_back(TensorOp{kind, {x}, id, -1, false, tile, loc});
  return id;
}

int TensorGraphBuilder::add_reduce(TensorOpKind kind, int x, int dim, bool keepdim, const std::vector<int64_t>& tile,
                                   const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Reduce) throw InternalError("add_reduce with a non-reduction");
  check_value(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  int rank = static_cast<int>(vx.shape.size());
  if (dim < -rank || dim >= rank)
    throw UserError(where(info.name, loc) +
                    fmt::format("dim {} is out of range for a tensor of rank {} (expected {} to {})", dim, rank, -rank,
                                rank - 1));
  if (dim < 0) dim += rank;
  check_tile(info.name, tile, vx.shape.size(), loc);
  std::vector<Expr> out;
  for (int i = 0; i < rank; ++i) {
    if (i != dim) out.push_back(vx.shape[i]);
    else if (keepdim) out.push_back(Expr(1));
  }
  if (out.empty())
    throw NotSupportedError(where(info.name, loc) + "reducing a 1-D tensor to a scalar is not supported yet; use keepdim=True");
  int id = new_value(out, vx.dtype);
  g_.ops.push_back(TensorOp{kind, {x}, id, dim, keepdim, tile, loc});
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
