#include "ir/program.h"

#include "ir/errors.h"

#include <fmt/format.h>

#include <algorithm>

namespace pypto {

namespace {
/// for_each_instr for a const or a mutable body (Stmt const or not).
template <typename Body, typename Fn>
void instrs_in(Body& body, const Fn& fn) {
  for (auto& s : body) {
    if (auto* in = std::get_if<Instr>(&s.node)) fn(*in);
    else if (auto* l = std::get_if<Loop>(&s.node)) instrs_in(l->body, fn);
    else if (auto* f = std::get_if<Fused>(&s.node)) instrs_in(f->body, fn);
    else if (auto* c = std::get_if<IfThen>(&s.node)) {
      instrs_in(c->then_body, fn);
      instrs_in(c->else_body, fn);
    }
  }
}
}  // namespace

void for_each_instr(const std::vector<Stmt>& body, const std::function<void(const Instr&)>& fn) { instrs_in(body, fn); }
void for_each_instr(std::vector<Stmt>& body, const std::function<void(Instr&)>& fn) { instrs_in(body, fn); }

int instr_num_srcs(const Instr& in) { return opcode_num_srcs(in.op) - (in.scalar_pos >= 0 ? 1 : 0); }

bool reads_memory(Opcode op) {
  OpForm f = opcode_info(op).form;
  return f == OpForm::Load || f == OpForm::Gather;
}
bool writes_memory(Opcode op) {
  OpForm f = opcode_info(op).form;
  return f == OpForm::Store || f == OpForm::Scatter;
}
int memory_tile(const Instr& in) {
  if (in.op == Opcode::TSCATTER) return in.srcs.at(1);  // the values (the index tile may hold one per row)
  return reads_memory(in.op) ? in.dst : in.srcs.at(0);
}

bool reads_with_row_pitch(const Instr& in, size_t i, const std::function<DataType(int)>& dtype) {
  if (in.op != Opcode::TMATMUL && in.op != Opcode::TMATMUL_ACC) return false;
  const size_t first = in.op == Opcode::TMATMUL_ACC ? 1 : 0;  // past the accumulator
  return i >= first && in.srcs.size() >= first + 2 && dtype(in.srcs[first]) == DataType::BF16 &&
         dtype(in.srcs[first + 1]) == DataType::BF16;
}

bool accumulates_only(const std::vector<Stmt>& body, int memref) {
  int atomic = 0, other = 0;
  for_each_instr(body, [&](const Instr& in) {
    if ((reads_memory(in.op) || writes_memory(in.op)) && in.memref == memref) ++(in.atomic ? atomic : other);
  });
  return atomic > 0 && other == 0;
}

FuseRole fuse_role(const Fused& f, const Instr& in) {
  switch (in.op) {
    case Opcode::TLOAD: return FuseRole::Before;
    case Opcode::TRESHAPE:
      return std::find(f.aliases.begin(), f.aliases.end(), in.dst) != f.aliases.end() ? FuseRole::Alias
                                                                                      : FuseRole::Before;
    case Opcode::TROWSUM: return FuseRole::RowSum;
    case Opcode::TSTORE: return FuseRole::Store;
    default: return FuseRole::Chain;
  }
}

namespace {
int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }
}  // namespace

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t tile_bytes(const TileDecl& t) {
  int64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) n *= d;
  return round64(n);
}

bool local_is_dynamic(const MemRef& m) {
  for (const Expr& d : m.shape)
    if (!d.is_const()) return true;
  return false;
}

int64_t local_bytes(const MemRef& m) {
  int64_t n = dtype_size(m.dtype);
  for (const Expr& d : m.shape) {
    auto c = d.as_const();
    if (!c) throw NotSupportedError(fmt::format("local buffer %{} has a dynamic shape; not supported yet", m.name));
    n *= *c;
  }
  return round64(n);
}

}  // namespace pypto

namespace pypto {

PtoSyntaxError::PtoSyntaxError(int line, int column, const std::string& msg)
    : Error(fmt::format("line {}, column {}: {}", line, column, msg)), line_(line), column_(column) {}

}  // namespace pypto
