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
DataType apply_result(ResultType r, DataType t) {
  switch (r) {
    case ResultType::Same: return t;
    case ResultType::Float: return dtype_is_float(t) ? t : DataType::FP32;
    case ResultType::Bool: return DataType::BOOL;
    case ResultType::Wide: return dtype_is_float(t) ? t : DataType::INT64;
    case ResultType::Integer: return t;
    case ResultType::Index: return DataType::INT32;
  }
  return t;
}

/// Prefix for messages: "pypto.add at file.py:12: ".
std::string where(const char* op, const SourceLoc& loc) {
  std::string s = fmt::format("pypto.{}", op);
  if (!loc.file.empty()) s += fmt::format(" at {}", loc.str());
  return s + ": ";
}

/// Integer-only ops (bitwise and shifts) reject floating-point operands, naming the op and the line.
void check_integer_operand(const OpInfo& info, const SourceLoc& loc, DataType t) {
  if (info.result == ResultType::Integer && dtype_is_float(t))
    throw TypeError(where(info.name, loc) +
                    fmt::format("expects integer or DT_BOOL operands, found {}", dtype_name(t)));
}

/// promote_types, its error prefixed with the op and the user's line.
DataType promote_at(const char* op, const SourceLoc& loc, DataType a, DataType b) {
  try {
    return promote_types(a, b);
  } catch (const TypeError& e) {
    throw TypeError(where(op, loc) + e.what());
  }
}
}  // namespace

bool has_tail(const TensorValue& v) {
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (!v.valid[d].equals(v.shape[d])) return true;
  return false;
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
  check_storage_dtype(dtype, "a tensor");
  TensorValue v;
  v.id = static_cast<int>(g_.values.size());
  v.name = fmt::format("v{}", v.id);
  v.shape = shape;
  v.valid = shape;
  v.dtype = dtype;
  g_.values.push_back(v);
  return v.id;
}

const TensorValue& TensorGraphBuilder::value(int id) const { return g_.value(id); }

void TensorGraphBuilder::check_value(int id, const char* op, const SourceLoc& loc) const {
  if (id < 0 || id >= static_cast<int>(g_.values.size()))
    throw UserError(where(op, loc) + fmt::format("operand is not a tensor of this function (id {})", id));
}

void TensorGraphBuilder::check_computed(int id, const char* op, const SourceLoc& loc) const {
  check_value(id, op, loc);
  DataType dt = g_.values[id].dtype;
  if (pair_dtype(dt))
    throw TypeError(where(op, loc) + fmt::format("a {} operand holds two 4-bit values per element and cannot be computed "
                                                 "on; read it as {} first (pypto.view(x, dtype={}) doubles the last dim)",
                                                 dtype_name(dt), dtype_name(pair_element(dt)),
                                                 dtype_name(pair_element(dt))));
}

std::vector<int64_t> TensorGraphBuilder::fit_tile(const char* op, const std::vector<int64_t>& tile, size_t rank,
                                                   const SourceLoc& loc) const {
  if (tile.empty())
    throw UserError(where(op, loc) +
                    "no vec tile shape is set; call pypto.set_vec_tile_shapes(...) before this op");
  if (tile.size() < rank)
    throw UserError(where(op, loc) +
                    fmt::format("vec tile shape {} has rank {}, expected rank {} of the operand (or a longer tile, whose "
                                "leading dims apply)",
                                ints_str(tile), tile.size(), rank));
  for (int64_t t : tile)
    if (t <= 0) throw UserError(where(op, loc) + fmt::format("vec tile shape {} must be positive", ints_str(tile)));
  // As PyPTO: dim i of the operand is tiled by entry i of a longer tile (a reduction's lower-rank result, a 1-D
  // op under a 2-D tile); the entries past the operand's rank are not used.
  return std::vector<int64_t>(tile.begin(), tile.begin() + static_cast<std::ptrdiff_t>(rank));
}

std::vector<int64_t> TensorGraphBuilder::fit_move_tile(const std::vector<int64_t>& tile,
                                                       const std::vector<Expr>& shape) const {
  bool usable = tile.size() >= shape.size();
  for (int64_t t : tile) usable = usable && t > 0;
  if (usable) return std::vector<int64_t>(tile.begin(), tile.begin() + static_cast<std::ptrdiff_t>(shape.size()));
  // A copy needs no vec tile shape in PyPTO: without a usable one, copy blocks of up to 8192 elements, filled from
  // the last dim (a dynamic dim takes 256 when it is the last, 1 otherwise).
  std::vector<int64_t> out(shape.size(), 1);
  int64_t budget = 8192;
  for (size_t k = shape.size(); k-- > 0 && budget > 1;) {
    std::optional<int64_t> c = shape[k].as_const();
    int64_t size = c ? std::min(*c, budget) : (k + 1 == shape.size() ? std::min<int64_t>(256, budget) : 1);
    out[k] = std::max<int64_t>(size, 1);
    budget /= out[k];
    if (!c) break;
  }
  return out;
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
    check_computed(o.value, info.name, loc);
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
        if ((ca && cb) || !checkable_per_call(da) || !checkable_per_call(db))
          throw UserError(where(info.name, loc) + fmt::format("shapes {} do not broadcast: dim {} is {} versus {}",
                                                              shapes, i, da.str(), db.str()));
        // A dynamic dim against another size: they must be equal, which each call checks.
        merged[i] = cb ? db : da;  // the static size, else the first operand's dim
        dim_checks_.push_back({da, db, where(info.name, loc) + fmt::format("shapes {} must agree in dim {} ({} versus {})",
                                                                           shapes, i, da.str(), db.str())});
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
      dt = dt ? promote_at(info.name, loc, *dt, t) : t;
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
  check_integer_operand(info, loc, operand_type);
  DataType result = apply_result(info.result, operand_type);
  // Division and float functions compute in the float result type.
  DataType compute = compute_dtype(info.result == ResultType::Bool ? operand_type : result);
  const std::vector<int64_t> fitted = fit_tile(info.name, tile, out.size(), loc);
  // Valid extents: per dim, those of an operand that is not broadcast there.
  std::vector<Expr> valid = out;
  for (const Operand& o : operands) {
    if (!o.is_tensor()) continue;
    const TensorValue& v = g_.values[o.value];
    size_t lead = out.size() - v.shape.size();
    for (size_t k = 0; k < v.shape.size(); ++k) {
      auto c = v.shape[k].as_const();
      bool bcast = c && *c == 1 && !(out[k + lead].as_const() && *out[k + lead].as_const() == 1);
      if (!bcast && !v.valid[k].equals(v.shape[k])) valid[k + lead] = v.valid[k];
    }
  }
  int id = new_value(out, result);
  g_.values[id].valid = valid;
  TensorOp op{kind, inputs, id, -1, false, fitted, loc};
  op.operands = operands;
  op.compute = compute;
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_unary(TensorOpKind kind, int x, const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Unary) throw InternalError("add_unary with a non-unary op");
  check_computed(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  // bitwise_not of DT_BOOL is logical not (bools compute as 0/1 integers, whose complement is not).
  if (kind == TensorOpKind::BitwiseNot && vx.dtype == DataType::BOOL)
    return add_unary(TensorOpKind::LogicalNot, x, tile, loc);
  if (kind == TensorOpKind::LogicalNot && vx.dtype != DataType::BOOL)
    throw TypeError(where(info.name, loc) + fmt::format("expects a DT_BOOL tensor, found {}", dtype_name(vx.dtype)));
  check_integer_operand(info, loc, vx.dtype);
  const std::vector<int64_t> fitted = fit_tile(info.name, tile, vx.shape.size(), loc);
  DataType result = apply_result(info.result, vx.dtype);
  std::vector<Expr> valid = vx.valid;  // new_value may move the values vector
  int id = new_value(vx.shape, result);
  g_.values[id].valid = valid;
  TensorOp op{kind, {x}, id, -1, false, fitted, loc};
  op.operands = {Operand::tensor(x)};
  // A test (DT_BOOL result, e.g. signbit) computes on the operand's values; the rest on the result's.
  op.compute = compute_dtype(info.result == ResultType::Bool ? g_.values[x].dtype : result);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_cast(int x, DataType dtype, const std::vector<int64_t>& tile, const SourceLoc& loc) {
  check_computed(x, "cast", loc);
  if (pair_dtype(dtype))
    throw TypeError(where("cast", loc) + fmt::format("cannot cast to {}, which holds two 4-bit values per element; cast "
                                                     "to {} and read that as {} (pypto.view(x, dtype=...))",
                                                     dtype_name(dtype), dtype_name(pair_element(dtype)),
                                                     dtype_name(dtype)));
  const TensorValue& vx = g_.values[x];
  const std::vector<int64_t> fitted = fit_tile("cast", tile, vx.shape.size(), loc);
  std::vector<Expr> valid = vx.valid;  // new_value may move the values vector
  int id = new_value(vx.shape, dtype);
  g_.values[id].valid = valid;
  TensorOp op{TensorOpKind::Cast, {x}, id, -1, false, fitted, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(dtype);
  op.region = open_.empty() ? -1 : open_.back();
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
  check_computed(x, info.name, loc);
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
  const std::vector<int64_t> fitted = fit_tile(info.name, tile, vx.shape.size(), loc);
  std::vector<Expr> out, valid;
  for (int i = 0; i < rank; ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) {
      out.push_back(vx.shape[i]);
      valid.push_back(vx.valid[i]);
    } else if (keepdim) {
      out.push_back(Expr(1));
      valid.push_back(Expr(1));
    }
  }
  if (out.empty())
    throw NotSupportedError(where(info.name, loc) + "reducing every dim to a 0-d tensor is not supported yet; use keepdim=True");
  DataType result = apply_result(info.result, vx.dtype);
  if (vx.dtype == DataType::BOOL && (kind == TensorOpKind::Amax || kind == TensorOpKind::Amin)) result = DataType::BOOL;
  int id = new_value(out, result);
  g_.values[id].valid = valid;
  TensorOp op{kind, {x}, id, dims.front(), keepdim, fitted, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(result);
  op.dims = dims;
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_scan(TensorOpKind kind, int x, int dim, const std::vector<int64_t>& tile,
                                 const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Scan) throw InternalError("add_scan with a non-scan op");
  check_computed(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  const int rank = static_cast<int>(vx.shape.size());
  if (dim < -rank || dim >= rank)
    throw UserError(where(info.name, loc) + fmt::format("dim {} is out of range for a tensor of rank {} (expected {} to {})",
                                                        dim, rank, -rank, rank - 1));
  if (dim < 0) dim += rank;
  const std::vector<int64_t> fitted = fit_tile(info.name, tile, vx.shape.size(), loc);
  const DataType result = apply_result(info.result, vx.dtype);
  const std::vector<Expr> shape = vx.shape, valid = vx.valid;
  int id = new_value(shape, result);
  g_.values[id].valid = valid;
  TensorOp op{kind, {x}, id, dim, false, fitted, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(result);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_sort(TensorOpKind kind, int x, int64_t k, bool descending,
                                 const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const OpInfo& info = op_info(kind);
  if (info.cls != OpClass::Sort) throw InternalError("add_sort with a non-sort op");
  check_computed(x, info.name, loc);
  const TensorValue& vx = g_.values[x];
  if (vx.shape.empty()) throw UserError(where(info.name, loc) + "needs a tensor of at least one dim");
  const auto n = vx.shape.back().as_const();
  if (!n || !vx.valid.back().equals(vx.shape.back()))
    throw NotSupportedError(where(info.name, loc) + fmt::format("sorting a dynamic or partly valid dim ({}) is not "
                                                                "supported yet",
                                                                vx.valid.back().str()));
  if (k < 1 || k > *n)
    throw UserError(where(info.name, loc) + fmt::format("k = {} is out of range for a dim of size {} (expected 1 to {})",
                                                        k, *n, *n));
  if (vx.dtype == DataType::BOOL || !(dtype_is_float(vx.dtype) || dtype_is_int(vx.dtype)))
    throw TypeError(where(info.name, loc) + fmt::format("expects a float or integer tensor, found {}",
                                                            dtype_name(vx.dtype)));
  const std::vector<int64_t> fitted = fit_tile(info.name, tile, vx.shape.size(), loc);
  std::vector<Expr> shape = vx.shape, valid = vx.valid;
  shape.back() = Expr(k);
  valid.back() = Expr(k);
  int id = new_value(shape, apply_result(info.result, vx.dtype));
  g_.values[id].valid = valid;
  TensorOp op{kind, {x}, id, static_cast<int>(shape.size()) - 1, false, fitted, loc};
  op.operands = {Operand::tensor(x)};
  op.compute = compute_dtype(g_.values[x].dtype);
  op.descending = descending;
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_view(int base, const std::vector<Expr>& shape, const std::vector<Expr>& offsets,
                                 const std::vector<int>& map, const std::vector<int64_t>& steps,
                                 const std::vector<Expr>& valid, const SourceLoc& loc) {
  check_value(base, "view", loc);
  const TensorValue& b = g_.values[base];
  if (offsets.size() != b.shape.size())
    throw UserError(where("view", loc) + fmt::format("{} offsets given for a tensor of rank {}", offsets.size(), b.shape.size()));
  if (map.size() != shape.size() || steps.size() != shape.size() || (!valid.empty() && valid.size() != shape.size()))
    throw InternalError("add_view: map, steps and valid must have one entry per view dim");
  if (shape.empty() || shape.size() > 6)
    throw NotSupportedError(where("view", loc) + fmt::format("a view of rank {} is not supported yet (1 to 6)", shape.size()));
  for (size_t v = 0; v < shape.size(); ++v) {
    if (map[v] >= static_cast<int>(b.shape.size())) throw InternalError("add_view: map names a missing base dim");
    if (map[v] < 0 || steps[v] == 0) continue;
    // Static bounds check: the view's valid part must stay inside its base.
    const Expr& ext = valid.empty() ? shape[v] : valid[v];
    Expr last = offsets[map[v]] + (ext - Expr(1)) * Expr(steps[v]);
    auto c = last.as_const(), n = b.shape[map[v]].as_const(), o = offsets[map[v]].as_const();
    if ((c && n && (*c >= *n || *c < 0)) || (o && n && (*o < 0 || *o >= *n)))
      throw UserError(where("view", loc) + fmt::format("the view reaches index {} of dim {} of a tensor of shape {}",
                                                       last.str(), map[v], shape_str(b.shape)));
  }
  DataType dt = b.dtype;  // new_value may move the values vector
  int id = new_value(shape, dt);
  TensorValue& v = g_.values[id];
  if (!valid.empty()) v.valid = valid;
  v.view = ViewMap{base, offsets, map, steps, false};
  TensorOp op{TensorOpKind::View, {base}, id, -1, false, {}, loc};
  op.operands = {Operand::tensor(base)};
  op.compute = compute_dtype(dt);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

namespace {

// True when two shapes hold the same number of elements as products of the same symbolic factors
// and constants ([n, 96] and [n, 3, 32]; [32, c * 64] and [32, c, 64]): each dim is flattened into
// the factors of its products, the constants multiply to one number, the other factors match as a
// multiset.
bool same_factors(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  auto split = [](const std::vector<Expr>& dims, int64_t& c, std::vector<std::string>& syms) {
    c = 1;
    std::vector<Expr> todo(dims);  // the factors' order does not matter: syms is sorted below
    while (!todo.empty()) {
      const Expr d = todo.back();
      todo.pop_back();
      if (auto v = d.as_const()) {
        c *= *v;
      } else if (d.kind() == Expr::Kind::Mul) {
        todo.push_back(d.lhs());
        todo.push_back(d.rhs());
      } else {
        syms.push_back(d.str());
      }
    }
    std::sort(syms.begin(), syms.end());
  };
  int64_t ca = 1, cb = 1;
  std::vector<std::string> sa, sb;
  split(a, ca, sa);
  split(b, cb, sb);
  return ca == cb && sa == sb;
}

}  // namespace

int TensorGraphBuilder::add_reshape(int base, const std::vector<Expr>& shape, const SourceLoc& loc) {
  check_value(base, "reshape", loc);
  const TensorValue& b = g_.values[base];
  Expr n_old(1), n_new(1);
  for (const Expr& d : b.shape) n_old = n_old * d;
  for (const Expr& d : shape) n_new = n_new * d;
  auto co = n_old.as_const(), cn = n_new.as_const();
  if ((co && cn && *co != *cn) || (!(co && cn) && !n_old.equals(n_new) && !same_factors(b.shape, shape)))
    throw UserError(where("reshape", loc) + fmt::format("cannot reshape {} ({} elements) to {} ({} elements)",
                                                        shape_str(b.shape), n_old.str(), shape_str(shape), n_new.str()));
  if (shape.empty() || shape.size() > 6)
    throw NotSupportedError(where("reshape", loc) + fmt::format("rank {} is not supported yet (1 to 6)", shape.size()));
  if (has_tail(b))
    throw NotSupportedError(where("reshape", loc) + "reshaping a tensor with a tail (valid shape) is not supported yet");
  return add_reshape_alias(base, shape, b.dtype, loc);
}

int TensorGraphBuilder::add_reshape_alias(int base, const std::vector<Expr>& shape, DataType dtype, const SourceLoc& loc) {
  int id = new_value(shape, dtype);  // may move the values vector
  g_.values[id].view = ViewMap{base, {}, {}, {}, true};
  TensorOp op{TensorOpKind::Reshape, {base}, id, -1, false, {}, loc};
  op.operands = {Operand::tensor(base)};
  op.compute = compute_dtype(dtype);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_bitcast(int base, DataType dtype, const SourceLoc& loc) {
  check_value(base, "view", loc);
  const TensorValue& b = g_.values[base];
  if (b.dtype == dtype) return base;
  const int from = dtype_size(b.dtype), to = dtype_size(dtype);
  const std::string what = fmt::format("reading {} data of shape {} as {}", dtype_name(b.dtype), shape_str(b.shape),
                                       dtype_name(dtype));
  if (b.shape.empty())
    throw UserError(where("view", loc) + what + ": a 0-d tensor has no last dim to rescale");
  if (has_tail(b))
    throw NotSupportedError(where("view", loc) + what + ": a tensor with a tail (valid shape) is not supported yet");
  std::vector<Expr> shape = b.shape;
  Expr& last = shape.back();
  if (from >= to) {
    last = last * Expr(from / to);
  } else {
    auto c = last.as_const();
    if (!c)
      throw NotSupportedError(where("view", loc) + what + fmt::format(": the last dim {} must be a constant multiple of {}",
                                                                      last.str(), to / from));
    if (*c % (to / from) != 0)
      throw UserError(where("view", loc) + what + fmt::format(": the last dim {} must be a multiple of {} (the ratio of "
                                                              "the element sizes)", *c, to / from));
    last = Expr(*c / (to / from));
  }
  return add_reshape_alias(base, shape, dtype, loc);
}

int TensorGraphBuilder::add_assemble(int src, int target, const std::vector<int64_t>& tile, const SourceLoc& loc,
                                     bool accumulate) {
  const char* name = accumulate ? "atomic_add" : "assemble";
  check_value(src, name, loc);
  check_value(target, name, loc);
  const TensorValue& s = g_.values[src];
  const TensorValue& t = g_.values[target];
  if (!t.view || t.view->reshape)
    throw InternalError("add_assemble: the target must be a strided view");
  if (s.shape.size() != t.shape.size())
    throw UserError(where(name, loc) + fmt::format("source of shape {} does not match the destination region {}",
                                                         shape_str(s.shape), shape_str(t.shape)));
  for (size_t d = 0; d < s.shape.size(); ++d) {
    auto a = s.shape[d].as_const(), b = t.shape[d].as_const();
    if (!(a && b) && !s.shape[d].equals(t.shape[d]) && checkable_per_call(s.shape[d]) && checkable_per_call(t.shape[d])) {
      // Sizes given by dynamic dims: each call checks that they agree.
      dim_checks_.push_back({s.shape[d], t.shape[d],
                             where(name, loc) + fmt::format("source of shape {} and destination region {} must agree "
                                                                  "in dim {} ({} versus {})", shape_str(s.shape),
                                                                  shape_str(t.shape), d, s.shape[d].str(), t.shape[d].str())});
      continue;
    }
    if ((a && b && *a != *b) || (!(a && b) && !s.shape[d].equals(t.shape[d])))
      throw UserError(where(name, loc) + fmt::format("source of shape {} does not match the destination region {}",
                                                           shape_str(s.shape), shape_str(t.shape)));
  }
  if (accumulate) {
    const DataType dt = t.dtype;
    const bool summable = dt == DataType::FP32 || dt == DataType::FP16 || dt == DataType::BF16 ||
                          dt == DataType::DOUBLE || (dtype_is_int(dt) && !packed_dtype(dt));
    if (!summable)
      throw TypeError(where(name, loc) + fmt::format("dst has dtype {}, expected a float (DT_FP32, DT_FP16, DT_BF16, "
                                                     "DT_DOUBLE) or integer dtype", dtype_name(dt)));
  }
  const std::vector<int64_t> fitted = fit_move_tile(tile, s.shape);
  TensorOp op{accumulate ? TensorOpKind::AtomicAdd : TensorOpKind::Assemble, {src, target}, target, -1, false, fitted, loc};
  op.operands = {Operand::tensor(src), Operand::tensor(target)};
  op.compute = compute_dtype(t.dtype);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return target;
}

int TensorGraphBuilder::add_full(const std::vector<Expr>& shape, const Operand& value, DataType dtype,
                                 const std::vector<Expr>& valid, const std::vector<int64_t>& tile,
                                 const SourceLoc& loc) {
  if (shape.empty() || shape.size() > 6)
    throw NotSupportedError(where("full", loc) + fmt::format("rank {} is not supported yet (1 to 6)", shape.size()));
  for (const Expr& d : shape)
    if (d.as_const() && *d.as_const() <= 0)
      throw UserError(where("full", loc) + fmt::format("shape {} must have positive dims", shape_str(shape)));
  const std::vector<int64_t> fitted = fit_tile("full", tile, shape.size(), loc);
  int id = new_value(shape, dtype);
  if (!valid.empty()) {
    if (valid.size() != shape.size())
      throw UserError(where("full", loc) + fmt::format("valid_shape {} does not match shape {}", shape_str(valid), shape_str(shape)));
    g_.values[id].valid = valid;
  }
  push_create(TensorOpKind::Full, id, fitted, loc).operands = {value};
  return id;
}

TensorOp& TensorGraphBuilder::push_create(TensorOpKind kind, int id, const std::vector<int64_t>& tile,
                                          const SourceLoc& loc) {
  TensorOp op{kind, {}, id, -1, false, tile, loc};
  op.compute = compute_dtype(g_.values[id].dtype);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return g_.ops.back();
}

void TensorGraphBuilder::mark_covered(int value) {
  for (TensorOp& op : g_.ops)
    if (op.output == value && op.kind == TensorOpKind::Full) op.covered = true;
}

int TensorGraphBuilder::add_arange(const Expr& n, double start, double step, DataType dtype,
                                   const std::vector<int64_t>& tile, const SourceLoc& loc) {
  const std::vector<int64_t> fitted = fit_tile("arange", tile, 1, loc);
  int id = new_value({n}, dtype);
  TensorOp& op = push_create(TensorOpKind::Arange, id, fitted, loc);
  op.start = start;
  op.step = step;
  return id;
}

int TensorGraphBuilder::add_random(const std::vector<Expr>& shape, const RandomParams& params, DataType dtype,
                                   const std::vector<int64_t>& tile, const std::string& label, const SourceLoc& loc,
                                   const Expr& block0) {
  if (params.rounds != 7 && params.rounds != 10)
    throw UserError(where(label.c_str(), loc) + fmt::format("rounds must be 7 or 10, found {}", params.rounds));
  if (dtype != DataType::FP32 && dtype != DataType::FP16 && dtype != DataType::BF16)
    throw TypeError(where(label.c_str(), loc) +
                    fmt::format("dtype must be DT_FP32, DT_FP16 or DT_BF16, found {}", dtype_name(dtype)));
  const std::vector<int64_t> fitted = fit_tile(label.c_str(), tile, shape.size(), loc);
  int id = new_value(shape, dtype);
  TensorOp& op = push_create(TensorOpKind::Random, id, fitted, loc);
  op.random = params;
  op.label = label;
  if (!(block0.is_const() && block0.value() == 0)) op.operands = {Operand::symbolic(block0)};
  return id;
}

int TensorGraphBuilder::add_matmul(int a, int b, DataType out_dtype, const std::vector<int64_t>& cube,
                                   const std::vector<int64_t>& cube_l0, const SourceLoc& loc) {
  check_computed(a, "matmul", loc);
  check_computed(b, "matmul", loc);
  const TensorValue& va = g_.values[a];
  const TensorValue& vb = g_.values[b];
  if (va.shape.size() < 2 || vb.shape.size() < 2)
    throw NotSupportedError(where("matmul", loc) + fmt::format("operands of shapes {} and {}: 1-D operands are not supported yet",
                                                               shape_str(va.shape), shape_str(vb.shape)));
  const Expr& ka = va.shape[va.shape.size() - 1];
  const Expr& kb = vb.shape[vb.shape.size() - 2];
  auto ca = ka.as_const(), cb = kb.as_const();
  if ((ca && cb && *ca != *cb) || (!(ca && cb) && !ka.equals(kb)))
    throw UserError(where("matmul", loc) + fmt::format("shapes {} and {} cannot be multiplied ({} versus {} in the inner dim)",
                                                       shape_str(va.shape), shape_str(vb.shape), ka.str(), kb.str()));
  if (cube.size() != 3)
    throw UserError(where("matmul", loc) + "no cube tile shape is set; call pypto.set_cube_tile_shapes(m, k, n) before this op");
  for (int64_t t : cube)
    if (t <= 0) throw UserError(where("matmul", loc) + fmt::format("cube tile sizes must be positive, found {}", ints_str(cube)));
  if (va.dtype != vb.dtype && promote_at("matmul", loc, va.dtype, vb.dtype) != va.dtype &&
      promote_types(va.dtype, vb.dtype) != vb.dtype)
    throw TypeError(where("matmul", loc) + fmt::format("operands of dtypes {} and {} are not supported",
                                                       dtype_name(va.dtype), dtype_name(vb.dtype)));
  if (va.dtype != vb.dtype)
    throw TypeError(where("matmul", loc) + fmt::format("operands have dtypes {} and {}; cast one of them (as torch.matmul requires)",
                                                       dtype_name(va.dtype), dtype_name(vb.dtype)));
  // Batch dims broadcast as elementwise ops do.
  size_t ba = va.shape.size() - 2, bb = vb.shape.size() - 2, rank = std::max(ba, bb);
  std::vector<Expr> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    size_t ia = i + ba, ib = i + bb;
    Expr da = ia >= rank ? va.shape[ia - rank] : Expr(1);
    Expr db = ib >= rank ? vb.shape[ib - rank] : Expr(1);
    auto xa = da.as_const(), xb = db.as_const();
    if (xa && *xa == 1) out[i] = db;
    else if ((xb && *xb == 1) || da.equals(db)) out[i] = da;
    else
      throw UserError(where("matmul", loc) + fmt::format("batch dims of {} and {} do not broadcast", shape_str(va.shape),
                                                         shape_str(vb.shape)));
  }
  out.push_back(va.shape[va.shape.size() - 2]);
  out.push_back(vb.shape[vb.shape.size() - 1]);
  DataType in_dt = va.dtype;
  int id = new_value(out, out_dtype);
  TensorOp op{TensorOpKind::Matmul, {a, b}, id, -1, false, {}, loc};
  op.operands = {Operand::tensor(a), Operand::tensor(b)};
  // Accumulate in fp32 for the float types (double in double). Integers accumulate in int32 when
  // the result computes in int32 (signed integers of 32 bits or fewer: the sums modulo 2^32 are all
  // it keeps), in int64 otherwise.
  bool narrow_int = !dtype_is_float(out_dtype) && compute_dtype(out_dtype) == DataType::INT32;
  op.compute = dtype_is_float(in_dt) ? compute_dtype(in_dt) : narrow_int ? DataType::INT32 : DataType::INT64;
  op.cube_tile = cube;
  op.cube_tile_l0 = cube_l0;
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_conv(int x, int w, DataType out_dtype, const std::vector<int64_t>& geometry,
                                 const std::vector<int64_t>& tile, const SourceLoc& loc) {
  check_computed(x, "conv", loc);
  check_computed(w, "conv", loc);
  const TensorValue& vx = g_.values[x];
  const TensorValue& vw = g_.values[w];
  if (geometry.size() != 4 || tile.size() != 3)
    throw UserError(where("conv", loc) + fmt::format("geometry {} and tile {} must have 4 and 3 sizes",
                                                     ints_str(geometry), ints_str(tile)));
  for (size_t i = 0; i < 4; ++i)
    if (geometry[i] < 1 || (i < 3 && tile[i] < 1))
      throw UserError(where("conv", loc) + fmt::format("geometry {} and tile {} must be positive", ints_str(geometry),
                                                       ints_str(tile)));
  auto cin = vx.shape.size() == 4 ? vx.shape[1].as_const() : std::nullopt;
  auto hp = vx.shape.size() == 4 ? vx.shape[2].as_const() : std::nullopt;
  auto wp = vx.shape.size() == 4 ? vx.shape[3].as_const() : std::nullopt;
  auto cout = vw.shape.size() == 2 ? vw.shape[0].as_const() : std::nullopt;
  auto kcols = vw.shape.size() == 2 ? vw.shape[1].as_const() : std::nullopt;
  const int64_t kh = geometry[0], kw = geometry[1], dh = geometry[2], dw = geometry[3];
  if (!cin || !hp || !wp || !cout || !kcols || *kcols != kh * kw * *cin)
    throw UserError(where("conv", loc) + fmt::format("input {} and weight {} must be [N, Cin, Hp, Wp] and "
                                                     "[Cout, {} Cin] with static Cin, Hp, Wp and Cout",
                                                     shape_str(vx.shape), shape_str(vw.shape), kh * kw));
  const int64_t oh = *hp - dh * (kh - 1), ow = *wp - dw * (kw - 1);
  if (oh < 1 || ow < 1)
    throw UserError(where("conv", loc) + fmt::format("input {} is smaller than the dilated kernel", shape_str(vx.shape)));
  if (vx.dtype != vw.dtype || !dtype_is_float(vx.dtype))
    throw TypeError(where("conv", loc) + fmt::format("input and weight must have one float dtype, found {} and {}",
                                                     dtype_name(vx.dtype), dtype_name(vw.dtype)));
  const DataType compute = compute_dtype(vx.dtype);
  const Expr batch = vx.shape[0];
  int id = new_value({batch, Expr(*cout), Expr(oh), Expr(ow)}, out_dtype);  // may move vx and vw
  TensorOp op{TensorOpKind::Conv, {x, w}, id, -1, false, {}, loc};
  op.operands = {Operand::tensor(x), Operand::tensor(w)};
  op.compute = compute;
  op.conv = geometry;
  op.cube_tile = tile;
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

namespace {
/// Checks an index tensor for gather/scatter against the data tensor.
void check_index(const char* op, const TensorValue& x, int& dim, const TensorValue& idx, const SourceLoc& loc) {
  int rank = static_cast<int>(x.shape.size());
  if (dim < -rank || dim >= rank)
    throw UserError(where(op, loc) + fmt::format("dim {} is out of range for a tensor of rank {} (expected {} to {})", dim,
                                                 rank, -rank, rank - 1));
  if (dim < 0) dim += rank;
  if (idx.dtype != DataType::INT32 && idx.dtype != DataType::INT64)
    throw TypeError(where(op, loc) + fmt::format("index must be DT_INT32 or DT_INT64, found {}", dtype_name(idx.dtype)));
  if (idx.shape.size() != x.shape.size())
    throw UserError(where(op, loc) + fmt::format("index of shape {} must have the rank of the tensor of shape {}",
                                                 shape_str(idx.shape), shape_str(x.shape)));
  for (int d = 0; d < rank; ++d) {
    if (d == dim) continue;
    auto a = idx.shape[d].as_const(), b = x.shape[d].as_const();
    if (a && b && *a > *b)
      throw UserError(where(op, loc) + fmt::format("index of shape {} is larger than the tensor of shape {} in dim {}",
                                                   shape_str(idx.shape), shape_str(x.shape), d));
  }
}
}  // namespace

int TensorGraphBuilder::add_gather(int x, int dim, int index, const std::vector<int64_t>& tile, const SourceLoc& loc,
                                   const std::string& name) {
  const char* what = name.c_str();
  check_value(x, what, loc);
  check_value(index, what, loc);
  check_index(what, g_.values[x], dim, g_.values[index], loc);
  std::vector<Expr> shape = g_.values[index].shape;
  DataType dt = g_.values[x].dtype;
  const std::vector<int64_t> fitted = fit_tile(what, tile, shape.size(), loc);
  int id = new_value(shape, dt);
  TensorOp op{TensorOpKind::Gather, {x, index}, id, dim, false, fitted, loc};
  op.operands = {Operand::tensor(x), Operand::tensor(index)};
  if (name != "gather") op.label = name;
  op.compute = compute_dtype(dt);
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return id;
}

int TensorGraphBuilder::add_scatter(int target, int dim, int index, int src, ScatterReduce reduce,
                                    const std::vector<int64_t>& tile, const SourceLoc& loc, const std::string& name) {
  const char* what = name.c_str();
  check_value(target, what, loc);
  check_value(index, what, loc);
  check_value(src, what, loc);
  const TensorValue& t = g_.values[target];
  const TensorValue& i = g_.values[index];
  const TensorValue& sv = g_.values[src];
  check_index(what, t, dim, i, loc);
  if (sv.shape.size() != i.shape.size())
    throw UserError(where(what, loc) + fmt::format("src of shape {} must have the shape of index {}", shape_str(sv.shape),
                                                        shape_str(i.shape)));
  for (size_t d = 0; d < sv.shape.size(); ++d) {
    auto a = sv.shape[d].as_const(), b = i.shape[d].as_const();
    if ((a && b && *a != *b) ||
        (!(a && b) && !sv.shape[d].equals(i.shape[d]) && !(checkable_per_call(sv.shape[d]) && checkable_per_call(i.shape[d]))))
      throw UserError(where(what, loc) + fmt::format("src of shape {} must have the shape of index {}",
                                                          shape_str(sv.shape), shape_str(i.shape)));
    if (!(a && b) && !sv.shape[d].equals(i.shape[d]))  // a dynamic dim: each call checks
      dim_checks_.push_back({sv.shape[d], i.shape[d],
                             where(what, loc) + fmt::format("src of shape {} and index of shape {} must agree in dim {} "
                                                                 "({} versus {})", shape_str(sv.shape), shape_str(i.shape),
                                                                 d, sv.shape[d].str(), i.shape[d].str())});
  }
  const std::vector<int64_t> fitted = fit_tile(what, tile, i.shape.size(), loc);
  TensorOp op{TensorOpKind::Scatter, {index, src, target}, target, dim, false, fitted, loc};
  op.operands = {Operand::tensor(index), Operand::tensor(src), Operand::tensor(target)};
  op.compute = compute_dtype(t.dtype);
  op.reduce = reduce;
  if (name != "scatter") op.label = name;
  op.region = open_.empty() ? -1 : open_.back();
  g_.ops.push_back(op);
  return target;
}

std::vector<int> region_path(const std::vector<Region>& regions, int region) {
  std::vector<int> path;
  for (int r = region; r >= 0; r = regions.at(r).parent) path.insert(path.begin(), r);
  return path;
}

int TensorGraphBuilder::push_region(Region r) {
  r.id = static_cast<int>(g_.regions.size());
  r.parent = open_.empty() ? -1 : open_.back();
  g_.regions.push_back(r);
  open_.push_back(r.id);
  return r.id;
}

void TensorGraphBuilder::begin_loop(const std::string& var, const Expr& start, const Expr& stop, const Expr& step,
                                    const SourceLoc& loc) {
  for (const Region& r : g_.regions)
    if (r.kind == Region::Kind::Loop && r.var == var)
      throw UserError(fmt::format("pypto.loop at {}: the index name '{}' is already used by another loop", loc.str(), var));
  if (auto c = step.as_const(); c && *c <= 0)
    throw UserError(fmt::format("pypto.loop at {}: step must be positive, found {}", loc.str(), *c));
  Region r;
  r.kind = Region::Kind::Loop;
  r.var = var;
  r.start = start;
  r.stop = stop;
  r.step = step;
  push_region(r);
}

void TensorGraphBuilder::end_loop() {
  if (open_.empty() || g_.regions[open_.back()].kind != Region::Kind::Loop) throw InternalError("end_loop without a loop");
  open_.pop_back();
}

bool TensorGraphBuilder::checkable_per_call(const Expr& e) const {
  // Only constants and the function's dynamic dims: a call knows their values before it runs.
  struct Unknown {};
  try {
    e.eval([&](const std::string& name) -> int64_t {
      if (std::find(g_.dyn_dims.begin(), g_.dyn_dims.end(), name) == g_.dyn_dims.end()) throw Unknown{};
      return 1;
    });
  } catch (const Unknown&) {
    return false;
  } catch (const std::exception&) {
    return true;  // e.g. a division by the placeholder value: the names are all dims
  }
  return true;
}

void TensorGraphBuilder::begin_if(const Expr& cond, const SourceLoc&) {
  Region r;
  r.kind = Region::Kind::Then;
  r.cond = cond;
  push_region(r);
}

void TensorGraphBuilder::begin_else() {
  if (open_.empty() || g_.regions[open_.back()].kind != Region::Kind::Then) throw InternalError("begin_else without if");
  int then_id = open_.back();
  open_.pop_back();
  Region r;
  r.kind = Region::Kind::Else;
  r.cond = g_.regions[then_id].cond;
  r.then_region = then_id;
  push_region(r);
}

void TensorGraphBuilder::end_if() {
  if (open_.empty() || g_.regions[open_.back()].kind == Region::Kind::Loop) throw InternalError("end_if without if");
  open_.pop_back();
}

std::string TensorGraphBuilder::add_read(int value, const std::vector<Expr>& index, const SourceLoc& loc) {
  const TensorValue& v = g_.value(value);
  const std::string where = loc.str().empty() ? "" : " at " + loc.str();
  if (std::find(g_.params.begin(), g_.params.end(), value) == g_.params.end())
    throw NotSupportedError(fmt::format(
        "reading a scalar from tensor '{}'{}: only a parameter of the kernel can be read; a tensor the kernel "
        "computes is not supported yet", v.name, where));
  if (!dtype_is_int(v.dtype) || packed_dtype(v.dtype))
    throw UserError(fmt::format("reading a scalar from '{}'{}: expected an integer tensor, found {}", v.name, where,
                                dtype_name(v.dtype)));
  if (index.size() != v.shape.size())
    throw UserError(fmt::format("reading a scalar from '{}'{}: expected {} indices (its rank), found {}", v.name, where,
                                v.shape.size(), index.size()));
  for (size_t d = 0; d < index.size(); ++d) {
    auto i = index[d].as_const();
    auto n = v.shape[d].as_const();
    if (i && (*i < 0 || (n && *i >= *n)))
      throw UserError(fmt::format("reading a scalar from '{}'{}: index {} is out of range for dim {} of size {}", v.name,
                                  where, *i, d, v.shape[d].str()));
  }
  ScalarRead r;
  r.var = fmt::format("{}_v{}", v.name, g_.reads.size());
  r.value = value;
  r.index = index;
  r.region = open_.empty() ? -1 : open_.back();
  r.loc = loc;
  g_.reads.push_back(r);
  return r.var;
}

void TensorGraphBuilder::add_dyn_dim(const std::string& name) {
  if (std::find(g_.dyn_dims.begin(), g_.dyn_dims.end(), name) == g_.dyn_dims.end()) g_.dyn_dims.push_back(name);
}

void TensorGraphBuilder::set_outputs(const std::vector<int>& ids) {
  for (int id : ids)
    if (id < 0 || id >= static_cast<int>(g_.values.size()))
      throw UserError(fmt::format("returned value is not a tensor of this function (id {})", id));
  g_.outputs = ids;
  // Returned values are named after their position, as the orchestration's output parameters,
  // with a '_' added while a parameter has the name (a parameter may be called `out`).
  auto param_named = [&](const std::string& name) {
    return std::any_of(g_.params.begin(), g_.params.end(), [&](int p) { return g_.values[p].name == name; });
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    TensorValue& v = g_.values[ids[i]];
    bool is_param = std::find(g_.params.begin(), g_.params.end(), v.id) != g_.params.end();
    if (is_param) continue;
    std::string name = ids.size() == 1 ? "out" : fmt::format("out{}", i);
    while (param_named(name)) name += "_";
    v.name = name;
  }
}

TensorGraph TensorGraphBuilder::finish() const {
  if (!open_.empty()) throw InternalError("finish with an open loop or condition");
  bool writes = std::any_of(g_.ops.begin(), g_.ops.end(), [](const TensorOp& op) {
    const OpClass c = op_info(op.kind).cls;
    return c == OpClass::Assemble || c == OpClass::Scatter;
  });
  if (g_.outputs.empty() && !writes)
    throw UserError(fmt::format("function '{}' returns no tensor and writes no output parameter", g_.name));
  verify(g_);
  return g_;
}

}  // namespace pypto
