// Python access to the Tensor Graph builder (tracing calls it op by op) and
// the IR printers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <variant>

#include "ir/printer.h"
#include "ir/tensor_graph.h"

namespace py = pybind11;

namespace pypto::bindings {

namespace {

using Dim = std::variant<int64_t, std::string>;

std::vector<Expr> to_shape(const std::vector<Dim>& dims) {
  std::vector<Expr> out;
  for (const Dim& d : dims) {
    if (auto* i = std::get_if<int64_t>(&d)) out.emplace_back(*i);
    else out.push_back(Expr::var(std::get<std::string>(d)));
  }
  return out;
}

std::vector<Dim> from_shape(const std::vector<Expr>& shape) {
  std::vector<Dim> out;
  for (const Expr& e : shape) {
    if (auto c = e.as_const()) out.emplace_back(*c);
    else out.emplace_back(e.str());
  }
  return out;
}

SourceLoc loc(const std::string& file, int line) { return SourceLoc{file, line}; }

}  // namespace

void bind_ir(py::module_& m) {
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
      .value("DT_BOOL", DataType::BOOL);
  m.def("dtype_size", &dtype_size, "Bytes per element.");

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
      .def("add_unary",
           [](TensorGraphBuilder& b, const std::string& op, int x, const std::vector<int64_t>& tile,
              const std::string& file, int line) { return b.add_unary(op_kind_from_name(op), x, tile, loc(file, line)); })
      .def("add_reduce",
           [](TensorGraphBuilder& b, const std::string& op, int x, int dim, bool keepdim,
              const std::vector<int64_t>& tile, const std::string& file, int line) {
             return b.add_reduce(op_kind_from_name(op), x, dim, keepdim, tile, loc(file, line));
           })
      .def("set_outputs", &TensorGraphBuilder::set_outputs)
      .def("shape", [](const TensorGraphBuilder& b, int id) { return from_shape(b.value(id).shape); })
      .def("dtype", [](const TensorGraphBuilder& b, int id) { return b.value(id).dtype; })
      .def("finish", &TensorGraphBuilder::finish);
}

}  // namespace pypto::bindings
