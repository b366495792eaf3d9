// Python access to the Tensor Graph builder (tracing calls it op by op) and
// the IR printers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <variant>

#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/tensor_graph.h"

namespace py = pybind11;

namespace pypto::bindings {

namespace {

/// A dim from Python: an int, a symbolic Expr, or the name of a symbolic dim.
using Dim = std::variant<int64_t, Expr, std::string>;

std::vector<Expr> to_shape(const std::vector<Dim>& dims) {
  std::vector<Expr> out;
  for (const Dim& d : dims) {
    if (auto* i = std::get_if<int64_t>(&d)) out.emplace_back(*i);
    else if (auto* e = std::get_if<Expr>(&d)) out.push_back(*e);
    else out.push_back(Expr::var(std::get<std::string>(d)));
  }
  return out;
}

/// Dims for Python: ints where constant, Exprs otherwise.
std::vector<std::variant<int64_t, Expr>> from_shape(const std::vector<Expr>& shape) {
  std::vector<std::variant<int64_t, Expr>> out;
  for (const Expr& e : shape) {
    if (auto c = e.as_const()) out.emplace_back(*c);
    else out.emplace_back(e);
  }
  return out;
}

SourceLoc loc(const std::string& file, int line) { return SourceLoc{file, line}; }

/// An operand from Python: ("t", value id), ("f", float), ("i", int), ("b", bool) or ("s", Expr).
using PyOperand = std::pair<std::string, py::object>;

Operand to_operand(const PyOperand& o) {
  const std::string& k = o.first;
  if (k == "t") return Operand::tensor(o.second.cast<int>());
  if (k == "f") return Operand::scalar(o.second.cast<double>(), true);
  if (k == "i") return Operand::scalar(static_cast<double>(o.second.cast<int64_t>()), false);
  if (k == "b") return Operand::scalar(o.second.cast<bool>() ? 1.0 : 0.0, false, true);
  if (k == "s") return Operand::symbolic(o.second.cast<Expr>());
  throw InternalError("bad operand kind " + k);
}

}  // namespace

void bind_expr(py::module_& m) {
  py::class_<Expr>(m, "Expr", "A symbolic integer expression.")
      .def(py::init<int64_t>())
      .def_static("var", &Expr::var)
      .def("is_const", &Expr::is_const)
      .def("is_var", &Expr::is_var)
      .def("as_const", &Expr::as_const)
      .def("uses", &Expr::uses)
      .def("equals", &Expr::equals)
      .def("__str__", &Expr::str)
      .def("add", [](const Expr& a, const Expr& b) { return a + b; })
      .def("sub", [](const Expr& a, const Expr& b) { return a - b; })
      .def("mul", [](const Expr& a, const Expr& b) { return a * b; })
      .def("floordiv", [](const Expr& a, const Expr& b) { return floordiv(a, b); })
      .def("mod", [](const Expr& a, const Expr& b) { return mod(a, b); })
      .def("min", [](const Expr& a, const Expr& b) { return min(a, b); })
      .def("max", [](const Expr& a, const Expr& b) { return max(a, b); })
      .def("lt", [](const Expr& a, const Expr& b) { return cmp_lt(a, b); })
      .def("le", [](const Expr& a, const Expr& b) { return cmp_le(a, b); })
      .def("eq", [](const Expr& a, const Expr& b) { return cmp_eq(a, b); })
      .def("ne", [](const Expr& a, const Expr& b) { return cmp_ne(a, b); })
      .def("land", [](const Expr& a, const Expr& b) { return logical_and(a, b); })
      .def("lor", [](const Expr& a, const Expr& b) { return logical_or(a, b); })
      .def_static(
          "node",
          [](const std::string& op, const Expr& a, const Expr& b) {
            static const std::map<std::string, Expr::Kind> kinds = {
                {"+", Expr::Kind::Add}, {"-", Expr::Kind::Sub},  {"*", Expr::Kind::Mul},  {"//", Expr::Kind::FloorDiv},
                {"%", Expr::Kind::Mod}, {"<", Expr::Kind::Lt},   {"<=", Expr::Kind::Le},  {"==", Expr::Kind::Eq},
                {"!=", Expr::Kind::Ne}, {"&&", Expr::Kind::And}, {"||", Expr::Kind::Or},  {"min", Expr::Kind::Min},
                {"max", Expr::Kind::Max}};
            auto it = kinds.find(op);
            if (it == kinds.end()) throw UserError("Expr.node: unknown operator '" + op + "'");
            return Expr::node(it->second, a, b);
          },
          "A node exactly as given (no simplification), so it prints as written.")
      .def("substitute", &Expr::substitute_exact, py::arg("env"),
           "Variables replaced by expressions; the other nodes are kept as they are.")
      .def("eval", [](const Expr& e, const std::map<std::string, int64_t>& env) {
        return e.eval([&](const std::string& n) -> int64_t {
          auto it = env.find(n);
          if (it == env.end()) throw UserError("symbolic value '" + n + "' has no value here");
          return it->second;
        });
      });
}

void bind_ir(py::module_& m) {
  bind_expr(m);
  py::enum_<DataType>(m, "DataType", "Element types.")
      .value("DT_FP32", DataType::FP32)
      .value("DT_FP16", DataType::FP16)
      .value("DT_BF16", DataType::BF16)
      .value("DT_DOUBLE", DataType::DOUBLE)
      .value("DT_INT8", DataType::INT8)
      .value("DT_INT16", DataType::INT16)
      .value("DT_INT32", DataType::INT32)
      .value("DT_INT64", DataType::INT64)
      .value("DT_UINT8", DataType::UINT8)
      .value("DT_BOOL", DataType::BOOL)
      .value("DT_UINT16", DataType::UINT16)
      .value("DT_UINT32", DataType::UINT32)
      .value("DT_UINT64", DataType::UINT64)
      .value("DT_FP8E4M3", DataType::FP8E4M3)
      .value("DT_FP8E5M2", DataType::FP8E5M2)
      .value("DT_FP8E8M0", DataType::FP8E8M0)
      .value("DT_HF8", DataType::HF8)
      .value("DT_INT4", DataType::INT4)
      .value("DT_FP4_E2M1", DataType::FP4_E2M1)
      .value("DT_FP4_E1M2", DataType::FP4_E1M2)
      .value("DT_FP4_E2M1X2", DataType::FP4_E2M1X2)
      .value("DT_FP4_E1M2X2", DataType::FP4_E1M2X2)
      .value("DT_HF4", DataType::HF4)
      .value("DT_BOTTOM", DataType::BOTTOM);
  m.def("dtype_size", &dtype_size, "Bytes per element.");
  m.def("dtype_is_float", &dtype_is_float, "True for the floating-point types (the 8-bit ones included).");
  // The op table (ir/ops.def), row by row, for the Python op functions, the docs page and its tests.
  m.def(
      "opcode_table",
      [] {
        py::list out;
        for (const OpcodeInfo& r : opcode_table()) {
          py::dict d;
          d["name"] = r.name;
          d["form"] = form_name(r.form);
          d["srcs"] = opcode_num_srcs(r.op);
          d["functor"] = r.functor;
          d["base"] = opcode_name(r.base);
          d["identity"] = identity_name(r.identity);
          d["doc"] = r.doc;
          out.append(d);
        }
        return out;
      },
      "Every PTO opcode of the op table: name, form, srcs, functor, base, identity, doc.");
  m.def(
      "op_table",
      [] {
        py::list out;
        for (const OpInfo& r : op_table()) {
          py::dict d;
          d["name"] = r.name;
          d["class"] = op_class_name(r.cls);
          d["result"] = result_type_name(r.result);
          d["opcode"] = r.opcode ? py::object(py::str(opcode_name(*r.opcode))) : py::none();
          d["emits"] = r.emits;
          d["method"] = r.method;
          d["signature"] = r.signature;
          d["doc"] = r.doc;
          out.append(d);
        }
        return out;
      },
      "Every tensor op of the op table: name, class, result, opcode, emits, method, signature, doc.");
  m.def(
      "composite_table",
      [] {
        py::list out;
        for (const CompositeInfo& r : composite_table()) {
          py::dict d;
          d["name"] = r.name;
          d["expands"] = r.expands;
          d["method"] = r.method;
          d["signature"] = r.signature;
          d["doc"] = r.doc;
          out.append(d);
        }
        return out;
      },
      "Every composite op of the op table: name, expands, method, signature, doc.");
  m.def(
      "parse_pto_roundtrip", [](const std::string& text) { return print_pto(parse_pto(text)); }, py::arg("text"),
      "Parses .pto text and prints it again (raises pypto.PtoSyntaxError on malformed text).");
  m.def(
      "check_pto", [](const std::string& text) { parse_pto(text); }, py::arg("text"),
      "Parses .pto text; raises pypto.PtoSyntaxError with .line and .column if it is malformed.");

  py::class_<TensorGraph>(m, "TensorGraph", "A traced function (level 1).")
      .def_readonly("name", &TensorGraph::name)
      .def("__str__", [](const TensorGraph& g) { return print(g); });

  py::class_<TensorGraphBuilder>(m, "GraphBuilder", "Builds a Tensor Graph op by op (used by tracing).")
      .def(py::init<std::string>())
      .def("add_param", [](TensorGraphBuilder& b, const std::string& name, const std::vector<Dim>& shape,
                           DataType dt) { return b.add_param(name, to_shape(shape), dt); })
      .def("add_dyn_dim", &TensorGraphBuilder::add_dyn_dim)
      .def("add_binary",
           [](TensorGraphBuilder& b, const std::string& op, int a, int c, const std::vector<int64_t>& tile,
              const std::string& file, int line) { return b.add_binary(op_kind_from_name(op), a, c, tile, loc(file, line)); })
      .def("add_elementwise",
           [](TensorGraphBuilder& b, const std::string& op, const std::vector<PyOperand>& operands,
              const std::vector<int64_t>& tile, const std::string& file, int line) {
             std::vector<Operand> ops;
             for (const auto& o : operands) ops.push_back(to_operand(o));
             return b.add_elementwise(op_kind_from_name(op), ops, tile, loc(file, line));
           })
      .def("add_cast",
           [](TensorGraphBuilder& b, int x, DataType dt, const std::vector<int64_t>& tile, const std::string& file,
              int line) { return b.add_cast(x, dt, tile, loc(file, line)); })
      .def("add_unary",
           [](TensorGraphBuilder& b, const std::string& op, int x, const std::vector<int64_t>& tile,
              const std::string& file, int line) { return b.add_unary(op_kind_from_name(op), x, tile, loc(file, line)); })
      .def("add_reduce",
           [](TensorGraphBuilder& b, const std::string& op, int x, const std::vector<int>& dims, bool keepdim,
              const std::vector<int64_t>& tile, const std::string& file, int line) {
             return b.add_reduce(op_kind_from_name(op), x, dims, keepdim, tile, loc(file, line));
           })
      .def("add_sort",
           [](TensorGraphBuilder& b, const std::string& op, int x, int64_t k, bool descending,
              const std::vector<int64_t>& tile, const std::string& file, int line) {
             return b.add_sort(op_kind_from_name(op), x, k, descending, tile, loc(file, line));
           })
      .def("add_scan",
           [](TensorGraphBuilder& b, const std::string& op, int x, int dim, const std::vector<int64_t>& tile,
              const std::string& file, int line) { return b.add_scan(op_kind_from_name(op), x, dim, tile, loc(file, line)); })
      .def("add_view",
           [](TensorGraphBuilder& b, int base, const std::vector<Dim>& shape, const std::vector<Dim>& offsets,
              const std::vector<int>& map, const std::vector<int64_t>& steps, const std::vector<Dim>& valid,
              const std::string& file, int line) {
             return b.add_view(base, to_shape(shape), to_shape(offsets), map, steps, to_shape(valid), loc(file, line));
           })
      .def("add_reshape",
           [](TensorGraphBuilder& b, int base, const std::vector<Dim>& shape, const std::string& file, int line) {
             return b.add_reshape(base, to_shape(shape), loc(file, line));
           })
      .def("add_bitcast",
           [](TensorGraphBuilder& b, int base, DataType dt, const std::string& file, int line) {
             return b.add_bitcast(base, dt, loc(file, line));
           })
      .def("add_assemble",
           [](TensorGraphBuilder& b, int src, int target, const std::vector<int64_t>& tile, const std::string& file,
              int line, bool accumulate) { return b.add_assemble(src, target, tile, loc(file, line), accumulate); },
           py::arg("src"), py::arg("target"), py::arg("tile"), py::arg("file"), py::arg("line"),
           py::arg("accumulate") = false)
      .def("add_full",
           [](TensorGraphBuilder& b, const std::vector<Dim>& shape, const PyOperand& value, DataType dt,
              const std::vector<Dim>& valid, const std::vector<int64_t>& tile, const std::string& file, int line) {
             return b.add_full(to_shape(shape), to_operand(value), dt, to_shape(valid), tile, loc(file, line));
           })
      .def("add_arange",
           [](TensorGraphBuilder& b, const Dim& n, double start, double step, DataType dt,
              const std::vector<int64_t>& tile, const std::string& file, int line) {
             return b.add_arange(to_shape({n})[0], start, step, dt, tile, loc(file, line));
           })
      .def("add_random",
           [](TensorGraphBuilder& b, const std::vector<Dim>& shape, uint64_t key, uint64_t counter, bool normal, DataType dt,
              const std::vector<int64_t>& tile, const std::string& label, const std::string& file, int line,
              const Dim& block0, int rounds) {
             RandomParams p;
             p.key = key;
             p.counter = counter;
             p.normal = normal;
             p.mantissa = dt == DataType::FP16 ? 10 : dt == DataType::BF16 ? 7 : 23;
             p.rounds = rounds;
             return b.add_random(to_shape(shape), p, dt, tile, label, loc(file, line), to_shape({block0}).at(0));
           },
           py::arg("shape"), py::arg("key"), py::arg("counter"), py::arg("normal"), py::arg("dtype"), py::arg("tile"),
           py::arg("label"), py::arg("file"), py::arg("line"), py::arg("block0") = Dim(int64_t{0}), py::arg("rounds") = 10)
      .def("valid_shape", [](const TensorGraphBuilder& b, int id) { return from_shape(b.value(id).valid); })
      .def("is_view", [](const TensorGraphBuilder& b, int id) { return b.value(id).view.has_value(); })
      .def("view_root",
           [](const TensorGraphBuilder& b, int id) {
             while (b.value(id).view) id = b.value(id).view->base;
             return id;
           })
      .def("add_matmul",
           [](TensorGraphBuilder& b, int x, int y, DataType out, const std::vector<int64_t>& cube,
              const std::vector<int64_t>& cube_l0, const std::string& file, int line) {
             return b.add_matmul(x, y, out, cube, cube_l0, loc(file, line));
           })
      .def("add_conv",
           [](TensorGraphBuilder& b, int x, int w, DataType out, const std::vector<int64_t>& geometry,
              const std::vector<int64_t>& tile, const std::string& file, int line) {
             return b.add_conv(x, w, out, geometry, tile, loc(file, line));
           })
      .def("mark_covered", &TensorGraphBuilder::mark_covered, py::arg("value"))
      .def("add_gather",
           [](TensorGraphBuilder& b, int x, int dim, int index, const std::vector<int64_t>& tile,
              const std::string& file, int line, const std::string& name) {
             return b.add_gather(x, dim, index, tile, loc(file, line), name);
           },
           py::arg("x"), py::arg("dim"), py::arg("index"), py::arg("tile"), py::arg("file"), py::arg("line"),
           py::arg("name") = "gather")
      .def("add_scatter",
           [](TensorGraphBuilder& b, int target, int dim, int index, int src, const std::string& reduce,
              const std::vector<int64_t>& tile, const std::string& file, int line, const std::string& name) {
             return b.add_scatter(target, dim, index, src, scatter_reduce_by_name(reduce), tile, loc(file, line), name);
           },
           py::arg("target"), py::arg("dim"), py::arg("index"), py::arg("src"), py::arg("reduce"), py::arg("tile"),
           py::arg("file"), py::arg("line"), py::arg("name") = "scatter")
      .def("begin_loop",
           [](TensorGraphBuilder& b, const std::string& var, const Dim& start, const Dim& stop, const Dim& step,
              const std::string& file, int line) {
             b.begin_loop(var, to_shape({start})[0], to_shape({stop})[0], to_shape({step})[0], loc(file, line));
           })
      .def("end_loop", &TensorGraphBuilder::end_loop)
      .def("add_read",
           [](TensorGraphBuilder& b, int value, const std::vector<Dim>& index, const std::string& file, int line) {
             return b.add_read(value, to_shape(index), loc(file, line));
           })
      .def("begin_if", [](TensorGraphBuilder& b, const Expr& c, const std::string& file, int line) {
        b.begin_if(c, loc(file, line));
      })
      .def("begin_else", &TensorGraphBuilder::begin_else)
      .def("end_if", &TensorGraphBuilder::end_if)
      .def("set_outputs", &TensorGraphBuilder::set_outputs)
      .def("shape", [](const TensorGraphBuilder& b, int id) { return from_shape(b.value(id).shape); })
      .def("dtype", [](const TensorGraphBuilder& b, int id) { return b.value(id).dtype; })
      .def("dim_checks", [](const TensorGraphBuilder& b) {
        py::list out;
        for (const DimCheck& c : b.dim_checks()) out.append(py::make_tuple(c.a, c.b, c.what));
        return out;
      })
      .def("finish", &TensorGraphBuilder::finish);
}

}  // namespace pypto::bindings
