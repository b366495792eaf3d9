#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include "ir/errors.h"

namespace pypto {

namespace {

std::string exprs(const std::vector<Expr>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s;
}

/// Dims joined by "x"; a symbolic dim is parenthesized (unless its text
/// already is) so that "(M)x64" cannot be read as one name.
std::string dims_x(const std::vector<Expr>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string d = shape[i].str();
    if (!shape[i].is_const() && (d.empty() || d[0] != '(')) d = "(" + d + ")";
    s += (i ? "x" : "") + d;
  }
  return s;
}


/// Resolves ids to names while printing statements.
struct Names {
  const std::vector<MemRef>* memrefs = nullptr;
  const std::vector<TileDecl>* tiles = nullptr;
  const std::vector<InCoreFunction>* functions = nullptr;
  /// Optional: memref id -> the name it has inside an InCore function.
  std::function<std::string(int)> memref_name;

  std::string memref(int id) const {
    if (memref_name) return memref_name(id);
    if (!memrefs || id < 0 || id >= static_cast<int>(memrefs->size())) return fmt::format("<memref {}>", id);
    return (*memrefs)[id].name;
  }
  const TileDecl* tile(int id) const {
    if (!tiles) return nullptr;
    for (const auto& t : *tiles)
      if (t.id == id) return &t;
    return nullptr;
  }
  std::string tile_name(int id) const {
    const TileDecl* t = tile(id);
    return t ? t->name : fmt::format("<tile {}>", id);
  }
};

void print_stmts(std::string& out, const std::vector<Stmt>& stmts, const Names& n, int indent);

void print_instr(std::string& out, const Instr& in, const Names& n, const std::string& pad) {
  const TileDecl* dst = n.tile(in.dst);
  std::string type = dst ? tile_type(*dst) : "";
  std::string valid = in.valid.empty() ? "" : fmt::format(" valid [{}]", exprs(in.valid));
  switch (in.op) {
    case Opcode::TLOAD:
      out += fmt::format("{}%{} = tload %{}[{}]{}{}{} : {}\n", pad, n.tile_name(in.dst), n.memref(in.memref),
                         exprs(in.offsets), valid, in.view ? (in.strided ? " view strided" : " view") : "",
                         in.panels > 0 ? fmt::format(" panels={}", in.panels) : std::string(), type);
      return;
    case Opcode::TSTORE:
      out += fmt::format("{}tstore %{}, %{}[{}]{}{}{}\n", pad, n.tile_name(in.srcs.at(0)), n.memref(in.memref),
                         exprs(in.offsets), valid, in.stream ? " stream" : "", in.atomic ? " atomic_add" : "");
      return;
    case Opcode::TFILL:
      out += fmt::format("{}%{} = tfill {} : {}\n", pad, n.tile_name(in.dst),
                         in.scalar_expr ? in.scalar_expr->str() : scalar_text(in.scalar), type);
      return;
    case Opcode::TGATHER:
      out += fmt::format("{}%{} = tgather %{}[{}], %{} axis={}{} : {}\n", pad, n.tile_name(in.dst), n.memref(in.memref),
                         exprs(in.offsets), n.tile_name(in.srcs.at(0)), in.axis, valid, type);
      return;
    case Opcode::TSCATTER:
      out += fmt::format("{}tscatter %{}, %{}[{}], %{} axis={}{}{}{}\n", pad, n.tile_name(in.srcs.at(1)),
                         n.memref(in.memref), exprs(in.offsets), n.tile_name(in.srcs.at(0)), in.axis,
                         in.reduce == ScatterReduce::None ? "" : std::string(" reduce=") + scatter_reduce_name(in.reduce),
                         in.window.empty() ? std::string() : fmt::format(" window=[{}]", exprs(in.window)), valid);
      return;
    case Opcode::TARANGE:
      out += fmt::format("{}%{} = tarange {}, {}, {} : {}\n", pad, n.tile_name(in.dst), scalar_text(in.scalar),
                         in.step, in.offsets.empty() ? std::string("0") : in.offsets[0].str(), type);
      return;
    case Opcode::TRANDOM: {
      // offsets: the tile's first stream position, a row stride per leading tile dim, the block base
      // (printed when not 0, as the Philox rounds when not 10).
      const size_t n_off = in.offsets.size();
      const bool has_base = n_off >= 2;
      const std::vector<Expr> strides(in.offsets.begin() + (n_off == 0 ? 0 : 1),
                                      in.offsets.end() - (has_base ? 1 : 0));
      const bool base_zero = !has_base || (in.offsets.back().is_const() && in.offsets.back().value() == 0);
      out += fmt::format("{}%{} = trandom {}, key {}, counter {}, {} strides [{}]{}{} : {}\n", pad, n.tile_name(in.dst),
                         in.random.normal ? std::string("normal") : fmt::format("uniform {}", in.random.mantissa),
                         in.random.key, in.random.counter, n_off == 0 ? std::string("0") : in.offsets[0].str(),
                         exprs(strides), base_zero ? "" : ", block0 " + in.offsets.back().str(),
                         in.random.rounds == 10 ? "" : fmt::format(", rounds {}", in.random.rounds), type);
      return;
    }
    default: {
      // Operands in position order; a constant operand is written inline and
      // the mnemonic gets PTO's "s" suffix (tadds, tmuls, ...).
      std::string srcs;
      size_t next = 0;
      int total = opcode_num_srcs(in.op);
      for (int pos = 0; pos < total; ++pos) {
        std::string item;
        if (pos == in.scalar_pos) item = in.scalar_expr ? in.scalar_expr->str() : scalar_text(in.scalar);
        else if (next < in.srcs.size()) item = "%" + n.tile_name(in.srcs[next++]);
        srcs += (pos ? ", " : "") + item;
      }
      std::string mnemonic = std::string(opcode_name(in.op)) + (in.scalar_pos >= 0 ? "s" : "");
      std::string axis = in.axis >= 0 ? fmt::format(" axis={}", in.axis) : "";
      if (in.round_to) axis += fmt::format(" to={}", dtype_pto_name(*in.round_to));
      if (in.b_trans) axis += " b_trans";
      if (!in.l0.empty()) axis += fmt::format(" l0 [{}]", fmt::join(in.l0, ", "));
      const std::string panels = in.panels > 0 ? fmt::format(" panels={}", in.panels) : std::string();
      out += fmt::format("{}%{} = {} {}{}{}{} : {}\n", pad, n.tile_name(in.dst), mnemonic, srcs, axis, valid, panels,
                         type);
    }
  }
}

void print_call(std::string& out, const Call& c, const Names& n, const std::string& pad) {
  const InCoreFunction* f =
      (n.functions && c.callee >= 0 && c.callee < static_cast<int>(n.functions->size())) ? &(*n.functions)[c.callee]
                                                                                         : nullptr;
  std::string args;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const CallArg& a = c.args[i];
    std::string pname = f && i < f->params.size() ? f->params[i].name : fmt::format("arg{}", i);
    args += fmt::format("{}%{} -> %{}[{}; {}]", i ? ", " : "", pname, n.memref(a.memref), exprs(a.offsets),
                        exprs(a.extents));
  }
  for (size_t i = 0; i < c.scalars.size(); ++i) {
    std::string pname = f && i < f->scalar_params.size() ? f->scalar_params[i] : fmt::format("s{}", i);
    args += fmt::format("{}%{} -> {}", args.empty() ? "" : ", ", pname, c.scalars[i].str());
  }
  out += fmt::format("{}CALL @{}({})\n", pad, f ? f->name : fmt::format("<function {}>", c.callee), args);
}

void print_loop(std::string& out, const Loop& l, const Names& n, int indent) {
  std::string pad(indent * 2, ' ');
  std::string note = l.parallel ? fmt::format(" parallel dim={} tile={}", l.dim, l.tile) : "";
  std::string range;
  if (l.range) {
    range = fmt::format(" max_range={} min_range={}", l.range->max_range, l.range->min_range);
    if (!l.range->tile_levels.empty()) {
      std::string levels;
      for (auto it = l.range->tile_levels.rbegin(); it != l.range->tile_levels.rend(); ++it)
        levels += fmt::format("{}{}:{}", levels.empty() ? "" : ",", it->first, it->second);
      range += fmt::format(" tile_levels={{{}}}", levels);
    }
  }
  out += fmt::format("{}FOR %{}:idx, {}:idx, {}:idx, {}:idx{}{}\n", pad, l.var, l.start.str(), l.stop.str(),
                     l.step.str(), range, note);
  print_stmts(out, l.body, n, indent + 1);
  out += pad + "ENDFOR\n";
}

void print_stmts(std::string& out, const std::vector<Stmt>& stmts, const Names& n, int indent) {
  std::string pad(indent * 2, ' ');
  for (const Stmt& s : stmts) {
    if (auto* in = std::get_if<Instr>(&s.node)) print_instr(out, *in, n, pad);
    else if (auto* l = std::get_if<Loop>(&s.node)) print_loop(out, *l, n, indent);
    else if (auto* f = std::get_if<Fused>(&s.node)) {
      auto names = [&](const char* key, const std::vector<int>& ids) -> std::string {
        if (ids.empty()) return "";
        std::string s;
        for (int id : ids) s += (s.empty() ? "%" : ", %") + n.tile_name(id);
        return fmt::format(" {}=[{}]", key, s);
      };
      out += fmt::format("{}FUSED rows={} cols={} strip={}{}{}{}\n", pad, f->rows, f->cols, f->strip,
                         names("registers", f->registers), names("aliases", f->aliases), names("fast", f->fast));
      print_stmts(out, f->body, n, indent + 1);
      out += pad + "ENDFUSED\n";
    }
    else if (auto* c = std::get_if<IfThen>(&s.node)) {
      out += fmt::format("{}IF {}\n", pad, c->cond.str());
      print_stmts(out, c->then_body, n, indent + 1);
      if (!c->else_body.empty()) {
        out += pad + "ELSE\n";
        print_stmts(out, c->else_body, n, indent + 1);
      }
      out += pad + "ENDIF\n";
    } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
      std::string idx;
      for (const Expr& e : r->index) idx += (idx.empty() ? "" : ", ") + e.str();
      out += fmt::format("{}READ %{} <- %{}[{}]\n", pad, r->var, n.memref(r->memref), idx);
    } else print_call(out, std::get<Call>(s.node), n, pad);
  }
}

/// Lists memrefs; a local buffer is listed only while some function owns it.
void print_memrefs(std::string& out, const std::vector<MemRef>& memrefs,
                   const std::vector<InCoreFunction>* functions = nullptr) {
  for (const MemRef& m : memrefs) {
    if (m.kind == MemKind::Local && functions) {
      bool owned = false;
      for (const auto& f : *functions)
        owned |= std::find(f.locals.begin(), f.locals.end(), m.id) != f.locals.end();
      if (!owned) continue;
    }
    std::string extra;
    if (m.view && m.view->reshape) extra = fmt::format(" reshape of %{}", memrefs[m.view->base].name);
    else if (m.view) extra = fmt::format(" of %{} at [{}] dims [{}]", memrefs[m.view->base].name, exprs(m.view->offsets),
                                         fmt::join(m.view->map, ", "));
    out += fmt::format("  %{} : {}  // {}{}\n", m.name, memref_type(m), memkind_name(m.kind), extra);
  }
}

/// A fused op's name in a function's `fused=[...]` list: bare when it is a name, else quoted
/// (a double quote inside becomes a single one: the list only informs).
std::string fused_name(const std::string& s) {
  bool bare = !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0]));
  for (char c : s) bare = bare && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  if (bare) return s;
  std::string q = s;
  std::replace(q.begin(), q.end(), '"', '\'');
  return "\"" + q + "\"";
}

std::string id_list(const std::vector<MemRef>& memrefs, const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", %" : "%") + memrefs.at(ids[i]).name;
  return s;
}

/// An InCore function in .pto syntax; `globals` names the caller's memrefs.
void print_function(std::string& out, const InCoreFunction& f, const std::vector<MemRef>& memrefs) {
  std::string params;
  for (const RegionParam& p : f.params) {
    params += fmt::format("{}%{}: !pto.memref<gm,{},{}>{}", params.empty() ? "" : ", ", p.name,
                          dims_x(p.max_extents), dtype_pto_name(p.dtype),
                          p.accumulate ? " accum" : p.is_output ? " out" : "");
  }
  for (const std::string& s : f.scalar_params) params += fmt::format("{}%{}: index", params.empty() ? "" : ", ", s);
  std::string attrs = fmt::format(" buffer_bytes={}", f.buffer_bytes);
  if (!f.fused_ops.empty()) {
    std::string ops;
    for (size_t i = 0; i < f.fused_ops.size(); ++i) ops += (i ? ", " : "") + fused_name(f.fused_ops[i]);
    attrs += fmt::format(" fused=[{}]", ops);
  }
  out += fmt::format("incore func @{}({}){} {{\n", f.name, params, attrs);
  for (int id : f.locals) {
    const MemRef& m = memrefs.at(id);
    out += fmt::format("  %{} = alloc_local : {}\n", m.name, memref_type(m));
  }
  for (const TileDecl& t : f.tiles) out += fmt::format("  %{} = alloc_tile : {}\n", t.name, tile_type(t));
  Names n;
  n.memrefs = &memrefs;
  n.tiles = &f.tiles;
  n.memref_name = [&](int id) {
    for (const RegionParam& p : f.params)
      if (p.memref == id) return p.name;
    return id >= 0 && id < static_cast<int>(memrefs.size()) ? memrefs[id].name : fmt::format("<memref {}>", id);
  };
  print_stmts(out, f.body, n, 1);
  out += "  return\n}\n";
}

}  // namespace

std::string scalar_text(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (std::isnan(v)) return "nan";
  return fmt::format("{}", v);
}

const char* memkind_name(MemKind k) {
  switch (k) {
    case MemKind::Input: return "input";
    case MemKind::Output: return "output";
    case MemKind::Workspace: return "workspace";
    case MemKind::Local: return "local";
    case MemKind::View: return "view";
  }
  return "?";
}

std::string tile_type(const TileDecl& t) {
  std::string s;
  for (size_t i = 0; i < t.shape.size(); ++i) s += fmt::format("{}{}", i ? "x" : "", t.shape[i]);
  return fmt::format("!pto.tile<{}x{}>", s, dtype_pto_name(t.dtype));
}

std::string memref_type(const MemRef& m) {
  return fmt::format("!pto.memref<{},{},{}>", m.kind == MemKind::Local ? "local" : "gm", dims_x(m.shape),
                     dtype_pto_name(m.dtype));
}

std::string print(const TensorGraph& g) {
  std::string out = fmt::format("tensor_graph @{}(", g.name);
  for (size_t i = 0; i < g.params.size(); ++i) {
    const TensorValue& v = g.value(g.params[i]);
    out += fmt::format("{}%{}: {}{}", i ? ", " : "", v.name, dtype_name(v.dtype), shape_str(v.shape));
  }
  out += ")";
  if (!g.dyn_dims.empty()) {
    std::string d;
    for (size_t i = 0; i < g.dyn_dims.size(); ++i) d += (i ? ", " : "") + g.dyn_dims[i];
    out += fmt::format(" dyn({})", d);
  }
  out += " {\n";
  std::vector<int> open;  // regions printed as open blocks
  auto pad_of = [&] { return std::string(2 + 2 * open.size(), ' '); };
  auto print_reads = [&](int region) {
    for (const ScalarRead& r : g.reads) {
      if (r.region != region) continue;
      std::string idx;
      for (const Expr& e : r.index) idx += (idx.empty() ? "" : ", ") + e.str();
      out += fmt::format("{}%{} = read %{}[{}]\n", pad_of(), r.var, g.value(r.value).name, idx);
    }
  };
  print_reads(-1);
  auto close_one = [&] {
    open.pop_back();
    out += pad_of() + "}\n";
  };
  for (const TensorOp& op : g.ops) {
    std::vector<int> path = region_path(g.regions, op.region);
    size_t common = 0;
    while (common < open.size() && common < path.size() && open[common] == path[common]) ++common;
    while (open.size() > common) close_one();
    for (size_t i = common; i < path.size(); ++i) {
      const Region& r = g.regions[path[i]];
      if (r.kind == Region::Kind::Loop)
        out += fmt::format("{}for %{} in range({}, {}, {}) {{\n", pad_of(), r.var, r.start.str(), r.stop.str(), r.step.str());
      else
        out += fmt::format("{}{} ({}) {{\n", pad_of(), r.kind == Region::Kind::Then ? "if" : "else of if", r.cond.str());
      open.push_back(path[i]);
      print_reads(path[i]);
    }
    std::string opad = pad_of();
    const OpInfo& info = op_info(op.kind);
    const TensorValue& o = g.value(op.output);
    std::string ins;
    for (size_t i = 0; i < op.inputs.size(); ++i) ins += (i ? ", %" : "%") + g.value(op.inputs[i]).name;
    std::string attrs;
    if (info.cls == OpClass::Reduce || info.cls == OpClass::Scan) {
      std::string dims = op.dims.size() <= 1 ? std::to_string(op.dim) : "[" + fmt::format("{}", fmt::join(op.dims, ", ")) + "]";
      attrs = fmt::format(", dim={}{}", dims, op.keepdim ? ", keepdim" : "");
    }
    if (info.cls == OpClass::Sort)
      attrs = fmt::format(", k={}{}", o.shape.back().str(), op.descending ? ", descending" : "");
    for (const Operand& o : op.operands)
      if (!o.is_tensor()) attrs += ", " + (o.sym ? o.sym->str() : scalar_text(o.constant));
    if (op.covered) attrs += ", covered";
    if (op.kind == TensorOpKind::Random)
    {
      attrs += op.random.normal ? fmt::format(", normal, key={}, counter={}", op.random.key, op.random.counter)
                                : fmt::format(", uniform, key={}, counter={}, mantissa={}", op.random.key,
                                              op.random.counter, op.random.mantissa);
      if (op.random.rounds != 10) attrs += fmt::format(", rounds={}", op.random.rounds);
    }
    if (info.cls == OpClass::Attention) {
      attrs += fmt::format(", scale={}, rows={}, key_block={}", scalar_text(op.scale), op.cube_tile[0], op.cube_tile[2]);
      if (op.causal) attrs += fmt::format(", causal={}", op.causal->str());
    }
    if (info.cls == OpClass::Conv)
      attrs += fmt::format(", kernel=[{}, {}], dilations=[{}, {}], tile=[cout {}, cin {}, rows {}]", op.conv[0],
                           op.conv[1], op.conv[2], op.conv[3], op.cube_tile[0], op.cube_tile[1], op.cube_tile[2]);
    std::string loc = op.loc.file.empty() ? "" : fmt::format("  @ {}", op.loc.str());
    std::string valid;
    for (size_t d = 0; d < o.shape.size(); ++d)
      if (!o.valid[d].equals(o.shape[d])) valid = " valid " + shape_str(o.valid);
    std::string tile = info.cls == OpClass::View || info.cls == OpClass::Attention || info.cls == OpClass::Conv
                           ? ""
                           : "  tile " + ints_str(op.tile_shape);
    if (o.view && !o.view->reshape)
      attrs += fmt::format(", offsets=[{}], dims=[{}]", exprs(o.view->offsets), fmt::join(o.view->map, ", "));
    out += fmt::format("{}%{} = {}({}{}) : {}{}{}{}{}\n", opad, o.name, info.name, ins, attrs, dtype_name(o.dtype),
                       shape_str(o.shape), valid, tile, loc);
  }
  while (!open.empty()) close_one();
  std::string outs;
  for (size_t i = 0; i < g.outputs.size(); ++i) outs += (i ? ", %" : "%") + g.value(g.outputs[i]).name;
  out += fmt::format("  return {}\n}}\n", outs);
  return out;
}

std::string print(const TileGraph& g) {
  std::string out = fmt::format("tile_graph @{}(params {}; outputs {}) {{\n", g.name, id_list(g.memrefs, g.params),
                                id_list(g.memrefs, g.outputs));
  print_memrefs(out, g.memrefs);
  for (const TileDecl& t : g.tiles) out += fmt::format("  %{} = alloc_tile : {}\n", t.name, tile_type(t));
  Names n;
  n.memrefs = &g.memrefs;
  n.tiles = &g.tiles;
  for (const TileNest& nest : g.nests) {
    out += fmt::format("  nest @{}:{}\n", nest.name, nest.note.empty() ? "" : "  // " + nest.note);
    print_stmts(out, nest.body, n, 2);
  }
  return out + "}\n";
}

std::string print(const BlockGraph& g) {
  std::string out = fmt::format("block_graph @{}(params {}; outputs {}) {{\n", g.name, id_list(g.memrefs, g.params),
                                id_list(g.memrefs, g.outputs));
  print_memrefs(out, g.memrefs, &g.functions);
  for (const InCoreFunction& f : g.functions) print_function(out, f, g.memrefs);
  Names n;
  n.memrefs = &g.memrefs;
  n.functions = &g.functions;
  for (const BlockLaunch& launch : g.launches) {
    std::string grid;
    for (const Loop& l : launch.grid)
      grid += fmt::format("{}%{} < {} (dim {}, tile {})", grid.empty() ? "" : ", ", l.var, l.stop.str(), l.dim, l.tile);
    out += fmt::format("launch @{} over [{}]:\n", g.functions.at(launch.function).name, grid);
    print_call(out, launch.call, n, "  ");
  }
  return out + "}\n";
}

std::string print(const ExecutionGraph& g) {
  std::string out = fmt::format("execution_graph @{}(params {}; outputs {}) {{\n", g.name,
                                id_list(g.memrefs, g.params), id_list(g.memrefs, g.outputs));
  print_memrefs(out, g.memrefs, &g.functions);
  Names n;
  n.memrefs = &g.memrefs;
  n.functions = &g.functions;
  print_stmts(out, g.orchestration, n, 1);
  return out + "}\n";
}

std::string print_pto(const ExecutionGraph& g) {
  std::string out = fmt::format("module @{} entry @{}\n\n", g.module.empty() ? g.name : g.module, g.name);
  for (const InCoreFunction& f : g.functions) {
    print_function(out, f, g.memrefs);
    out += "\n";
  }
  std::string params;
  for (int id : g.params) params += fmt::format("{}%{}: {}", params.empty() ? "" : ", ", g.memrefs[id].name,
                                                memref_type(g.memrefs[id]));
  for (int id : g.outputs) params += fmt::format("{}%{}: {} out", params.empty() ? "" : ", ", g.memrefs[id].name,
                                                 memref_type(g.memrefs[id]));
  out += fmt::format("orchestration func @{}({}) {{\n", g.name, params);
  for (const std::string& d : g.dyn_dims) {
    auto it = g.scalar_dtypes.find(d);
    out += fmt::format("  %{} = alloc_scalar : {}\n", d, dtype_pto_name(it == g.scalar_dtypes.end() ? DataType::INT64 : it->second));
  }
  for (const MemRef& m : g.memrefs)
    if (m.kind == MemKind::Workspace)
      out += fmt::format("  %{} = alloc_workspace{} : {}\n", m.name, m.zeroed ? "" : " uninit", memref_type(m));
  Names n;
  n.memrefs = &g.memrefs;
  n.functions = &g.functions;
  // Views alias another memref: a strided view (offsets per base dim, then
  // the base dim and step of each view dim, -1 for a new or broadcast dim)
  // or a reshape of a contiguous base.
  for (const MemRef& m : g.memrefs) {
    if (m.kind != MemKind::View || !m.view) continue;
    const ViewMap& v = *m.view;
    if (v.reshape)
      out += fmt::format("  %{} = reshape %{} : {}\n", m.name, n.memref(v.base), memref_type(m));
    else
      out += fmt::format("  %{} = view %{}[{}] dims [{}] steps [{}] : {}\n", m.name, n.memref(v.base),
                         exprs(v.offsets), fmt::join(v.map, ", "), fmt::join(v.steps, ", "), memref_type(m));
  }
  print_stmts(out, g.orchestration, n, 1);
  return out + "  return\n}\n";
}

}  // namespace pypto
