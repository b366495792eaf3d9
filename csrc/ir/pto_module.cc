#include "ir/pto_module.h"

#include <fmt/format.h>

#include "ir/errors.h"

namespace pypto {

FunctionBuilder::FunctionBuilder(std::string name, std::string where) {
  fn_.name = std::move(name);
  fn_.where = std::move(where);
}

int FunctionBuilder::memref(const std::string& name, MemKind kind, DataType dtype,
                            const std::optional<std::vector<Expr>>& shape, bool zeroed) {
  MemRef m;
  m.id = static_cast<int>(fn_.memrefs.size());
  m.name = name;
  m.dtype = dtype;
  m.kind = kind;
  m.zeroed = zeroed;
  if (shape) m.shape = *shape;
  fn_.memrefs.push_back(std::move(m));
  fn_.sized.push_back(shape.has_value());
  return fn_.memrefs.back().id;
}

int FunctionBuilder::view(const std::string& name, const std::string& base, DataType dtype,
                          const std::vector<Expr>& shape, const std::vector<Expr>& offsets, const std::vector<int>& map,
                          const std::vector<int64_t>& steps, bool reshape) {
  const int b = memref_id(base);
  if (b < 0) throw UserError(fmt::format("@{}: '{}' is not a declared memref", fn_.name, base));
  const int id = memref(name, MemKind::View, dtype, shape);
  ViewMap v;
  v.base = b;
  v.reshape = reshape;
  v.offsets = offsets;
  v.map = map;
  v.steps = steps;
  fn_.memrefs[id].view = std::move(v);
  return id;
}

int FunctionBuilder::tile(const std::string& name, const std::vector<int64_t>& shape, DataType dtype) {
  TileDecl t;
  t.id = static_cast<int>(fn_.tiles.size());
  t.name = name;
  t.shape = shape;
  t.dtype = dtype;
  fn_.tiles.push_back(std::move(t));
  return fn_.tiles.back().id;
}

void FunctionBuilder::scalar(const std::string& name, DataType dtype) { fn_.scalars.emplace_back(name, dtype); }

void FunctionBuilder::mark_output(const std::string& name) {
  const int id = memref_id(name);
  if (id >= 0 && fn_.memrefs[id].kind == MemKind::Input) fn_.memrefs[id].kind = MemKind::Output;
}

int FunctionBuilder::memref_id(const std::string& name) const {
  for (const MemRef& m : fn_.memrefs)
    if (m.name == name) return m.id;
  return -1;
}

int FunctionBuilder::tile_id(const std::string& name) const {
  for (const TileDecl& t : fn_.tiles)
    if (t.name == name) return t.id;
  return -1;
}

bool FunctionBuilder::has_scalar(const std::string& name) const {
  for (const auto& [n, dt] : fn_.scalars)
    if (n == name) return true;
  return false;
}

std::vector<Stmt>& FunctionBuilder::body() {
  if (open_.empty()) return fn_.body;
  Open& o = open_.back();
  if (o.is_loop) return o.loop.body;
  return o.in_else ? o.cond.else_body : o.cond.then_body;
}

void FunctionBuilder::add(Instr in) { body().push_back(Stmt{std::move(in)}); }

void FunctionBuilder::call(NamedCall c) {
  Call call;
  call.named = std::make_shared<const NamedCall>(std::move(c));
  body().push_back(Stmt{std::move(call)});
}

void FunctionBuilder::begin_for(Loop loop) {
  Open o;
  o.is_loop = true;
  o.loop = std::move(loop);
  open_.push_back(std::move(o));
}

void FunctionBuilder::begin_if(const Expr& cond) {
  Open o;
  o.is_loop = false;
  o.cond.cond = cond;
  open_.push_back(std::move(o));
}

bool FunctionBuilder::begin_else() {
  if (open_.empty() || open_.back().is_loop || open_.back().in_else) return false;
  open_.back().in_else = true;
  return true;
}

bool FunctionBuilder::end(bool loop) {
  if (open_.empty() || open_.back().is_loop != loop) return false;
  Open o = std::move(open_.back());
  open_.pop_back();
  if (o.is_loop) body().push_back(Stmt{std::move(o.loop)});
  else body().push_back(Stmt{std::move(o.cond)});
  return true;
}

std::string FunctionBuilder::open_block() const {
  if (open_.empty()) return "";
  return open_.back().is_loop ? "for" : "if";
}

ModuleFunction FunctionBuilder::build() {
  if (!open_.empty()) throw InternalError("FunctionBuilder::build with an open block");
  ModuleFunction out = std::move(fn_);
  fn_ = ModuleFunction{};
  return out;
}

}  // namespace pypto
