// Python access to compilation (passes, codegen, host compiler, cache) and to
// running a compiled program on the caller's memory.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "codegen/program.h"
#include "ir/errors.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace pypto::bindings {

/// (id, name, buffer_bytes, preds) per recorded task (bind_runtime.cc).
py::list recorded_tasks(const runtime::TaskGraphRecord& graph);

namespace {

using codegen::CompiledProgram;

/// (data pointer, shape, element strides, element size, allocation identity) of a caller's array.
using TensorSpec = std::tuple<uintptr_t, std::vector<int64_t>, std::vector<int64_t>, int32_t, uintptr_t>;

py::dict stats(const CompiledProgram& p) {
  py::dict d;
  d["incore_functions"] = p.incore_functions();
  py::dict bytes;
  for (const auto& f : p.ir.execution.functions) bytes[py::str(f.name)] = f.buffer_bytes;
  d["buffer_bytes"] = bytes;
  d["compile_seconds"] = p.compile_seconds;
  d["host_compile_seconds"] = p.build.compile_seconds;
  d["cache"] = p.build.cache;
  d["library"] = p.build.library;
  return d;
}

std::vector<pypto_tensor> make_tensors(const std::vector<TensorSpec>& specs) {
  std::vector<pypto_tensor> tensors(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& [ptr, shape, strides, elem, buffer] = specs[i];
    if (shape.size() > PYPTO_MAX_DIMS || strides.size() != shape.size())
      throw InternalError("run: bad tensor description");
    pypto_tensor& t = tensors[i];
    t.data = reinterpret_cast<void*>(ptr);
    t.buffer = reinterpret_cast<void*>(buffer ? buffer : ptr);
    t.ndim = static_cast<int32_t>(shape.size());
    t.elem_size = elem;
    for (size_t d = 0; d < shape.size(); ++d) {
      t.shape[d] = shape[d];
      t.stride[d] = strides[d];
    }
  }
  return tensors;
}

void check_status(const CompiledProgram& p, int32_t rc) {
  if (rc == 3)
    throw UserError(fmt::format("'{}': pypto.reshape of a tensor that is not contiguous in memory", p.ir.tensor.name));
  if (rc == 4) throw UserError(fmt::format("'{}': {}", p.ir.execution.name, p.error_message()));
  if (rc != 0) throw runtime::TaskError(fmt::format("orchestration of '{}' failed with status {}", p.ir.tensor.name, rc));
}

/// Calls `mode(orchestrate)` on the process-wide runtime without the GIL, where `orchestrate` runs
/// the program's entry on the caller's tensors, then turns the entry's status into an exception.
template <typename Mode>
auto with_entry(const CompiledProgram& p, const std::vector<TensorSpec>& specs, const std::vector<int64_t>& scalars,
                Mode&& mode) {
  std::vector<pypto_tensor> tensors = make_tensors(specs);
  int32_t rc = 0;
  auto orchestrate = [&](const pypto_runtime_api* api) {
    rc = p.entry(api, tensors.data(), static_cast<int32_t>(tensors.size()), scalars.data(),
                 static_cast<int32_t>(scalars.size()));
  };
  decltype(mode(runtime::default_runtime(), orchestrate)) out;
  {
    py::gil_scoped_release release;
    out = mode(runtime::default_runtime(), orchestrate);
  }
  check_status(p, rc);
  return out;
}

using Orchestrate = std::function<void(const pypto_runtime_api*)>;

/// Runs the orchestration on the process-wide runtime; returns the task count. A non-empty
/// `trace_path` writes a Chrome trace there (otherwise PYPTO_TRACE applies).
int64_t run(const CompiledProgram& p, const std::vector<TensorSpec>& specs, const std::vector<int64_t>& scalars,
            const std::string& trace_path) {
  return with_entry(p, specs, scalars, [&](runtime::Runtime& rt, const Orchestrate& o) {
    return (trace_path.empty() ? rt.run(o) : rt.run(o, trace_path)).tasks;
  });
}

/// (id, name, buffer_bytes, preds) per task of the graph a call builds, in recording mode (no kernel runs).
py::list record(const CompiledProgram& p, const std::vector<TensorSpec>& specs, const std::vector<int64_t>& scalars) {
  return recorded_tasks(
      with_entry(p, specs, scalars, [](runtime::Runtime& rt, const Orchestrate& o) { return rt.record(o); }));
}

/// (tasks, edges) of the graph a call builds, computed without running or keeping it.
std::pair<int64_t, int64_t> build_only(const CompiledProgram& p, const std::vector<TensorSpec>& specs,
                                       const std::vector<int64_t>& scalars) {
  runtime::RunStats st =
      with_entry(p, specs, scalars, [](runtime::Runtime& rt, const Orchestrate& o) { return rt.build(o); });
  return {st.tasks, st.edges};
}

}  // namespace

void bind_compile(py::module_& m) {
  py::class_<PassOptions>(m, "PassOptions", "Options of the pass pipeline.")
      .def(py::init<>())
      .def_readwrite("verify", &PassOptions::verify)
      .def_readwrite("fusion", &PassOptions::fusion)
      .def_readwrite("disabled", &PassOptions::disabled)
      .def_readwrite("sram_budget_kb", &PassOptions::sram_budget_kb)
      .def_readwrite("empty_kernels", &PassOptions::empty_kernels);

  py::class_<CompiledProgram, std::shared_ptr<CompiledProgram>>(m, "CompiledProgram")
      .def("dump", &CompiledProgram::dump, py::arg("stage") = "")
      .def_readonly("pto", &CompiledProgram::pto)
      .def_readonly("source", &CompiledProgram::cpp)
      .def("stats", &stats)
      .def("output_shapes", &CompiledProgram::output_shapes)
      .def("count_tasks", &CompiledProgram::count_tasks)
      .def_property_readonly("dyn_dims", [](const CompiledProgram& p) { return p.ir.tensor.dyn_dims; })
      .def("run", &run, py::arg("tensors"), py::arg("scalars"), py::arg("trace_path") = "")
      .def("build_only", &build_only, py::arg("tensors"), py::arg("scalars"),
           "Builds the task graph in recording mode; returns (tasks, edges).")
      .def("record", &record, py::arg("tensors"), py::arg("scalars"),
           "The task graph the orchestration builds for these tensors, without running kernels.")
      .def("entry_memrefs",
           [](const CompiledProgram& p) {
             // (name, dtype, dims as text, is_output) of the tensors the entry takes, in order.
             const ExecutionGraph& g = p.ir.execution;
             py::list out;
             auto add = [&](int id, bool is_out) {
               const MemRef& m = g.memrefs.at(id);
               std::vector<std::string> dims;
               for (const Expr& d : m.shape) dims.push_back(d.str());
               out.append(py::make_tuple(m.name, m.dtype, dims, is_out));
             };
             for (int id : g.params) add(id, false);
             for (int id : g.outputs) add(id, true);
             return out;
           })
      .def("entry_scalars", [](const CompiledProgram& p) {
        // (name, dtype) of the scalars the entry takes, in order.
        const ExecutionGraph& g = p.ir.execution;
        py::list out;
        for (const std::string& d : g.dyn_dims) {
          auto it = g.scalar_dtypes.find(d);
          out.append(py::make_tuple(d, it == g.scalar_dtypes.end() ? DataType::INT64 : it->second));
        }
        return out;
      });

  m.def("compile", &codegen::compile_program, py::arg("graph"), py::arg("options"),
        "Lowers, generates and builds a Tensor Graph.");
  m.def("compile_pto", &codegen::compile_pto, py::arg("text"), py::arg("options"),
        "Parses, plans, expands, generates and builds a .pto module.");
  m.def("pass_names", &pass_names, "Registry names of the passes, in pipeline order.");
  m.def("dump_stages", &codegen::dump_stages);
  m.def("cache_dir", &codegen::cache_dir);
  m.def("compiler_command", &codegen::compiler_command);
  m.def("compiler_flags", &codegen::compiler_flags, "Flags generated code is compiled with (before -o and the source).");
}

}  // namespace pypto::bindings
