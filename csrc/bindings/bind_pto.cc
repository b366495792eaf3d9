// The tile-level API's C++ side: PTOFunctionBuilder writes IR through
// _C.PtoFunctionBuilder and PTOModule links and prints it (link_pto); and a
// parsed .pto module as plain data (dicts, lists and strings), from which
// `python -m pypto.pto parse` writes builder code.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include <fmt/format.h>

#include "ir/errors.h"
#include "ir/op_table.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/pto_module.h"

namespace py = pybind11;

namespace pypto::bindings {

namespace {

std::vector<std::string> texts(const std::vector<Expr>& v) {
  std::vector<std::string> out;
  for (const Expr& e : v) out.push_back(e.str());
  return out;
}

struct Dumper {
  const ExecutionGraph& g;
  const InCoreFunction* f = nullptr;

  std::string memref(int id) const {
    if (f)
      for (const RegionParam& p : f->params)
        if (p.memref == id) return p.name;
    return g.memrefs.at(id).name;
  }
  std::string tile(int id) const {
    for (const TileDecl& t : f->tiles)
      if (t.id == id) return t.name;
    return fmt::format("<tile {}>", id);
  }

  py::dict instr(const Instr& in) const {
    py::dict d;
    d["kind"] = "instr";
    d["op"] = std::string(opcode_name(in.op)) + (in.scalar_pos >= 0 ? "s" : "");
    d["dst"] = in.dst >= 0 && in.op != Opcode::TSTORE ? py::object(py::str(tile(in.dst))) : py::object(py::none());
    std::vector<std::string> srcs;
    for (int s : in.srcs) srcs.push_back(tile(s));
    d["srcs"] = srcs;
    d["memref"] = in.memref >= 0 ? py::object(py::str(memref(in.memref))) : py::object(py::none());
    d["offsets"] = texts(in.offsets);
    d["valid"] = texts(in.valid);
    d["atomic"] = in.atomic;
    d["scalar"] = in.scalar_expr ? in.scalar_expr->str() : scalar_text(in.scalar);
    d["scalar_pos"] = in.scalar_pos;
    d["axis"] = in.axis;
    d["to"] = in.round_to ? py::object(py::str(dtype_pto_name(*in.round_to))) : py::object(py::none());
    d["l0"] = in.l0;
    d["step"] = scalar_text(in.step);
    d["random"] = in.op == Opcode::TRANDOM
                      ? py::object(py::make_tuple(in.random.key, in.random.counter, in.random.normal, in.random.mantissa,
                                                  in.random.rounds))
                      : py::object(py::none());
    return d;
  }

  py::list body(const std::vector<Stmt>& stmts) const {
    py::list out;
    for (const Stmt& s : stmts) {
      if (auto* in = std::get_if<Instr>(&s.node)) {
        out.append(instr(*in));
      } else if (auto* f = std::get_if<Fused>(&s.node)) {
        // A fused run is the compiler's decision, made again when the module compiles: its
        // instructions, in order.
        for (const auto& x : body(f->body)) out.append(x);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        py::dict d;
        d["kind"] = "loop";
        d["var"] = l->var;
        d["start"] = l->start.str();
        d["stop"] = l->stop.str();
        d["step"] = l->step.str();
        d["parallel"] = l->parallel ? py::object(py::make_tuple(l->dim, l->tile)) : py::object(py::none());
        d["range"] = l->range ? py::object(py::make_tuple(l->range->max_range, l->range->min_range, l->range->tile_levels))
                              : py::object(py::none());
        d["body"] = body(l->body);
        out.append(d);
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        py::dict d;
        d["kind"] = "if";
        d["cond"] = i->cond.str();
        d["then"] = body(i->then_body);
        d["else"] = body(i->else_body);
        out.append(d);
      } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
        py::dict d;
        d["kind"] = "read";
        d["var"] = r->var;
        d["tensor"] = g.memrefs.at(r->memref).name;
        d["index"] = texts(r->index);
        out.append(d);
      } else {
        const Call& c = std::get<Call>(s.node);
        const InCoreFunction& callee = g.functions.at(c.callee);
        py::dict d;
        d["kind"] = "call";
        d["callee"] = callee.name;
        py::list args, scalars;
        for (size_t i = 0; i < c.args.size(); ++i)
          args.append(py::make_tuple(callee.params.at(i).name, g.memrefs.at(c.args[i].memref).name,
                                     texts(c.args[i].offsets), texts(c.args[i].extents)));
        for (size_t i = 0; i < c.scalars.size(); ++i)
          scalars.append(py::make_tuple(callee.scalar_params.at(i), c.scalars[i].str()));
        d["args"] = args;
        d["scalars"] = scalars;
        out.append(d);
      }
    }
    return out;
  }
};

py::tuple memref_tuple(const MemRef& m) { return py::make_tuple(m.name, texts(m.shape), dtype_pto_name(m.dtype)); }

py::dict module_data(const std::string& text) {
  ExecutionGraph g = parse_pto(text);
  py::dict out;
  out["module"] = g.module.empty() ? g.name : g.module;
  out["entry"] = g.name;
  py::list fns;
  for (const InCoreFunction& f : g.functions) {
    Dumper d{g, &f};
    py::dict fd;
    fd["name"] = f.name;
    fd["fused"] = f.fused_ops;
    py::list params, locals, tiles;
    for (const RegionParam& p : f.params)
      params.append(py::make_tuple(p.name, texts(p.max_extents), dtype_pto_name(p.dtype), p.is_output));
    for (int l : f.locals) locals.append(memref_tuple(g.memrefs.at(l)));
    for (const TileDecl& t : f.tiles) tiles.append(py::make_tuple(t.name, t.shape, dtype_pto_name(t.dtype)));
    fd["params"] = params;
    fd["scalars"] = f.scalar_params;
    fd["locals"] = locals;
    fd["tiles"] = tiles;
    fd["body"] = d.body(f.body);
    fns.append(fd);
  }
  out["functions"] = fns;
  py::dict orch;
  py::list params, outputs, scalars, workspaces, views;
  for (int id : g.params) params.append(memref_tuple(g.memrefs[id]));
  for (int id : g.outputs) outputs.append(memref_tuple(g.memrefs[id]));
  for (const std::string& s : g.dyn_dims) {
    auto it = g.scalar_dtypes.find(s);
    scalars.append(py::make_tuple(s, dtype_pto_name(it == g.scalar_dtypes.end() ? DataType::INT64 : it->second)));
  }
  for (const MemRef& m : g.memrefs) {
    if (m.kind == MemKind::Workspace) {
      py::tuple t = memref_tuple(m);
      workspaces.append(py::make_tuple(t[0], t[1], t[2], !m.zeroed));  // (name, dims, dtype, uninit)
    }
    if (m.view) {
      const ViewMap& v = *m.view;
      views.append(py::make_tuple(m.name, texts(m.shape), dtype_pto_name(m.dtype), g.memrefs.at(v.base).name,
                                  v.reshape, texts(v.offsets), v.map, v.steps));
    }
  }
  orch["params"] = params;
  orch["outputs"] = outputs;
  orch["scalars"] = scalars;
  orch["workspaces"] = workspaces;
  orch["views"] = views;
  orch["body"] = Dumper{g, nullptr}.body(g.orchestration);
  out["orchestration"] = orch;
  return out;
}

DataType dtype_of(const std::string& pto_name) {
  if (auto dt = dtype_by_pto_name(pto_name)) return *dt;
  throw UserError(fmt::format("unknown element type '{}'", pto_name));
}

MemKind memkind_of(const std::string& kind) {
  if (kind == "param") return MemKind::Input;
  if (kind == "output") return MemKind::Output;
  if (kind == "workspace") return MemKind::Workspace;
  if (kind == "local") return MemKind::Local;
  throw UserError(fmt::format("unknown memref kind '{}'", kind));
}

int need_tile(const FunctionBuilder& b, const std::string& name) {
  int id = b.tile_id(name);
  if (id < 0) throw UserError(fmt::format("@{}: '{}' is not a declared tile", b.name(), name));
  return id;
}

/// One instruction by mnemonic (a trailing "s": a constant operand) with its operands by name.
void add_instr(FunctionBuilder& b, const std::string& mnemonic, const std::optional<std::string>& dst,
               const std::vector<std::string>& srcs, const std::optional<std::string>& memref,
               const std::vector<Expr>& offsets, const std::vector<Expr>& valid, std::optional<double> scalar,
               std::optional<Expr> scalar_expr, int scalar_pos, int axis, const std::optional<std::string>& to,
               double step, const std::vector<int64_t>& l0,
               const std::optional<std::tuple<uint64_t, uint64_t, bool, int, int>>& random, bool atomic) {
  std::optional<Opcode> op = opcode_by_name(mnemonic);
  const bool constant = scalar || scalar_expr;
  if (!op && mnemonic.size() > 1 && mnemonic.back() == 's') op = opcode_by_name(mnemonic.substr(0, mnemonic.size() - 1));
  if (!op) throw UserError(fmt::format("@{}: unknown instruction '{}'", b.name(), mnemonic));
  Instr in;
  in.op = *op;
  if (dst) in.dst = need_tile(b, *dst);
  for (const std::string& s : srcs) in.srcs.push_back(need_tile(b, s));
  if (memref) {
    in.memref = b.memref_id(*memref);
    if (in.memref < 0) throw UserError(fmt::format("@{}: '{}' is not a declared memref", b.name(), *memref));
  }
  in.offsets = offsets;
  in.valid = valid;
  if (scalar) in.scalar = *scalar;
  in.scalar_expr = std::move(scalar_expr);
  const OpForm form = opcode_info(*op).form;
  if (constant && form != OpForm::Fill && form != OpForm::Arange) in.scalar_pos = std::max(scalar_pos, 0);
  in.axis = axis;
  if (to) in.round_to = dtype_of(*to);
  in.step = step;
  in.l0 = l0;
  in.atomic = atomic;
  if (random) {
    std::tie(in.random.key, in.random.counter, in.random.normal, in.random.mantissa, in.random.rounds) = *random;
    if (in.random.mantissa < 1 || in.random.mantissa > 23)
      throw UserError(fmt::format("@{}: random keeps 1 to 23 mantissa bits, found {}", b.name(), in.random.mantissa));
    if (in.random.rounds != 7 && in.random.rounds != 10)
      throw UserError(fmt::format("@{}: random takes 7 or 10 rounds, found {}", b.name(), in.random.rounds));
  }
  b.add(std::move(in));
}

}  // namespace

void bind_pto(py::module_& m) {
  py::class_<ModuleFunction>(m, "PtoModuleFunction", "A function built by PTOFunctionBuilder (C++ IR).")
      .def_readonly("name", &ModuleFunction::name)
      .def_readonly("in_core", &ModuleFunction::in_core);
  py::class_<FunctionBuilder>(m, "PtoFunctionBuilder", "Writes one function of a PTO module as C++ IR.")
      .def(py::init<std::string, std::string>(), py::arg("name"), py::arg("where"))
      .def("set_in_core", &FunctionBuilder::set_in_core)
      .def("set_fused_ops", &FunctionBuilder::set_fused_ops)
      .def_property_readonly("in_core", &FunctionBuilder::in_core)
      .def("memref",
           [](FunctionBuilder& b, const std::string& name, const std::string& kind, const std::string& dt,
              const std::optional<std::vector<Expr>>& shape,
              bool zeroed) { b.memref(name, memkind_of(kind), dtype_of(dt), shape, zeroed); },
           py::arg("name"), py::arg("kind"), py::arg("dtype"), py::arg("shape"), py::arg("zeroed") = true)
      .def("view",
           [](FunctionBuilder& b, const std::string& name, const std::string& base, const std::string& dt,
              const std::vector<Expr>& shape, const std::vector<Expr>& offsets, const std::vector<int>& map,
              const std::vector<int64_t>& steps, bool reshape) {
             b.view(name, base, dtype_of(dt), shape, offsets, map, steps, reshape);
           })
      .def("tile", [](FunctionBuilder& b, const std::string& name, const std::vector<int64_t>& shape,
                      const std::string& dt) { b.tile(name, shape, dtype_of(dt)); })
      .def("scalar", [](FunctionBuilder& b, const std::string& name, const std::string& dt) { b.scalar(name, dtype_of(dt)); })
      .def("mark_output", &FunctionBuilder::mark_output)
      .def("memref_kind",
           [](const FunctionBuilder& b, const std::string& name) -> std::optional<std::string> {
             int id = b.memref_id(name);
             if (id < 0) return std::nullopt;
             switch (b.memref_at(id).kind) {
               case MemKind::Input: case MemKind::Output: return std::string("param");
               case MemKind::Workspace: return std::string("workspace");
               case MemKind::Local: return std::string("local");
               case MemKind::View: return std::string(b.memref_at(id).view->reshape ? "reshape" : "view");
             }
             return std::nullopt;
           })
      .def("tile_shape",
           [](const FunctionBuilder& b, const std::string& name) -> std::optional<std::vector<int64_t>> {
             int id = b.tile_id(name);
             if (id < 0) return std::nullopt;
             return b.tile_at(id).shape;
           })
      .def("has_scalar", &FunctionBuilder::has_scalar)
      .def("instr", &add_instr, py::arg("mnemonic"), py::arg("dst"), py::arg("srcs"), py::arg("memref") = py::none(),
           py::arg("offsets") = std::vector<Expr>{}, py::arg("valid") = std::vector<Expr>{},
           py::arg("scalar") = py::none(), py::arg("scalar_expr") = py::none(), py::arg("scalar_pos") = -1,
           py::arg("axis") = -1, py::arg("to") = py::none(), py::arg("step") = 1.0,
           py::arg("l0") = std::vector<int64_t>{}, py::arg("random") = py::none(), py::arg("atomic") = false)
      .def("call",
           [](FunctionBuilder& b, const std::string& callee,
              const std::vector<std::tuple<std::string, std::string, std::optional<std::vector<Expr>>,
                                           std::optional<std::vector<Expr>>, bool>>& args,
              const std::vector<std::pair<std::string, Expr>>& scalars, const std::string& where) {
             NamedCall c;
             c.callee = callee;
             c.where = where;
             for (const auto& [param, memref, offsets, extents, units] : args) {
               NamedArg a;
               a.param = param;
               a.memref = b.memref_id(memref);
               if (a.memref < 0) throw UserError(fmt::format("@{}: '{}' is not a declared memref", b.name(), memref));
               a.offsets = offsets;
               a.extents = extents;
               a.block_units = units;
               c.args.push_back(std::move(a));
             }
             c.scalars = scalars;
             b.call(std::move(c));
           })
      .def("begin_for",
           [](FunctionBuilder& b, const std::string& var, const Expr& start, const Expr& stop, const Expr& step,
              std::optional<std::tuple<int64_t, int64_t, std::map<int64_t, int64_t>>> range,
              std::optional<std::pair<int, int64_t>> parallel) {
             Loop l;
             l.var = var;
             l.start = start;
             l.stop = stop;
             l.step = step;
             if (range) l.range = LoopRange{std::get<0>(*range), std::get<1>(*range), std::get<2>(*range)};
             if (parallel) {
               l.parallel = true;
               l.dim = parallel->first;
               l.tile = parallel->second;
             }
             b.begin_for(std::move(l));
           })
      .def("begin_if", &FunctionBuilder::begin_if)
      .def("begin_else", &FunctionBuilder::begin_else)
      .def("end", &FunctionBuilder::end, py::arg("loop"))
      .def("open_block", &FunctionBuilder::open_block)
      .def("build", &FunctionBuilder::build);
  m.def(
      "link_pto",
      [](const std::string& name, const std::vector<ModuleFunction>& functions, const std::string& entry) {
        return print_pto(link_module(PtoModule{name, functions}, entry));
      },
      py::arg("name"), py::arg("functions"), py::arg("entry"),
      "A built module linked with `entry` as its orchestration, as .pto text.");
  m.def("pto_module_data", &module_data, py::arg("text"),
        "A parsed .pto module as dicts and lists (functions, their statements, the orchestration).");
}

}  // namespace pypto::bindings
