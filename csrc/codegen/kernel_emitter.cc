#include "codegen/kernel_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "codegen/emit_util.h"
#include "ir/errors.h"
#include "ir/printer.h"

namespace pypto::codegen {

namespace {

/// Outputs from this size on are written with streaming stores (far beyond the caches).
constexpr int64_t kStreamStoreBytes = int64_t{16} << 20;
/// Elements per strip of a fused elementwise chain (each chain value takes a strip array of this size).
constexpr int64_t kStripElems = 512;

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
    plan_view_loads();
    // Buffers with disjoint live ranges share arena bytes (plan_buffers);
    // the pointers are not __restrict for that reason, the instructions' are.
    const bool planned = !f_.tile_offsets.empty() || !f_.local_offsets.empty();
    if (planned) arena_end_ = (f_.buffer_bytes + 63) / 64 * 64;
    // The body first: fusing a chain may move a tile's buffer past the planned arena (relocated_).
    std::string body;
    emit_body(body, f_.body, 1);
    for (const TileDecl& t : f_.tiles) {
      std::string ty = dtype_cpp_type(t.dtype);
      int64_t at = relocated_.count(t.id)          ? relocated_.at(t.id)
                   : f_.tile_offsets.count(t.id) ? f_.tile_offsets.at(t.id)
                                                 : offset;
      if (view_tiles_.count(t.id)) {
        // Only loaded and read: the tile may view its source instead of a copy (pto::tload_view).
        decls += fmt::format("  {}* {}_buf = reinterpret_cast<{}*>(arena + {});  // {}\n", ty, tn(t), ty, at,
                             tile_type(t));
        decls += fmt::format("  const {}* {} = {}_buf;\n", ty, tn(t), tn(t));
      } else {
        decls += fmt::format("  {}* {} = reinterpret_cast<{}*>(arena + {});  // {}\n", ty, tn(t), ty, at,
                             tile_type(t));
      }
      decls += fmt::format("  static const int64_t {}_shape[] = {{{}}};\n", tn(t), ints(t.shape));
      offset += tile_bytes(t);
    }
    const int64_t arena = planned ? std::max(f_.buffer_bytes, arena_end_) : offset;
    if (arena > 0) o += fmt::format("  alignas(64) static thread_local unsigned char arena[{}];\n", arena);
    o += decls;
    o += body;
    if (streams_) o += "  pto::stream_fence();\n";
    o += "  return 0;\n}\n\n";
    return o;
  }

 private:
  /// Finds the loads whose tile can view the source memory when it lies there densely
  /// (pto::tload_view) instead of copying it: the tile is written by loads only, has the source's
  /// element type, is never read before a load defines it (no value carried around a loop), and
  /// no instruction writes memory between the load and the last read of what it loaded.
  void plan_view_loads() {
    std::vector<const Instr*> seq;
    for_each_leaf(f_.body, [&](const Stmt& s) {
      if (auto* in = std::get_if<Instr>(&s.node)) seq.push_back(in);
    });
    std::set<int> excluded;
    for (const Instr* in : seq) {
      if (in->op == Opcode::TLOAD) {
        if (tile(in->dst).dtype != memrefs_.at(in->memref).dtype) excluded.insert(in->dst);
      } else if (in->dst >= 0) {
        excluded.insert(in->dst);
      }
    }
    // The load that defines each tile at each position; a read with none is loop-carried.
    std::map<int, size_t> current;
    std::map<size_t, size_t> last_read;  // load position -> position of the last read of its value
    for (size_t q = 0; q < seq.size(); ++q) {
      const Instr& in = *seq[q];
      for (int src : in.srcs) {
        auto it = current.find(src);
        if (it == current.end()) {
          excluded.insert(src);
        } else {
          last_read[it->second] = q;
        }
      }
      if (in.op == Opcode::TLOAD) current[in.dst] = q;
    }
    for (size_t p = 0; p < seq.size(); ++p) {
      const Instr& in = *seq[p];
      if (in.op != Opcode::TLOAD || excluded.count(in.dst)) continue;
      view_tiles_.insert(in.dst);
      const size_t end = last_read.count(p) ? last_read.at(p) : p;
      bool stored = false;
      for (size_t q = p + 1; q <= end && !stored; ++q) stored = writes_memory(seq[q]->op);
      if (!stored) view_loads_.insert(&in);
    }
  }

  /// True when stores into memref `id` should stream past the caches: a returned tensor of a
  /// known size of at least kStreamStoreBytes, which nothing in the program reads back.
  bool streams_to(int id) const {
    const MemRef& m = memrefs_.at(id);
    if (m.kind != MemKind::Output) return false;
    int64_t bytes = dtype_size(m.dtype);
    for (const Expr& d : m.shape) {
      if (!d.is_const()) return false;
      bytes *= d.value();
    }
    return bytes >= kStreamStoreBytes;
  }

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
    index_readers();
    const RunEmitter fused = [&](const std::vector<Stmt>& list, size_t i, const std::string& pad) {
      return emit_chain(o, list, i, pad);
    };
    emit_control(
        o, body, indent,
        [&](const Stmt& s, const std::string& pad) {
          if (auto* in = std::get_if<Instr>(&s.node)) emit_instr(o, *in, pad);
          else throw InternalError("CALL inside an InCore function");
        },
        &fused, kKernelFail);
  }

  // ---- Elementwise chains: consecutive elementwise instructions over tiles of one shape run as
  // one loop, each element going through the whole chain in registers. A tile the chain defines and
  // only the chain reads (after defining it) is never written to its buffer.

  /// The instructions reading each tile, over the whole function.
  void index_readers() {
    readers_.clear();
    read_memrefs_.clear();
    reads_view_ = false;
    for_each_leaf(f_.body, [&](const Stmt& s) {
      if (auto* in = std::get_if<Instr>(&s.node)) {
        for (int src : in->srcs) readers_[src].push_back(in);
        if (reads_memory(in->op)) {
          read_memrefs_.insert(in->memref);
          reads_view_ = reads_view_ || memrefs_.at(in->memref).kind == MemKind::View;
        }
      }
    });
    // Fused blocks name their variables _f...; a tile named so would clash.
    fusion_names_ok_ = std::none_of(f_.tiles.begin(), f_.tiles.end(),
                                    [](const TileDecl& t) { return t.name.rfind("_f", 0) == 0; });
  }

  static bool is_row_expand(Opcode op) { return opcode_info(op).form == OpForm::RowExpand; }
  static bool is_col_expand(Opcode op) { return opcode_info(op).form == OpForm::ColExpand; }
  /// The row or column broadcast operand of `in`, or -1.
  static int broadcast_operand(const Instr& in) {
    return (is_row_expand(in.op) || is_col_expand(in.op)) && in.srcs.size() == 2 ? in.srcs[1] : -1;
  }

  /// True when `in` computes each element of its destination from the same element of its tile
  /// operands (or a row / column broadcast operand, or a constant), all of the destination's type,
  /// on a tile of rank 1 or 2.
  bool elementwise(const Instr& in) const {
    switch (opcode_info(in.op).form) {
      case OpForm::Unary: case OpForm::Binary: case OpForm::RowExpand: case OpForm::ColExpand: break;
      default: return false;
    }
    if (in.dst < 0) return false;
    const TileDecl& t = tile(in.dst);
    if (t.shape.empty() || t.shape.size() > 2) return false;
    for (int src : in.srcs) {
      if (tile(src).dtype != t.dtype) return false;
    }
    if (is_row_expand(in.op) || is_col_expand(in.op)) return in.srcs.size() == 2 && t.shape.size() == 2;
    const int arity = opcode_num_srcs(in.op);
    if (arity == 1) return in.srcs.size() == 1 && tile(in.srcs[0]).shape == t.shape;
    if (arity != 2) return false;
    if (in.scalar_pos == 0 || in.scalar_pos == 1) return in.srcs.size() == 1 && tile(in.srcs[0]).shape == t.shape;
    return in.srcs.size() == 2 && tile(in.srcs[0]).shape == t.shape && tile(in.srcs[1]).shape == t.shape;
  }

  /// True when `in` sums the rows of a float, double or 32/64-bit integer tile shaped like
  /// `shape_tile` (rank 1 or 2, the whole row valid) into a tile of one element per row, of the
  /// same type.
  bool row_sum_of(const Instr& in, const TileDecl& shape_tile) const {
    if (in.op != Opcode::TROWSUM || in.srcs.size() != 1) return false;
    const TileDecl& src = tile(in.srcs[0]);
    const TileDecl& d = tile(in.dst);
    const int64_t C = shape_tile.shape.back();
    if (src.shape != shape_tile.shape || src.dtype != shape_tile.dtype || d.dtype != src.dtype) return false;
    // The accumulator is reduced by `omp simd`, which takes arithmetic types only.
    if (src.dtype != DataType::FP32 && src.dtype != DataType::DOUBLE && src.dtype != DataType::INT32 &&
        src.dtype != DataType::INT64) {
      return false;
    }
    if (numel(d.shape) != numel(src.shape) / C) return false;
    if (in.valid.empty()) return true;  // no valid extents: the whole tile
    const Expr& valid = in.valid.at(src.shape.size() - 1);
    return valid.is_const() && valid.value() >= C;
  }

  /// Gives tile `id` fresh bytes past the planned arena for the whole function.
  void relocate(int id) {
    relocated_[id] = arena_end_;
    arena_end_ += (tile_bytes(tile(id)) + 63) / 64 * 64;
  }

  /// True when `in` stores a whole tile the chain defines, of the chain's shape (rank 1 or 2, one
  /// row for rank 1), into a returned tensor of the same rank and type that this function never
  /// reads (nor any view): writing it strip by strip cannot change what the chain reads.
  bool fusible_store(const Instr& in, const std::vector<const Instr*>& chain) const {
    if (in.op != Opcode::TSTORE || in.srcs.size() != 1) return false;
    const TileDecl& t = tile(in.srcs[0]);
    const TileDecl& first = tile(chain[0]->dst);
    bool defined = false;
    for (const Instr* c : chain) defined = defined || c->dst == in.srcs[0];
    if (!defined || t.shape != first.shape || t.dtype != first.dtype) return false;
    const MemRef& m = memrefs_.at(in.memref);
    if (m.kind != MemKind::Output || m.dtype != t.dtype || in.offsets.size() != t.shape.size()) return false;
    if (t.shape.size() != 1 && t.shape.size() != 2) return false;
    for (size_t d = 0; d < in.valid.size(); ++d) {
      if (!in.valid[d].is_const() || in.valid[d].value() != t.shape[d]) return false;
    }
    return !read_memrefs_.count(in.memref) && !reads_view_;
  }

  /// True when reshape `in` only renumbers its source's elements (same type and count), so a reader
  /// may index the source instead.
  bool reshape_alias(const Instr& in) const {
    if (in.op != Opcode::TRESHAPE || in.srcs.size() != 1) return false;
    const TileDecl& d = tile(in.dst);
    const TileDecl& src = tile(in.srcs[0]);
    return d.dtype == src.dtype && numel(d.shape) == numel(src.shape);
  }

  /// Arena bytes [offset, offset + size) of a tile's buffer, when buffers were planned.
  std::optional<std::pair<int64_t, int64_t>> arena_range(int id) const {
    if (auto r = relocated_.find(id); r != relocated_.end()) return std::make_pair(r->second, r->second + tile_bytes(tile(id)));
    auto it = f_.tile_offsets.find(id);
    if (it == f_.tile_offsets.end()) return std::nullopt;
    return std::make_pair(it->second, it->second + tile_bytes(tile(id)));
  }

  /// Writes the chain starting at `body[i]` as one loop; returns the number of instructions it
  /// covers (0 when fewer than two elementwise instructions of one shape start there, or when
  /// planned buffers would make the single loop read a value after overwriting it).
  size_t emit_chain(std::string& o, const std::vector<Stmt>& body, size_t i, const std::string& pad) {
    std::vector<const Instr*> chain;
    // Loads and reshapes between chain instructions that neither read nor overwrite what the chain
    // touches move ahead of it (the row vectors of a norm's scale and shift).
    std::vector<const Instr*> hoisted;
    std::set<int> touched;
    size_t consumed = 0;
    // Tiles that get bytes of their own if the chain is emitted; until then they overlap nothing.
    std::set<int> relocating;
    auto range = [&](int t) { return relocating.count(t) ? std::nullopt : arena_range(t); };
    auto overlaps_touched = [&](int t) {
      auto rt = range(t);
      for (int u : touched) {
        auto ru = range(u);
        if (u == t || (rt && ru && rt->first < ru->second && ru->first < rt->second)) return true;
      }
      return false;
    };
    for (size_t j = i; j < body.size(); ++j) {
      auto* in = std::get_if<Instr>(&body[j].node);
      if (in == nullptr || bounds_.checked_where_run.count(in)) break;
      if (!elementwise(*in)) {
        // A load (even one that may view its source copies a box that is not dense) must not
        // overwrite what the chain has touched; a reshape only the chain reads is read through its
        // source and writes nothing.
        const bool writes = in->op == Opcode::TLOAD || !reshape_alias(*in);
        const bool movable = !chain.empty() && (in->op == Opcode::TLOAD || in->op == Opcode::TRESHAPE) &&
                             std::none_of(in->srcs.begin(), in->srcs.end(), [&](int t) { return touched.count(t); });
        if (!movable) break;
        // Its planned bytes may still hold what the chain reads: it gets bytes of its own.
        if (writes && overlaps_touched(in->dst) && arena_range(in->dst)) relocating.insert(in->dst);
        hoisted.push_back(in);
        continue;
      }
      if (!chain.empty()) {
        const TileDecl& first = tile(chain[0]->dst);
        const TileDecl& t = tile(in->dst);
        if (t.shape != first.shape || t.dtype != first.dtype) break;
      }
      bool clash = false;
      for (const Instr* h : hoisted) clash = clash || h->dst == in->dst;
      // A broadcast operand is read once per row or column, before the loop over it: the chain ends
      // before an instruction that reads one an earlier instruction wrote (a chain of [rows, 1]
      // tiles updating a row statistic), or that writes one it or an earlier instruction reads.
      const int bsrc = broadcast_operand(*in);
      clash = clash || (bsrc >= 0 && in->dst == bsrc);
      for (const Instr* c : chain) clash = clash || c->dst == bsrc || broadcast_operand(*c) == in->dst;
      if (clash) break;
      chain.push_back(in);
      touched.insert(in->dst);
      touched.insert(in->srcs.begin(), in->srcs.end());
      consumed = j - i + 1;
    }
    if (chain.empty() || !fusion_names_ok_) return 0;
    // Row sums of chain values right after the chain accumulate inside its loop.
    std::vector<const Instr*> sums;
    {
      const TileDecl& shape_tile = tile(chain[0]->dst);
      std::set<int> defined;
      for (const Instr* in : chain) defined.insert(in->dst);
      for (size_t j = i + consumed; j < body.size(); ++j) {
        auto* in = std::get_if<Instr>(&body[j].node);
        if (in == nullptr || !row_sum_of(*in, shape_tile) || !defined.count(in->srcs[0]) || defined.count(in->dst)) break;
        bool clash = false;
        for (const Instr* q : sums) clash = clash || q->dst == in->dst;
        if (clash) break;
        sums.push_back(in);
        consumed = j - i + 1;
      }
    }
    // A store of a chain value into a returned tensor right after them writes each strip as it is
    // computed (streaming, when the tensor streams).
    const Instr* store = nullptr;
    if (i + consumed < body.size()) {
      auto* in = std::get_if<Instr>(&body[i + consumed].node);
      if (in != nullptr && !bounds_.checked_where_run.count(in) && fusible_store(*in, chain)) {
        store = in;
        ++consumed;
      }
    }
    if (chain.size() + sums.size() + (store ? 1 : 0) < 2) return 0;
    // Only the moved instructions that precede the chain's last instruction are part of this run.
    std::vector<const Instr*> moved;
    std::map<int, int> alias;  // reshaped tile -> its source, read in its place
    for (size_t j = i; j < i + consumed; ++j) {
      const Instr* in = &std::get<Instr>(body[j].node);
      if (std::find(hoisted.begin(), hoisted.end(), in) == hoisted.end()) continue;
      bool chain_only = true;
      for (const Instr* r : readers_[in->dst]) chain_only = chain_only && std::count(chain.begin(), chain.end(), r) > 0;
      if (in->op == Opcode::TRESHAPE && reshape_alias(*in) && chain_only) {
        alias[in->dst] = in->srcs[0];
      } else {
        moved.push_back(in);
      }
    }
    auto through = [&](int t) {
      auto it = alias.find(t);
      return it == alias.end() ? t : it->second;
    };
    const TileDecl& shape_tile = tile(chain[0]->dst);
    const std::string ty = ctype(shape_tile.dtype);
    const int64_t C = shape_tile.shape.back();
    const int64_t R = numel(shape_tile.shape) / C;
    // Tiles defined in the chain whose every reader is a later chain instruction stay in registers.
    std::set<int> local;
    for (size_t k = 0; k < chain.size(); ++k) {
      const int d = chain[k]->dst;
      bool ok = true;
      for (const Instr* r : readers_[d]) {
        auto pos = std::find(chain.begin(), chain.end(), r);
        const bool fused_reader = std::find(sums.begin(), sums.end(), r) != sums.end() || r == store;
        ok = ok && (fused_reader || (pos != chain.end() && pos > chain.begin() + static_cast<std::ptrdiff_t>(k)));
      }
      for (size_t q = 0; q < chain.size() && ok; ++q) ok = q == k || chain[q]->dst != d;
      if (ok) local.insert(d);
    }
    // Every element is read and written at one index, so a written buffer may share its bytes with a
    // read one only exactly; a broadcast operand must not share bytes with a written buffer.
    std::set<int> written, same_index, broadcast, row_broadcast, defined;
    for (const Instr* in : chain) defined.insert(in->dst);
    std::set<int> in_registers;  // defined earlier in the chain: read from a variable, not memory
    for (const Instr* in : chain) {
      if (!local.count(in->dst)) written.insert(in->dst);
      for (size_t k = 0; k < in->srcs.size(); ++k) {
        if (in_registers.count(in->srcs[k])) continue;
        ((is_row_expand(in->op) || is_col_expand(in->op)) && k == 1 ? broadcast : same_index).insert(through(in->srcs[k]));
        if (is_row_expand(in->op) && k == 1) row_broadcast.insert(through(in->srcs[k]));
      }
      in_registers.insert(in->dst);
    }
    // A reshape read through its source needs that source unchanged by the chain.
    for (const auto& [dst, src] : alias) {
      if (defined.count(src)) return 0;
    }
    // Strips (the block's names start with _f; a function with a tile named so is not fused): a row
    // is processed in strips of S elements; each instruction runs over the strip as its own loop
    // (the loop pto's tile op would run, so it vectorises as well), reading and writing strip
    // arrays that stay in L1 instead of whole tiles. Without broadcasts or sums the tile is one
    // flat row.
    bool flat = sums.empty() && store == nullptr;
    for (const Instr* in : chain) flat = flat && !is_row_expand(in->op) && !is_col_expand(in->op);
    const int64_t cols = flat ? R * C : C, rows = flat ? 1 : R;
    int64_t S = 0;
    if (cols <= kStripElems) {
      S = cols;
    } else {
      for (int64_t d = kStripElems; d >= 64 && S == 0; d /= 2) S = cols % d == 0 ? d : 0;
    }
    if (S == 0) return 0;
    // A row sum is stored at the end of its row, after the row's broadcast operands were read at
    // its start: it may take exactly the bytes of a row operand, and no other chain tile's. A
    // written tile whose planned bytes break these rules gets bytes of its own.
    for (const Instr* q : sums) {
      auto rq = range(q->dst);
      bool clash = false;
      for (const std::set<int>* tiles : {&same_index, &broadcast, &written}) {
        for (int t : *tiles) {
          auto rt = range(t);
          if (!rq || !rt || rq->second <= rt->first || rt->second <= rq->first) continue;
          if (tiles == &broadcast && row_broadcast.count(t) && *rq == *rt) continue;
          clash = true;
        }
      }
      if (clash) relocating.insert(q->dst);
    }
    for (int w : written) {
      auto rw = range(w);
      if (!rw) continue;
      bool clash = false;
      for (const std::set<int>* reads : {&same_index, &broadcast}) {
        for (int r : *reads) {
          auto rr = range(r);
          if (r == w || !rr || rr->second <= rw->first || rw->second <= rr->first) continue;
          clash = clash || reads == &broadcast || *rr != *rw;
        }
      }
      if (clash) relocating.insert(w);
    }
    for (int t : relocating) relocate(t);
    for (const Instr* in : moved) emit_instr(o, *in, pad);
    std::vector<std::string> names;
    for (const Instr* in : chain) names.push_back(std::string(opcode_name(in->op)));
    for (const Instr* in : sums) names.push_back(std::string(opcode_name(in->op)));
    const bool stream = store != nullptr && streams_to(store->memref);
    if (store != nullptr) names.push_back(stream ? "tstore (streaming)" : "tstore");
    streams_ = streams_ || stream;
    o += fmt::format("{}{{  // fused: {}\n", pad, list(names));
    for (size_t k = 0; k < chain.size(); ++k) o += fmt::format("{}  alignas(64) {} _fs{}[{}];\n", pad, ty, k, S);
    o += fmt::format("{}  for (int64_t _fr = 0; _fr < {}; ++_fr) {{\n", pad, rows);
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
    o += fmt::format("{}    for (int64_t _fc0 = 0; _fc0 < {}; _fc0 += {}) {{\n", pad, cols, S);
    o += fmt::format("{}      const int64_t _fbase = _fr * {} + _fc0;\n", pad, cols);
    std::map<int, std::string> value;  // tile -> the strip array holding it, once the chain defines it
    auto operand = [&](int t) {
      return value.count(t) ? value.at(t) + "[_fk]" : fmt::format("{}[_fbase + _fk]", tn(tile(through(t))));
    };
    const std::string loop = fmt::format("{}      for (int64_t _fk = 0; _fk < {}; ++_fk) ", pad, S);
    for (size_t k = 0; k < chain.size(); ++k) {
      const Instr& in = *chain[k];
      std::string expr;
      if (is_row_expand(in.op)) {
        expr = fmt::format("{}::f({}, {})", op_struct(in.op), operand(in.srcs[0]), row_operand.at(in.srcs[1]));
      } else if (is_col_expand(in.op)) {
        expr = fmt::format("{}::f({}, {}[_fc0 + _fk])", op_struct(in.op), operand(in.srcs[0]), tn(tile(through(in.srcs[1]))));
      } else if (opcode_num_srcs(in.op) == 1) {
        expr = fmt::format("{}::f({})", op_struct(in.op), operand(in.srcs[0]));
      } else if (in.scalar_pos == 1) {
        expr = fmt::format("{}::f({}, {})", op_struct(in.op), operand(in.srcs[0]), constant(in, ty));
      } else if (in.scalar_pos == 0) {
        expr = fmt::format("{}::f({}, {})", op_struct(in.op), constant(in, ty), operand(in.srcs[0]));
      } else {
        expr = fmt::format("{}::f({}, {})", op_struct(in.op), operand(in.srcs[0]), operand(in.srcs[1]));
      }
      const std::string v = fmt::format("_fs{}", k);
      std::string write_back =
          local.count(in.dst) ? "" : fmt::format(" {}[_fbase + _fk] = {}[_fk];", tn(tile(in.dst)), v);
      o += fmt::format("{}#pragma GCC ivdep\n", pad);
      o += fmt::format("{}{{ {}[_fk] = {}({});{} }}  // {}\n", loop, v, ty, expr, write_back, opcode_name(in.op));
      value[in.dst] = v;
    }
    if (store != nullptr) {
      o += fmt::format("{}      pto::store_strip<{}, {}>({} + _fc0 * {}, {}, {});  // tstore\n", pad,
                       stream ? "true" : "false", S, drow, dstride, dstride, value.at(store->srcs[0]));
    }
    for (size_t q = 0; q < sums.size(); ++q) {
      o += fmt::format("{}#pragma omp simd reduction(+: {})\n", pad, accs[q]);
      o += fmt::format("{}{} += {}[_fk];  // {}\n", loop, accs[q], value.at(sums[q]->srcs[0]), opcode_name(sums[q]->op));
    }
    o += fmt::format("{}    }}\n", pad);
    for (size_t q = 0; q < sums.size(); ++q) o += fmt::format("{}    {}[_fr] = {};\n", pad, tn(tile(sums[q]->dst)), accs[q]);
    o += fmt::format("{}  }}\n{}}}\n", pad, pad);
    return consumed;
  }

  static std::string op_struct(Opcode op) { return opcode_functor(op); }

  static std::string ctype(DataType dt) { return dtype_cpp_type(dt); }

  /// The constant operand of an instruction as a C++ value of type `ty`.
  static std::string constant(const Instr& in, const std::string& ty) {
    if (in.scalar_expr) return fmt::format("static_cast<{}>({})", ty, cexpr(*in.scalar_expr));
    if (std::isinf(in.scalar)) return fmt::format("static_cast<{}>({}__builtin_inf())", ty, in.scalar < 0 ? "-" : "");
    if (std::isnan(in.scalar)) return fmt::format("static_cast<{}>(__builtin_nan(\"\"))", ty);
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
        const bool view = view_loads_.count(&in) > 0;
        const std::string buf = view_tile ? tn(t) + "_buf" : tn(t);
        std::string call = fmt::format("<{}, {}>({}, {}, {}_shape, {}, {}, valid)", ctype(t.dtype), t.shape.back(), buf,
                                       t.shape.size(), tn(t), address(in), mem_stride_.at(in.memref));
        if (view) {
          o += fmt::format("{}  {} = pto::tload_view{}; }}\n", pad, tn(t), call);
        } else {
          if (view_tile) o += fmt::format("{}  {} = {};\n", pad, tn(t), buf);
          o += fmt::format("{}  pto::tload{}; }}\n", pad, call);
        }
        return;
      }
      case OpForm::Store: {
        const TileDecl& t = tile(in.srcs[0]);
        const bool stream = streams_to(in.memref);
        streams_ = streams_ || stream;
        o += fmt::format("{}{{ const int64_t valid[] = {{{}}};{}\n", pad, valid_list(in), comment);
        o += fmt::format("{}  pto::{}<{}, {}>({}, {}, valid, {}, {}_shape, {}); }}\n", pad,
                         stream ? "tstore_stream" : "tstore", ctype(t.dtype), t.shape.back(), address(in),
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
        o += fmt::format("{}  if (int32_t bad = pto::tgather({}, {}, {}_shape, valid, {}, {}, {}, {}, {}[{}], \"@{}: {}\")) "
                         "return bad; }}\n",
                         pad, tn(t), t.shape.size(), tn(t), address(in), mem_stride_.at(in.memref), tn(tile(in.srcs[0])),
                         in.axis, mem_extent_.at(in.memref), in.axis, f_.name, access_text(in, f_.tiles, memrefs_));
        return;
      }
      case OpForm::Scatter: {
        const TileDecl& t = tile(in.srcs[0]);
        o += fmt::format("{}{{ const int64_t valid[] = {{{}}};{}\n", pad, valid_list(in), comment);
        o += fmt::format("{}  if (int32_t bad = pto::tscatter<{}>({}, {}, valid, {}, {}_shape, {}, {}, {}, {}[{}], "
                         "\"@{}: {}\")) return bad; }}\n",
                         pad, static_cast<int>(in.reduce), address(in), mem_stride_.at(in.memref), t.shape.size(), tn(t),
                         tn(t), tn(tile(in.srcs[1])), in.axis, mem_extent_.at(in.memref), in.axis, f_.name,
                         access_text(in, f_.tiles, memrefs_));
        return;
      }
      case OpForm::Matmul:
      case OpForm::MatmulAcc: {
        const TileDecl& t = tile(in.dst);
        bool acc = opcode_info(in.op).form == OpForm::MatmulAcc;
        const TileDecl& a = tile(in.srcs[acc ? 1 : 0]);
        const TileDecl& b = tile(in.srcs[acc ? 2 : 1]);
        int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
        // The L0 cube tile blocks the product inside the tile (the whole tile when unset).
        const int64_t M0 = in.l0.empty() ? M : in.l0[0], K0 = in.l0.empty() ? K : in.l0[1],
                      N0 = in.l0.empty() ? N : in.l0[2];
        o += fmt::format("{}pto::tmatmul<{}, {}, {}, {}, {}, {}, {}, {}>({}, {}, {});{}\n", pad, acc ? "true" : "false",
                         ctype(t.dtype), M, K, N, M0, K0, N0, tn(t), tn(a), tn(b), comment);
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
  std::set<int> view_tiles_;            // tiles declared as views (const pointers)
  std::set<const Instr*> view_loads_;   // their loads that may view the source
  std::map<int, std::vector<const Instr*>> readers_;  // tile -> instructions reading it
  std::set<int> read_memrefs_;          // memrefs some instruction of the function reads
  bool reads_view_ = false;             // some instruction reads a view memref
  bool fusion_names_ok_ = true;         // no tile name clashes with a fused block's names
  std::map<int, int64_t> relocated_;    // tiles moved past the planned arena (arena offset)
  int64_t arena_end_ = 0;               // end of the planned arena plus relocated tiles
};

}  // namespace

std::string emit_kernel(const InCoreFunction& f, const std::vector<MemRef>& memrefs, const FunctionBounds& bounds) {
  return KernelEmitter(f, memrefs, bounds).emit();
}

}  // namespace pypto::codegen
