#include "codegen/kernel_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "codegen/emit_util.h"
#include "ir/errors.h"
#include "ir/printer.h"

namespace pypto::codegen {

namespace {

/// Emits one InCore function as a static kernel.
class KernelEmitter {
 public:
  KernelEmitter(const InCoreFunction& f, const std::vector<MemRef>& memrefs, const FunctionBounds& bounds)
      : f_(f), memrefs_(memrefs), bounds_(bounds) {}

  std::string emit() {
    std::string o;
    o += fmt::format("// InCore @{} ({} buffer bytes)\n", f_.name, f_.buffer_bytes);
    o += fmt::format("static int32_t k_{}(const pypto_region* args, int32_t nargs, const int64_t* scalars, int32_t nscalars) {{\n",
                     f_.name);
    o += fmt::format("  if (nargs != {} || nscalars != {}) return PYPTO_STATUS_ARGUMENTS;\n", f_.params.size(),
                     f_.scalar_params.size());
    for (size_t i = 0; i < f_.params.size(); ++i) {
      const RegionParam& p = f_.params[i];
      std::string ty = dtype_cpp_type(p.dtype);
      o += fmt::format("  {}* __restrict p{} = pto::region_data<{}>(args[{}]);  // %{}\n", ty, i, ty, i, p.name);
      o += fmt::format("  const int64_t* p{}_s = args[{}].stride;\n", i, i);
      mem_ptr_[p.memref] = fmt::format("p{}", i);
      mem_stride_[p.memref] = fmt::format("p{}_s", i);
      mem_extent_[p.memref] = fmt::format("args[{}].extent", i);
    }
    for (size_t i = 0; i < f_.scalar_params.size(); ++i)
      o += fmt::format("  const int64_t {} = scalars[{}];\n", var_name(f_.scalar_params[i]), i);
    // One thread-local arena holds every tile and local buffer: no stack limits, one TLS lookup.
    int64_t offset = 0;
    std::string decls;
    for (int l : f_.locals) {
      const MemRef& m = memrefs_.at(l);
      if (local_is_dynamic(m)) {
        // Sized by a symbolic dim: a per-thread buffer that grows as needed.
        std::string ty = dtype_cpp_type(m.dtype);
        std::vector<std::string> strides(m.shape.size());
        std::string n = "INT64_C(1)";
        for (size_t d = m.shape.size(); d-- > 0;) {
          strides[d] = n;
          n = fmt::format("({} * {})", n, cexpr(m.shape[d]));
        }
        decls += fmt::format("  static thread_local pto::Scratch l{}_buf;\n", l);
        decls += zero_guards(m.shape, "  ", kKernelFail);
        decls += fmt::format("  {}* __restrict l{} = l{}_buf.get<{}>({});  // local %{}\n", ty, l, l, ty, n, m.name);
        decls += fmt::format("  if (l{} == nullptr) return pto::kernel_error(1, \"@{}: local buffer %{} of shape [{}] cannot be allocated\");\n",
                             l, f_.name, m.name, list(shape_text(m.shape)));
        decls += fmt::format("  const int64_t l{}_s[] = {{{}}};\n", l, list(strides));
        decls += fmt::format("  const int64_t l{}_e[] = {{{}}};\n", l, cexprs(m.shape));
        mem_ptr_[l] = fmt::format("l{}", l);
        mem_stride_[l] = fmt::format("l{}_s", l);
        mem_extent_[l] = fmt::format("l{}_e", l);
        continue;
      }
      std::vector<int64_t> shape;
      for (const Expr& d : m.shape) shape.push_back(d.value());
      std::vector<int64_t> strides(shape.size());
      int64_t n = 1;
      for (size_t d = shape.size(); d-- > 0;) {
        strides[d] = n;
        n *= shape[d];
      }
      std::string ty = dtype_cpp_type(m.dtype);
      int64_t at = f_.local_offsets.count(l) ? f_.local_offsets.at(l) : offset;
      decls += fmt::format("  {}* l{} = reinterpret_cast<{}*>(arena + {});  // local %{}\n", ty, l, ty, at, m.name);
      decls += fmt::format("  static const int64_t l{}_s[] = {{{}}};\n", l, ints(strides));
      decls += fmt::format("  static const int64_t l{}_e[] = {{{}}};\n", l, ints(shape));
      mem_ptr_[l] = fmt::format("l{}", l);
      mem_stride_[l] = fmt::format("l{}_s", l);
      mem_extent_[l] = fmt::format("l{}_e", l);
      offset += local_bytes(m);
    }
    // Tiles that some load may point at its source (plan_view_loads) are declared as pointers.
    for_each_leaf(f_.body, [&](const Stmt& s) {
      auto* in = std::get_if<Instr>(&s.node);
      if (in != nullptr && in->op == Opcode::TLOAD && in->view) view_tiles_.insert(in->dst);
      if (in != nullptr && in->op == Opcode::TLOAD && in->strided) strided_tiles_.insert(in->dst);
      streams_ = streams_ || (in != nullptr && in->stream);
    });
    // Buffers with disjoint live ranges share arena bytes (plan_buffers; fuse_chains may give a tile
    // bytes past them): the pointers are not __restrict for that reason, the instructions' are.
    const bool planned = !f_.tile_offsets.empty() || !f_.local_offsets.empty();
    std::string body;
    emit_body(body, f_.body, 1);
    for (const TileDecl& t : f_.tiles) {
      std::string ty = dtype_cpp_type(t.dtype);
      int64_t at = f_.tile_offsets.count(t.id) ? f_.tile_offsets.at(t.id) : offset;
      if (view_tiles_.count(t.id)) {
        // Only loaded and read: the tile may view its source instead of a copy (pto::tload_view).
        decls += fmt::format("  {}* {}_buf = reinterpret_cast<{}*>(arena + {});  // {}\n", ty, tn(t), ty, at,
                             tile_type(t));
        decls += fmt::format("  const {}* {} = {}_buf;\n", ty, tn(t), tn(t));
        // A strided view's row pitch (tload ... view strided): the tile's own row length when copied.
        if (strided_tiles_.count(t.id)) decls += fmt::format("  int64_t {}_ld = {};\n", tn(t), t.shape.back());
      } else {
        decls += fmt::format("  {}* {} = reinterpret_cast<{}*>(arena + {});  // {}\n", ty, tn(t), ty, at,
                             tile_type(t));
      }
      decls += fmt::format("  static const int64_t {}_shape[] = {{{}}};\n", tn(t), ints(t.shape));
      offset += tile_bytes(t);
    }
    const int64_t arena = planned ? f_.buffer_bytes : offset;
    if (arena > 0) o += fmt::format("  alignas(64) static thread_local unsigned char arena[{}];\n", arena);
    o += decls;
    o += body;
    if (streams_) o += "  pto::stream_fence();\n";
    o += "  return 0;\n}\n\n";
    return o;
  }

 private:
  const TileDecl& tile(int id) const {
    for (const auto& t : f_.tiles)
      if (t.id == id) return t;
    throw InternalError(fmt::format("@{}: tile {} is not declared", f_.name, id));
  }
  /// The C++ name of a tile's buffer: prefixed, so that any .pto name (`%0`, `%arena`, `%int`) is an
  /// identifier that collides with nothing the kernel declares.
  static std::string tn(const TileDecl& t) { return "t_" + t.name; }

  std::string address(const Instr& in) const {
    std::string ptr = mem_ptr_.at(in.memref), s = mem_stride_.at(in.memref);
    std::string off;
    for (size_t d = 0; d < in.offsets.size(); ++d) {
      if (in.offsets[d].is_const() && in.offsets[d].value() == 0) continue;
      off += fmt::format(" + {} * {}[{}]", cexpr(in.offsets[d]), s, d);
    }
    return ptr + off;
  }

  /// The valid extents of a memory instruction as C++ values; an instruction written without them
  /// (the seed's forms) moves its whole tile.
  std::string valid_list(const Instr& in) const {
    if (!in.valid.empty()) return cexprs(in.valid);
    return ints(tile(memory_tile(in)).shape);
  }

  /// A memory access the bounds analysis could not bound over the scalars (under an IF, or with an
  /// offset it cannot bound) checks its box against its region's extents before it runs.
  void emit_access_check(std::string& o, const Instr& in, const std::string& pad) {
    const TileDecl& t = tile(memory_tile(in));
    std::vector<std::string> ext;
    for (size_t d = 0; d < t.shape.size(); ++d)
      ext.push_back(d < in.valid.size() ? cexpr(in.valid[d]) : std::to_string(t.shape[d]));
    const bool indexed = in.op == Opcode::TGATHER || in.op == Opcode::TSCATTER;
    o += fmt::format("{}{{ const int64_t ck_off[] = {{{}}}; const int64_t ck_ext[] = {{{}}}; static const int64_t ck_tile[] = {{{}}};\n",
                     pad, cexprs(in.offsets), list(ext), ints(t.shape));
    o += fmt::format("{}  if (int32_t bad = pto::check_access({}, ck_off, ck_ext, ck_tile, {}, {}, \"@{}: {}\")) return bad; }}\n",
                     pad, t.shape.size(), mem_extent_.at(in.memref), indexed ? in.axis : -1, f_.name,
                     access_text(in, f_.tiles, memrefs_));
  }

  void emit_body(std::string& o, const std::vector<Stmt>& body, int indent) {
    emit_control(
        o, body, indent,
        [&](const Stmt& s, const std::string& pad) {
          if (auto* in = std::get_if<Instr>(&s.node)) emit_instr(o, *in, pad);
          else if (auto* f = std::get_if<Fused>(&s.node)) emit_fused(o, *f, pad);
          else throw InternalError("CALL inside an InCore function");
        },
        nullptr, kKernelFail);
  }


  /// A fused run (pass fuse_chains) as one loop over its rows, each row in strips: its Before
  /// instructions first, then per strip one loop over the strip's elements that evaluates the whole
  /// chain into locals (each chain value lives in a register; a value a later statement reads is
  /// also written back to its tile), accumulates the row sums and puts the stored value into a
  /// strip array that stays in L1, then the store of the strip.
  void emit_fused(std::string& o, const Fused& f, const std::string& pad) {
    std::vector<const Instr*> before, chain, sums;
    const Instr* store = nullptr;
    std::map<int, int> alias;  // reshaped tile -> its source, read in its place
    for (const Stmt& s : f.body) {
      const Instr& in = std::get<Instr>(s.node);
      switch (fuse_role(f, in)) {
        case FuseRole::Before: before.push_back(&in); break;
        case FuseRole::Alias: alias[in.dst] = in.srcs.at(0); break;
        case FuseRole::Chain: chain.push_back(&in); break;
        case FuseRole::RowSum: sums.push_back(&in); break;
        case FuseRole::Store: store = &in; break;
      }
    }
    auto through = [&](int t) {
      auto it = alias.find(t);
      return it == alias.end() ? t : it->second;
    };
    const std::set<int> registers(f.registers.begin(), f.registers.end());
    const std::string ty = ctype(tile(chain.at(0)->dst).dtype);
    const int64_t S = f.strip;
    for (const Instr* in : before) emit_instr(o, *in, pad);
    std::vector<std::string> names;
    for (const Instr* in : chain) names.push_back(std::string(opcode_name(in->op)));
    for (const Instr* in : sums) names.push_back(std::string(opcode_name(in->op)));
    if (store != nullptr) names.push_back(store->stream ? "tstore (streaming)" : "tstore");
    o += fmt::format("{}{{  // fused: {}\n", pad, list(names));
    if (store != nullptr) o += fmt::format("{}  alignas(64) {} _fs[{}];\n", pad, ty, S);
    o += fmt::format("{}  for (int64_t _fr = 0; _fr < {}; ++_fr) {{\n", pad, f.rows);
    std::map<int, std::string> row_operand;
    for (const Instr* in : chain) {
      if (!is_row_expand(in->op)) continue;
      const int b = in->srcs[1];
      if (row_operand.count(b)) continue;
      row_operand[b] = fmt::format("_frb{}", row_operand.size());
      o += fmt::format("{}    const {} {} = {}[_fr];\n", pad, ty, row_operand[b], tn(tile(through(b))));
    }
    // Row sums: one accumulator each, reassociated across SIMD lanes like pto::treduce's.
    std::vector<std::string> accs;
    for (size_t q = 0; q < sums.size(); ++q) {
      accs.push_back(fmt::format("_facc{}", q));
      o += fmt::format("{}    {} {} = {}(0);\n", pad, ty, accs.back(), ty);
    }
    std::string drow, dstride;
    if (store != nullptr) {
      const std::string& st = mem_stride_.at(store->memref);
      const size_t rank = store->offsets.size();
      drow = "_fd";
      dstride = fmt::format("{}[{}]", st, rank - 1);
      o += fmt::format("{}    {}* const {} = {}{};\n", pad, ty, drow, address(*store),
                       rank == 2 ? fmt::format(" + _fr * {}[0]", st) : "");
    }
    o += fmt::format("{}    for (int64_t _fc0 = 0; _fc0 < {}; _fc0 += {}) {{\n", pad, f.cols, S);
    o += fmt::format("{}      const int64_t _fbase = _fr * {} + _fc0;\n", pad, f.cols);
    // The strip loop, once or (fast forms) twice: first with the fast forms, flagging an element
    // outside their domain; a flagged strip runs again with the full forms from the row sums it
    // started with (no chain value goes back to a tile, so it reads what the first run read).
    const std::set<int> fast(f.fast.begin(), f.fast.end());
    if (!fast.empty()) {
      o += fmt::format("{}      int _fout = 0;\n", pad);
      for (const std::string& a : accs) o += fmt::format("{}      const {} {}_s = {};\n", pad, ty, a, a);
    }
    auto strip_loop = [&](bool use_fast, const std::string& lpad, const std::string& acc_suffix) {
      std::vector<std::string> sum_vars;
      for (const std::string& a : accs) sum_vars.push_back(a + acc_suffix);
      // The reductions make the loop an OpenMP SIMD loop; either way no iteration depends on another.
      std::vector<std::string> reductions;
      if (!sums.empty()) reductions.push_back(fmt::format("reduction(+: {})", list(sum_vars)));
      if (use_fast) reductions.push_back("reduction(|: _fout)");
      if (reductions.empty()) {
        o += fmt::format("{}#pragma GCC ivdep\n", pad);
      } else {
        o += fmt::format("{}#pragma omp simd {}\n", pad, fmt::join(reductions, " "));
      }
      o += fmt::format("{}for (int64_t _fk = 0; _fk < {}; ++_fk) {{\n", lpad, S);
      std::map<int, std::string> value;  // tile -> the local holding it, once the chain defines it
      auto operand = [&](int t) {
        return value.count(t) ? value.at(t) : fmt::format("{}[_fbase + _fk]", tn(tile(through(t))));
      };
      for (size_t k = 0; k < chain.size(); ++k) {
        const Instr& in = *chain[k];
        std::string expr;
        if (use_fast && fast.count(in.dst)) {
          o += fmt::format("{}  _fout |= {}::outside({});\n", lpad, op_struct(in.op), operand(in.srcs[0]));
          expr = fmt::format("{}::fast({})", op_struct(in.op), operand(in.srcs[0]));
        } else if (is_row_expand(in.op)) {
          expr = fmt::format("{}::f({}, {})", op_struct(in.op), operand(in.srcs[0]), row_operand.at(in.srcs[1]));
        } else if (is_col_expand(in.op)) {
          expr = fmt::format("{}::f({}, {}[_fc0 + _fk])", op_struct(in.op), operand(in.srcs[0]),
                             tn(tile(through(in.srcs[1]))));
        } else if (opcode_num_srcs(in.op) == 1) {
          expr = fmt::format("{}::f({})", op_struct(in.op), operand(in.srcs[0]));
        } else if (in.scalar_pos == 1) {
          expr = fmt::format("{}::f({}, {})", op_struct(in.op), operand(in.srcs[0]), constant(in, ty));
        } else if (in.scalar_pos == 0) {
          expr = fmt::format("{}::f({}, {})", op_struct(in.op), constant(in, ty), operand(in.srcs[0]));
        } else {
          expr = fmt::format("{}::f({}, {})", op_struct(in.op), operand(in.srcs[0]), operand(in.srcs[1]));
        }
        const std::string v = fmt::format("_fv{}", k);
        std::string write_back =
            registers.count(in.dst) ? "" : fmt::format(" {}[_fbase + _fk] = {};", tn(tile(in.dst)), v);
        const char* form = use_fast && fast.count(in.dst) ? " (fast form)" : "";
        o += fmt::format("{}  const {} {} = {}({});{}  // {}{}\n", lpad, ty, v, ty, expr, write_back,
                         opcode_name(in.op), form);
        value[in.dst] = v;
      }
      for (size_t q = 0; q < sums.size(); ++q) {
        o += fmt::format("{}  {} += {};  // {}\n", lpad, sum_vars[q], value.at(sums[q]->srcs[0]),
                         opcode_name(sums[q]->op));
      }
      if (store != nullptr) o += fmt::format("{}  _fs[_fk] = {};\n", lpad, value.at(store->srcs[0]));
      o += fmt::format("{}}}\n", lpad);
    };
    strip_loop(!fast.empty(), pad + "      ", "");
    if (!fast.empty()) {
      // The redo is a function of its own, so that inlining the full forms into it leaves the
      // kernel's inlining budget to the first loop (both loops vectorise only with their math inlined).
      o += fmt::format("{}      if (_fout) [&]() __attribute__((noinline)) {{  // outside the fast forms' domain\n",
                       pad);
      for (const std::string& a : accs) o += fmt::format("{}        {} {}_r = {}_s;\n", pad, ty, a, a);
      strip_loop(false, pad + "        ", "_r");
      for (const std::string& a : accs) o += fmt::format("{}        {} = {}_r;\n", pad, a, a);
      o += fmt::format("{}      }}();\n", pad);
    }
    if (store != nullptr) {
      o += fmt::format("{}      pto::store_strip<{}, {}>({} + _fc0 * {}, {}, _fs);  // tstore\n", pad,
                       store->stream ? "true" : "false", S, drow, dstride, dstride);
    }
    o += fmt::format("{}    }}\n", pad);
    for (size_t q = 0; q < sums.size(); ++q) o += fmt::format("{}    {}[_fr] = {};\n", pad, tn(tile(sums[q]->dst)), accs[q]);
    o += fmt::format("{}  }}\n{}}}\n", pad, pad);
  }

  static std::string op_struct(Opcode op) { return opcode_functor(op); }

  static std::string ctype(DataType dt) { return dtype_cpp_type(dt); }

  /// The constant operand of an instruction as a C++ value of type `ty`.
  static std::string constant(const Instr& in, const std::string& ty) {
    if (in.scalar_expr) return fmt::format("static_cast<{}>({})", ty, cexpr(*in.scalar_expr));
    if (std::isinf(in.scalar)) return fmt::format("static_cast<{}>({}__builtin_inf())", ty, in.scalar < 0 ? "-" : "");
    if (std::isnan(in.scalar)) return fmt::format("static_cast<{}>(__builtin_nan(\"\"))", ty);
    // "-0" would be the integer 0: negative zero is written as a double.
    if (in.scalar == 0.0 && std::signbit(in.scalar)) return fmt::format("static_cast<{}>(-0.0)", ty);
    return fmt::format("static_cast<{}>({:.17g})", ty, in.scalar);
  }

  void emit_instr(std::string& o, const Instr& in, const std::string& pad) {
    std::string comment = fmt::format("  // {}", opcode_name(in.op));
    {
      std::vector<Expr> exprs = in.offsets;
      exprs.insert(exprs.end(), in.valid.begin(), in.valid.end());
      if (in.scalar_expr) exprs.push_back(*in.scalar_expr);
      o += zero_guards(exprs, pad, kKernelFail);
    }
    if (bounds_.checked_where_run.count(&in)) emit_access_check(o, in, pad);
    switch (opcode_info(in.op).form) {
      case OpForm::Load: {
        const TileDecl& t = tile(in.dst);
        o += fmt::format("{}{{ const int64_t valid[] = {{{}}};{}\n", pad, valid_list(in), comment);
        // A view tile is a pointer: a viewing load sets it, a copying load points it back at its buffer.
        const bool view_tile = view_tiles_.count(in.dst) > 0;
        const bool view = in.view;
        const std::string buf = view_tile ? tn(t) + "_buf" : tn(t);
        std::string call = fmt::format("<{}, {}>({}, {}, {}_shape, {}, {}, valid)", ctype(t.dtype), t.shape.back(), buf,
                                       t.shape.size(), tn(t), address(in), mem_stride_.at(in.memref));
        if (in.panels > 0) {
          o += fmt::format("{}  pto::tload_panels<{}, {}, {}>({}, {}, {}_shape, {}, {}, valid); }}\n", pad,
                           ctype(t.dtype), t.shape.back(), in.panels, buf, t.shape.size(), tn(t), address(in),
                           mem_stride_.at(in.memref));
        } else if (view && in.strided) {
          o += fmt::format("{}  {} = pto::tload_view_strided<{}, {}>({}, {}, {}_shape, {}, {}, valid, {}_ld); }}\n", pad,
                           tn(t), ctype(t.dtype), t.shape.back(), buf, t.shape.size(), tn(t), address(in),
                           mem_stride_.at(in.memref), tn(t));
        } else if (view) {
          o += fmt::format("{}  {} = pto::tload_view{}; }}\n", pad, tn(t), call);
        } else {
          if (view_tile) o += fmt::format("{}  {} = {};\n", pad, tn(t), buf);
          if (strided_tiles_.count(in.dst)) o += fmt::format("{}  {}_ld = {};\n", pad, tn(t), t.shape.back());
          o += fmt::format("{}  pto::tload{}; }}\n", pad, call);
        }
        return;
      }
      case OpForm::Store: {
        const TileDecl& t = tile(in.srcs[0]);
        const bool stream = in.stream;
        o += fmt::format("{}{{ const int64_t valid[] = {{{}}};{}\n", pad, valid_list(in), comment);
        o += fmt::format("{}  pto::{}<{}, {}>({}, {}, valid, {}, {}_shape, {}); }}\n", pad,
                         in.atomic ? "tstore_atomic_add" : stream ? "tstore_stream" : "tstore", ctype(t.dtype), t.shape.back(), address(in),
                         mem_stride_.at(in.memref), t.shape.size(), tn(t), tn(t));
        return;
      }
      case OpForm::Fill: {
        const TileDecl& t = tile(in.dst);
        std::string ty = ctype(t.dtype);
        std::string v = std::isinf(in.scalar) ? fmt::format("pto::{}<{}>()", in.scalar < 0 ? "lowest" : "highest", ty)
                                              : constant(in, ty);
        o += fmt::format("{}pto::tfill<{}, {}>({}, {});{}\n", pad, ty, numel(t.shape), tn(t), v, comment);
        return;
      }
      case OpForm::Arange: {
        const TileDecl& t = tile(in.dst);
        o += fmt::format("{}pto::tarange<{}, {}>({}, {:.17g}, {:.17g}, {});{}\n", pad, ctype(t.dtype), numel(t.shape),
                         tn(t), in.scalar, in.step, cexpr(in.offsets.at(0)), comment);
        return;
      }
      case OpForm::Random: {
        const TileDecl& t = tile(in.dst);
        // Leading tile dims and their strides in the flattened tensor (a tile row is a run).
        std::string dims, strides;
        for (size_t d = 0; d + 1 < t.shape.size(); ++d) {
          dims += fmt::format("INT64_C({}), ", t.shape[d]);
          strides += cexpr(in.offsets.at(d + 1)) + ", ";
        }
        o += fmt::format("{}{{ const int64_t lead[] = {{{}0}}, stride[] = {{{}0}};\n", pad, dims, strides);
        o += fmt::format("{}  pto::trandom<{}, {}, {}, {}, {}, {}>({}, {}ull, {}ull, {}, {}, lead, stride, "
                         "static_cast<uint64_t>({})); }}{}\n",
                         pad, ctype(t.dtype), numel(t.shape), t.shape.back(), in.random.normal ? "true" : "false",
                         in.random.mantissa, in.random.rounds, tn(t), in.random.key, in.random.counter,
                         cexpr(in.offsets.at(0)), t.shape.size() - 1, cexpr(in.offsets.back()), comment);
        return;
      }
      case OpForm::Reshape: {
        const TileDecl& t = tile(in.dst);
        o += fmt::format("{}pto::tcopy<{}, {}>({}, {});{}\n", pad, ctype(t.dtype), numel(t.shape), tn(t),
                         tn(tile(in.srcs[0])), comment);
        return;
      }
      case OpForm::Expand: {
        const TileDecl& t = tile(in.dst);
        const TileDecl& s = tile(in.srcs[0]);
        o += fmt::format("{}pto::texpand<{}>({}, {}, {}_shape, {}, {}_shape);{}\n", pad, ctype(t.dtype), tn(t),
                         t.shape.size(), tn(t), tn(s), tn(s), comment);
        return;
      }
      case OpForm::Cast: {
        const TileDecl& t = tile(in.dst);
        std::string via = in.round_to ? dtype_cpp_type(*in.round_to) : ctype(t.dtype);
        o += fmt::format("{}pto::tcast<{}, {}, {}, {}>({}, {});{}\n", pad, via, ctype(t.dtype),
                         ctype(tile(in.srcs[0]).dtype), numel(t.shape), tn(t), tn(tile(in.srcs[0])), comment);
        return;
      }
      case OpForm::Gather: {
        const TileDecl& t = tile(in.dst);
        o += fmt::format("{}{{ const int64_t valid[] = {{{}}};{}\n", pad, valid_list(in), comment);
        o += fmt::format("{}  if (int32_t bad = pto::tgather({}, {}, {}_shape, valid, {}, {}, {}, {}, {}, {}[{}], \"@{}: {}\")) "
                         "return bad; }}\n",
                         pad, tn(t), t.shape.size(), tn(t), address(in), mem_stride_.at(in.memref), tn(tile(in.srcs[0])),
                         tile(in.srcs[0]).shape.back(), in.axis, mem_extent_.at(in.memref), in.axis, f_.name,
                         access_text(in, f_.tiles, memrefs_));
        return;
      }
      case OpForm::Scatter: {
        const TileDecl& t = tile(in.srcs[1]);  // the values: the box (the index tile may be [..., 1])
        // The indices' bound, and the window: every index lands (base 0, the region's extent), or
        // those of the box's positions on the axis (the values tile's extent, cut at the region's end).
        const std::string region = fmt::format("{}[{}]", mem_extent_.at(in.memref), in.axis);
        std::string bound = region, base = "0", len = region;
        if (!in.window.empty()) {
          bound = cexpr(in.window[1]);
          base = cexpr(in.window[0]);
          len = fmt::format("pto::imin(INT64_C({}), {} - ({}))", t.shape.at(in.axis), region, cexpr(in.offsets.at(in.axis)));
        }
        o += fmt::format("{}{{ const int64_t valid[] = {{{}}};{}\n", pad, valid_list(in), comment);
        o += fmt::format("{}  if (int32_t bad = pto::tscatter<{}>({}, {}, valid, {}, {}_shape, {}, {}, {}, {}, {}, {}, {}, "
                         "\"@{}: {}\")) return bad; }}\n",
                         pad, static_cast<int>(in.reduce), address(in), mem_stride_.at(in.memref), t.shape.size(), tn(t),
                         tn(tile(in.srcs[0])), tile(in.srcs[0]).shape.back(), tn(tile(in.srcs[1])), in.axis, bound,
                         base, len, f_.name, access_text(in, f_.tiles, memrefs_));
        return;
      }
      case OpForm::Matmul:
      case OpForm::MatmulAcc: {
        const TileDecl& t = tile(in.dst);
        bool acc = opcode_info(in.op).form == OpForm::MatmulAcc;
        const TileDecl& a = tile(in.srcs[acc ? 1 : 0]);
        const TileDecl& b = tile(in.srcs[acc ? 2 : 1]);
        // b may be a tile whose leading dims make K and trailing ones N (read as [K, N]).
        int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = t.shape.back();
        // The L0 cube tile blocks the product inside the tile (the whole tile when unset).
        const int64_t M0 = in.l0.empty() ? M : in.l0[0], K0 = in.l0.empty() ? K : in.l0[1],
                      N0 = in.l0.empty() ? N : in.l0[2];
        // Valid rows (set by expand_tiles where they may be fewer than the tile's) bound the product.
        std::string rows = in.valid.size() >= 2 ? ", " + cexpr(in.valid[in.valid.size() - 2]) : "";
        // Operands a load views strided (bf16 products): their row pitches follow the rows; then
        // the valid columns where they may be fewer than N (products of bf16 operands).
        const bool some_cols = in.valid.size() >= 2 && !(in.valid.back().as_const() && *in.valid.back().as_const() >= N);
        if (strided_tiles_.count(a.id) || strided_tiles_.count(b.id) || some_cols) {
          if (rows.empty()) rows = fmt::format(", {}", M);
          auto pitch = [&](const TileDecl& x) {
            return strided_tiles_.count(x.id) ? tn(x) + "_ld" : std::to_string(x.shape.back());
          };
          rows += fmt::format(", {}, {}", pitch(a), pitch(b));
          if (some_cols) rows += ", " + cexpr(in.valid.back());
        }
        if (in.b_trans) {
          o += fmt::format("{}pto::tmatmul_bt<{}, {}, {}, {}, {}, {}>({}, {}, {}{});{}\n", pad, acc ? "true" : "false",
                           ctype(t.dtype), M, K, N, ctype(b.dtype), tn(t), tn(a), tn(b), rows, comment);
          return;
        }
        if (in.panels > 0) {
          o += fmt::format("{}pto::tmatmul_panels<{}, {}, {}, {}, {}, {}, {}, {}>({}, {}, {}{});{}\n", pad,
                           acc ? "true" : "false", M, K, N, M0, K0, N0, in.panels, tn(t), tn(a), tn(b), rows, comment);
          return;
        }
        o += fmt::format("{}pto::tmatmul<{}, {}, {}, {}, {}, {}, {}, {}>({}, {}, {}{});{}\n", pad, acc ? "true" : "false",
                         ctype(t.dtype), M, K, N, M0, K0, N0, tn(t), tn(a), tn(b), rows, comment);
        return;
      }
      case OpForm::Select: {
        const TileDecl& t = tile(in.dst);
        std::string ty = ctype(t.dtype);
        std::vector<std::string> ops;
        size_t next = 0;
        for (int pos = 0; pos < 3; ++pos)
          ops.push_back(pos == in.scalar_pos ? constant(in, ty) : tn(tile(in.srcs.at(next++))));
        const char* form = in.scalar_pos == 1 ? "tselect_a" : in.scalar_pos == 2 ? "tselect_b" : "tselect";
        o += fmt::format("{}pto::{}<{}, {}>({}, {}, {}, {});{}\n", pad, form, ty, numel(t.shape), tn(t), ops[0], ops[1],
                         ops[2], comment);
        return;
      }
      case OpForm::RowExpand: {
        const TileDecl& t = tile(in.dst);
        o += fmt::format("{}pto::trowexpand<{}, {}, {}, {}>({}, {}, {});{}\n", pad, op_struct(in.op), ctype(t.dtype),
                         numel(t.shape) / t.shape.back(), t.shape.back(), tn(t), tn(tile(in.srcs[0])),
                         tn(tile(in.srcs[1])), comment);
        return;
      }
      case OpForm::Sort: {
        const TileDecl& src = tile(in.srcs[0]);
        const TileDecl& t = tile(in.dst);
        const int64_t n = src.shape.back();
        o += fmt::format("{}pto::tsort<{}, {}, {}, {}, {}>({}, {}, {});{}\n", pad, ctype(src.dtype), numel(src.shape) / n,
                         n, t.shape.back(), in.op == Opcode::TSORTDESC ? "true" : "false", tn(t), tn(src),
                         in.valid.empty() ? std::to_string(n) : cexpr(in.valid.back()), comment);
        return;
      }
      case OpForm::Scan: {
        const TileDecl& src = tile(in.srcs[0]);
        const size_t axis = static_cast<size_t>(in.axis);
        int64_t outer = 1, inner = 1;
        for (size_t d = 0; d < axis; ++d) outer *= src.shape[d];
        for (size_t d = axis + 1; d < src.shape.size(); ++d) inner *= src.shape[d];
        const std::string ty = ctype(src.dtype);
        const Identity id = opcode_info(opcode_info(in.op).base).identity;
        // The lanes shifted in hold the identity: 0 for sums, 1 for products.
        o += fmt::format("{}pto::tscan<{}, {}, {}, {}, {}>({}, {}, {}, {}({}));{}\n", pad, op_struct(in.op), ty, outer,
                         src.shape[axis], inner, tn(tile(in.dst)), tn(src), tn(tile(in.srcs[1])), ty,
                         id == Identity::One ? "1" : "0", comment);
        return;
      }
      case OpForm::ColExpand: {
        const TileDecl& t = tile(in.dst);
        o += fmt::format("{}pto::tcolexpand<{}, {}, {}, {}>({}, {}, {});{}\n", pad, op_struct(in.op), ctype(t.dtype),
                         t.shape[0], numel(t.shape) / t.shape[0], tn(t), tn(tile(in.srcs[0])), tn(tile(in.srcs[1])),
                         comment);
        return;
      }
      default: break;
    }
    if (is_reduction(in.op)) {
      const TileDecl& s = tile(in.srcs[0]);
      size_t r = s.shape.size();
      const OpForm form = opcode_info(in.op).form;
      size_t axis = in.axis >= 0 ? static_cast<size_t>(in.axis) : form == OpForm::RowReduce ? r - 1 : 0;
      int64_t outer = 1, inner = 1;
      for (size_t d = 0; d < axis; ++d) outer *= s.shape[d];
      for (size_t d = axis + 1; d < r; ++d) inner *= s.shape[d];
      std::string ty = ctype(s.dtype);
      std::string init;
      switch (opcode_info(opcode_info(in.op).base).identity) {
        case Identity::Zero: init = fmt::format("{}(0)", ty); break;
        case Identity::One: init = fmt::format("{}(1)", ty); break;
        case Identity::Lowest: init = fmt::format("pto::lowest<{}>()", ty); break;
        case Identity::Highest: init = fmt::format("pto::highest<{}>()", ty); break;
        case Identity::None: throw InternalError(fmt::format("{} has no start value", opcode_name(in.op)));
      }
      o += fmt::format("{}pto::treduce<{}, {}, {}, {}, {}>({}, {}, {}, {});{}\n", pad, op_struct(in.op), ty, outer,
                       s.shape[axis], inner, tn(tile(in.dst)), tn(s),
                       in.valid.empty() ? std::to_string(s.shape[axis]) : cexpr(in.valid.at(axis)), init, comment);
      return;
    }
    const TileDecl& t = tile(in.dst);
    int arity = opcode_num_srcs(in.op);
    if (arity == 1) {
      o += fmt::format("{}pto::tunary<{}, {}, {}>({}, {});{}\n", pad, op_struct(in.op), ctype(t.dtype), numel(t.shape),
                       tn(t), tn(tile(in.srcs[0])), comment);
      return;
    }
    // Binary: the operand type is the sources' (comparisons write 0/1 into an integer tile).
    const TileDecl& a = tile(in.srcs[0]);
    std::string ty = ctype(a.dtype);
    if (in.scalar_pos == 1) {
      o += fmt::format("{}pto::tbinary_rs<{}, {}, {}, {}>({}, {}, {});{}s\n", pad, op_struct(in.op), ctype(t.dtype), ty,
                       numel(t.shape), tn(t), tn(a), constant(in, ty), comment);
    } else if (in.scalar_pos == 0) {
      o += fmt::format("{}pto::tbinary_ls<{}, {}, {}, {}>({}, {}, {});{}s\n", pad, op_struct(in.op), ctype(t.dtype), ty,
                       numel(t.shape), tn(t), constant(in, ty), tn(a), comment);
    } else {
      o += fmt::format("{}pto::tbinary<{}, {}, {}, {}>({}, {}, {});{}\n", pad, op_struct(in.op), ctype(t.dtype), ty,
                       numel(t.shape), tn(t), tn(a), tn(tile(in.srcs[1])), comment);
    }
  }


  const InCoreFunction& f_;
  const std::vector<MemRef>& memrefs_;
  const FunctionBounds& bounds_;         // accesses checked where they run (checked_where_run)
  std::map<int, std::string> mem_ptr_, mem_stride_, mem_extent_;
  bool streams_ = false;                // some store streams (the kernel ends with a fence)
  std::set<int> strided_tiles_;         // view tiles some load may view with the source's row pitch
  std::set<int> view_tiles_;            // tiles some load may point at its source (const pointers)
};

}  // namespace

std::string emit_kernel(const InCoreFunction& f, const std::vector<MemRef>& memrefs, const FunctionBounds& bounds) {
  return KernelEmitter(f, memrefs, bounds).emit();
}

}  // namespace pypto::codegen
