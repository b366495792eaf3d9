// Python access to a parsed .pto module as plain data (dicts, lists and
// strings), from which `python -m pypto.pto parse` writes builder code.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"

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
    d["scalar"] = in.scalar_expr ? in.scalar_expr->str() : scalar_text(in.scalar);
    d["scalar_pos"] = in.scalar_pos;
    d["axis"] = in.axis;
    d["to"] = in.round_to ? py::object(py::str(dtype_pto_name(*in.round_to))) : py::object(py::none());
    d["l0"] = in.l0;
    d["step"] = scalar_text(in.step);
    return d;
  }

  py::list body(const std::vector<Stmt>& stmts) const {
    py::list out;
    for (const Stmt& s : stmts) {
      if (auto* in = std::get_if<Instr>(&s.node)) {
        out.append(instr(*in));
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
    if (m.kind == MemKind::Workspace) workspaces.append(memref_tuple(m));
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

}  // namespace

void bind_pto(py::module_& m) {
  m.def("pto_module_data", &module_data, py::arg("text"),
        "A parsed .pto module as dicts and lists (functions, their statements, the orchestration).");
}

}  // namespace pypto::bindings
