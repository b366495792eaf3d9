// Python access to compilation (passes, codegen, host compiler, cache) and to
// running a compiled program on the caller's memory.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <algorithm>
#include <list>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codegen/program.h"
#include "ir/errors.h"
#include "ir/op_table.h"
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
  d["cpu_target"] = p.target.name;
  return d;
}

/// The name of entry tensor `i` (a parameter or an output) for messages.
std::string entry_tensor_name(const CompiledProgram& p, size_t i) {
  const ExecutionGraph& g = p.ir.execution;
  int id = i < g.params.size() ? g.params[i] : g.outputs.at(i - g.params.size());
  return g.memrefs.at(id).name;
}

/// [first, last] byte addresses an array touches (its elements, whatever the signs of its strides).
std::pair<uintptr_t, uintptr_t> byte_span(const pypto_tensor& t) {
  intptr_t lo = 0, hi = 0;
  for (int d = 0; d < t.ndim; ++d) {
    const intptr_t span = static_cast<intptr_t>(t.shape[d] - 1) * t.stride[d] * t.elem_size;
    (span < 0 ? lo : hi) += span;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data);
  return {base + lo, base + hi + t.elem_size - 1};
}

bool same_layout(const pypto_tensor& a, const pypto_tensor& b) {
  if (a.data != b.data || a.ndim != b.ndim || a.elem_size != b.elem_size) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d] || (a.shape[d] > 1 && a.stride[d] != b.stride[d])) return false;
  return true;
}

/// A tensor the program writes must not repeat an element (a stride-0 dim, as of an expanded
/// tensor: tasks would race on it), and must not share memory with another argument unless both
/// are the same array (elementwise in-place use): tasks would read elements other tasks already
/// wrote, so the result would depend on the tiling. Throws UserError naming the parameters.
void check_written(const CompiledProgram& p, const std::vector<pypto_tensor>& tensors) {
  for (size_t w = 0; w < tensors.size() && w < p.written.size(); ++w) {
    if (!p.written[w]) continue;
    const pypto_tensor& t = tensors[w];
    int64_t numel = 1;
    for (int d = 0; d < t.ndim; ++d) numel *= t.shape[d];
    if (numel == 0) continue;
    for (int d = 0; d < t.ndim; ++d) {
      if (t.stride[d] == 0 && t.shape[d] > 1)
        throw UserError(fmt::format("'{}': '{}' is written by the program but dim {} has stride 0 (an expanded or "
                                    "broadcast array repeats its elements); pass a contiguous array",
                                    p.ir.execution.name, entry_tensor_name(p, w), d));
    }
    const auto span = byte_span(t);
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (j == w) continue;
      const pypto_tensor& o = tensors[j];
      int64_t n = 1;
      for (int d = 0; d < o.ndim; ++d) n *= o.shape[d];
      if (n == 0) continue;
      if (same_layout(t, o)) {
        if (std::find(p.alias_ok.begin(), p.alias_ok.end(), std::make_pair(static_cast<int>(w), static_cast<int>(j))) !=
            p.alias_ok.end())
          continue;
        throw UserError(fmt::format("'{}': '{}' is written by the program and is the same array as '{}', which the "
                                    "program reads elsewhere than where it writes '{}'; pass a copy of one of them",
                                    p.ir.execution.name, entry_tensor_name(p, w), entry_tensor_name(p, j),
                                    entry_tensor_name(p, w)));
      }
      const auto other = byte_span(o);
      if (other.first <= span.second && span.first <= other.second)
        throw UserError(fmt::format("'{}': '{}' is written by the program and shares memory with '{}' (a different "
                                    "view of the same data); pass a copy of one of them",
                                    p.ir.execution.name, entry_tensor_name(p, w), entry_tensor_name(p, j)));
    }
  }
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

/// The user's ops behind the InCore function a kernel's index error names ("@name: ..."), as
/// " (pypto.index_select at f.py:12)"; "" when it names none.
std::string indexing_ops(const CompiledProgram& p, const std::string& text) {
  if (text.empty() || text[0] != '@') return "";
  const std::string fn = text.substr(1, text.find(':') - 1);
  std::vector<std::string> ops;
  for (const InCoreFunction& f : p.ir.execution.functions) {
    if (f.name != fn) continue;
    for (int i : f.source_ops) {
      if (i < 0 || i >= static_cast<int>(p.ir.tensor.ops.size())) continue;
      const TensorOp& op = p.ir.tensor.ops[i];
      const OpClass cls = op_info(op.kind).cls;
      if (cls != OpClass::Gather && cls != OpClass::Scatter) continue;
      std::string s = "pypto." + (op.label.empty() ? std::string(op_info(op.kind).name) : op.label);
      if (!op.loc.file.empty()) s += " at " + op.loc.str();
      if (std::find(ops.begin(), ops.end(), s) == ops.end()) ops.push_back(s);
    }
  }
  if (ops.empty()) return "";
  std::string out = " (";
  for (size_t i = 0; i < ops.size(); ++i) out += (i ? ", " : "") + ops[i];
  return out + ")";
}

void check_status(const CompiledProgram& p, int32_t rc) {
  if (rc == PYPTO_STATUS_RESHAPE)
    throw UserError(fmt::format("'{}': pypto.reshape (or a view with another dtype) of a tensor that is not contiguous in memory", p.ir.tensor.name));
  if (rc == PYPTO_STATUS_REGION || rc == PYPTO_STATUS_ZERO)
    throw UserError(fmt::format("'{}': {}", p.ir.execution.name, p.error_message()));
  if (rc != 0) throw runtime::TaskError(fmt::format("orchestration of '{}' failed with status {}", p.ir.tensor.name, rc));
}

/// Calls `mode(orchestrate)` on the process-wide runtime without the GIL, where `orchestrate` runs
/// the program's entry on the caller's tensors, then turns the entry's status into an exception.
template <typename Mode>
auto with_tensors(const CompiledProgram& p, const std::vector<pypto_tensor>& tensors, const std::vector<int64_t>& scalars,
                  Mode&& mode) {
  p.check_runs_here();  // before any generated code runs: never an illegal instruction
  check_written(p, tensors);
  int32_t rc = 0;
  auto orchestrate = [&](const pypto_runtime_api* api) {
    rc = p.entry(api, tensors.data(), static_cast<int32_t>(tensors.size()), scalars.data(),
                 static_cast<int32_t>(scalars.size()));
  };
  decltype(mode(runtime::default_runtime(), orchestrate)) out;
  try {
    py::gil_scoped_release release;
    out = mode(runtime::default_runtime(), orchestrate);
  } catch (const runtime::TaskError&) {
    // A kernel that refused an access outside its region (or divided by zero) says which: the
    // program's error, a ValueError. An index outside its axis is in the data, as for torch.gather
    // a RuntimeError (TaskError), now with the kernel's message. Other failures as they are.
    char text[512];
    const int32_t status = p.take_kernel_error ? p.take_kernel_error(text, sizeof text) : 0;
    if (status == PYPTO_STATUS_INDEX)
      throw runtime::TaskError(fmt::format("'{}': {}{}", p.ir.execution.name, text, indexing_ops(p, text)));
    if (status != 0) throw UserError(fmt::format("'{}': {}", p.ir.execution.name, text));
    throw;
  }
  check_status(p, rc);
  return out;
}

template <typename Mode>
auto with_entry(const CompiledProgram& p, const std::vector<TensorSpec>& specs, const std::vector<int64_t>& scalars,
                Mode&& mode) {
  return with_tensors(p, make_tensors(specs), scalars, std::forward<Mode>(mode));
}

using Orchestrate = std::function<void(const pypto_runtime_api*)>;

/// Runs the orchestration on the process-wide runtime; returns the task count. A non-empty
/// `trace_path` writes a Chrome trace there (otherwise PYPTO_TRACE applies).
int64_t run(const CompiledProgram& p, const std::vector<TensorSpec>& specs, const std::vector<int64_t>& scalars,
            const std::string& trace_path) {
  runtime::RunStats st = with_entry(p, specs, scalars, [&](runtime::Runtime& rt, const Orchestrate& o) {
    return trace_path.empty() ? rt.run(o) : rt.run(o, trace_path);
  });
  // The outputs are complete; a trace that could not be written is a warning beside them.
  if (!st.trace_error.empty() && PyErr_WarnEx(PyExc_RuntimeWarning, st.trace_error.c_str(), 1) != 0)
    throw py::error_already_set();
  return st.tasks;
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

/// The cached-call path of a jitted function called again with torch tensors of the kinds, dtypes
/// and shapes of an earlier call (frontend/compiled.py, _FastEntry): checks the arguments, allocates
/// the outputs and runs the program with no Python frame in between. Anything it was not made for
/// (another argument count, type, dtype or shape, a tensor off the CPU, a negated view, a layout
/// without a data pointer, other settings or CPU target, goldens to check) returns NotImplemented
/// before any work, and the caller takes the general path, which also raises the errors.
class FastCall {
 public:
  FastCall(std::shared_ptr<CompiledProgram> program, py::object compiled, std::vector<int64_t> dyn, py::object config,
           py::object golden, py::object tensor_type, py::list arg_dtypes, py::list arg_shapes,
           std::vector<int32_t> arg_items, py::list out_shapes, py::list out_dtypes, std::vector<int32_t> out_items,
           py::object empty, py::object cached_empty, int64_t cached_bytes)
      : program_(std::move(program)), compiled_(std::move(compiled)), dyn_(std::move(dyn)), config_(std::move(config)),
        golden_(std::move(golden)), tensor_type_(std::move(tensor_type)), arg_dtypes_(std::move(arg_dtypes)),
        arg_shapes_(std::move(arg_shapes)), arg_items_(std::move(arg_items)), out_shapes_(std::move(out_shapes)),
        out_dtypes_(std::move(out_dtypes)), out_items_(std::move(out_items)), empty_(std::move(empty)),
        cached_empty_(std::move(cached_empty)), cached_bytes_(cached_bytes),
        version_(config_.attr("_version")), target_(program_->target.name) {
    for (size_t i = 0; i < out_items_.size(); ++i) {
      std::vector<int64_t> shape;
      for (auto d : py::reinterpret_borrow<py::tuple>(out_shapes_[i])) shape.push_back(d.cast<int64_t>());
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      out_bytes_.push_back(numel * out_items_[i]);
      out_dims_.push_back(std::move(shape));
      // torch.empty's vectorcall arguments: a free slot, the sizes, the dtype (named by dtype_kwname_).
      // A 0-d output passes its empty shape tuple as the one size argument.
      std::vector<PyObject*> argv{nullptr};
      if (out_dims_.back().empty()) argv.push_back(PyList_GET_ITEM(out_shapes_.ptr(), static_cast<Py_ssize_t>(i)));
      for (int64_t d : out_dims_.back()) {
        out_sizes_.push_back(py::int_(d));
        argv.push_back(out_sizes_.back().ptr());
      }
      argv.push_back(out_dtypes_[i].ptr());
      out_argv_.push_back(std::move(argv));
    }
  }

  // The hot path speaks the C API: a method called with PyObject_CallMethodNoArgs (vectorcall, no
  // bound method or argument tuple) and torch.empty called with a prebuilt argument vector cost a
  // fraction of pybind's attr(...)() and */** unpacking, which dominated a small kernel's call.
  py::object operator()(const py::args& args) {
    const py::object no = py::reinterpret_borrow<py::object>(Py_NotImplemented);
    const size_t n = arg_items_.size();
    const Names& k = names();
    if (args.size() != n || !settings_in_force()) return no;
    std::vector<pypto_tensor> tensors(n + out_items_.size());
    for (size_t i = 0; i < n; ++i)
      if (!read_argument(args[i].ptr(), i, tensors[i])) {
        PyErr_Clear();  // e.g. a sparse tensor's data_ptr: the general path says what is wrong
        return no;
      }
    py::list outs(out_items_.size());
    for (size_t j = 0; j < out_items_.size(); ++j) {
      py::object o = new_output(j);
      const auto ptr = o.attr(k.data_ptr)().cast<uintptr_t>();
      pypto_tensor& t = tensors[n + j];
      t.data = t.buffer = reinterpret_cast<void*>(ptr);
      t.ndim = static_cast<int32_t>(out_dims_[j].size());
      t.elem_size = out_items_[j];
      int64_t stride = 1;
      for (int d = t.ndim - 1; d >= 0; --d) {
        t.shape[d] = out_dims_[j][d];
        t.stride[d] = stride;
        stride *= out_dims_[j][d];
      }
      PyList_SET_ITEM(outs.ptr(), static_cast<Py_ssize_t>(j), o.release().ptr());
    }
    const runtime::RunStats st =
        with_tensors(*program_, tensors, dyn_, [](runtime::Runtime& rt, const Orchestrate& o) { return rt.run(o); });
    if (PyObject_SetAttr(compiled_.ptr(), k.cache.ptr(), k.memory.ptr()) != 0) throw py::error_already_set();
    py::int_ tasks(st.tasks);
    if (PyObject_SetAttr(compiled_.ptr(), k.last_tasks.ptr(), tasks.ptr()) != 0) throw py::error_already_set();
    if (outs.empty()) return py::none();
    if (outs.size() == 1) return outs[0];
    return py::tuple(outs);
  }

 private:
  /// A new reference to obj.name, or nullptr with the error set.
  static py::object get(PyObject* obj, const py::str& name) {
    return py::reinterpret_steal<py::object>(PyObject_GetAttr(obj, name.ptr()));
  }
  /// A new reference to obj.name(), or nullptr with the error set.
  static py::object call0(PyObject* obj, const py::str& name) {
    return py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(obj, name.ptr()));
  }

  /// Whether the settings this call was made under hold: config's version, the CPU target, no
  /// goldens to check (golden.pending(), called only once goldens were ever set in the process).
  bool settings_in_force() const {
    const Names& k = names();
    py::object version = get(config_.ptr(), k.version);
    if (!version) throw py::error_already_set();
    const int same = PyObject_RichCompareBool(version.ptr(), version_.ptr(), Py_EQ);
    if (same < 0) throw py::error_already_set();
    if (same == 0 || !target_in_force()) return false;
    py::object ever = get(golden_.ptr(), k.ever_set);
    if (!ever) throw py::error_already_set();
    if (PyObject_IsTrue(ever.ptr()) != 0) {
      py::object pending = call0(golden_.ptr(), k.pending);
      if (!pending) throw py::error_already_set();
      if (PyObject_IsTrue(pending.ptr()) != 0) return false;
    }
    return true;
  }

  /// Fills `t` from argument `i` if it is a CPU torch tensor of the dtype and shape this call was
  /// made for (not a negated view); false otherwise, possibly with a Python error set.
  bool read_argument(PyObject* a, size_t i, pypto_tensor& t) const {
    const Names& k = names();
    if (Py_TYPE(a) != reinterpret_cast<PyTypeObject*>(tensor_type_.ptr())) return false;
    py::object dtype = get(a, k.dtype);
    if (!dtype || dtype.ptr() != PyList_GET_ITEM(arg_dtypes_.ptr(), static_cast<Py_ssize_t>(i))) return false;
    py::object shape = get(a, k.shape);
    PyObject* want = PyList_GET_ITEM(arg_shapes_.ptr(), static_cast<Py_ssize_t>(i));
    if (!shape || PyObject_RichCompareBool(shape.ptr(), want, Py_EQ) != 1) return false;
    py::object is_cpu = get(a, k.is_cpu), is_neg = call0(a, k.is_neg);
    if (is_cpu.ptr() != Py_True || is_neg.ptr() != Py_False) return false;
    py::object ptr = call0(a, k.data_ptr), strides = call0(a, k.stride), offset = call0(a, k.storage_offset);
    if (!ptr || !strides || !offset || !PyTuple_Check(strides.ptr())) return false;
    const Py_ssize_t ndim = PyTuple_GET_SIZE(want);
    if (ndim > PYPTO_MAX_DIMS || PyTuple_GET_SIZE(strides.ptr()) != ndim) return false;
    const uintptr_t data = PyLong_AsUnsignedLongLong(ptr.ptr());
    const int64_t off = PyLong_AsLongLong(offset.ptr());
    if (PyErr_Occurred()) return false;
    t.data = reinterpret_cast<void*>(data);
    t.buffer = reinterpret_cast<void*>(data - off * arg_items_[i]);
    t.ndim = static_cast<int32_t>(ndim);
    t.elem_size = arg_items_[i];
    for (Py_ssize_t d = 0; d < ndim; ++d) {
      t.shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(want, d));
      t.stride[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides.ptr(), d));
    }
    return !PyErr_Occurred();
  }

  /// A new output tensor `j`: torch.empty(*dims, dtype=...) through vectorcall, or a block of the
  /// output cache for a large one.
  py::object new_output(size_t j) const {
    if (out_bytes_[j] >= cached_bytes_) return cached_empty_(out_shapes_[j], out_dtypes_[j], out_bytes_[j]);
    const std::vector<PyObject*>& argv = out_argv_[j];
    // PY_VECTORCALL_ARGUMENTS_OFFSET: argv[0] is free for the callee to use.
    PyObject* o = PyObject_Vectorcall(empty_.ptr(), argv.data() + 1,
                                      (argv.size() - 2) | PY_VECTORCALL_ARGUMENTS_OFFSET, dtype_kwname_.ptr());
    if (o == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(o);
  }

  /// Whether the CPU target in force is the program's (config.get_cpu_target's rule: the one set,
  /// else PYPTO_CPU_TARGET, else native); an unknown name in the variable is the general path's to report.
  bool target_in_force() const {
    py::object set = get(config_.ptr(), names().cpu_target);
    if (!set) throw py::error_already_set();
    if (!set.is_none()) return PyUnicode_Check(set.ptr()) && PyUnicode_CompareWithASCIIString(set.ptr(), target_.c_str()) == 0;
    const char* env = std::getenv("PYPTO_CPU_TARGET");
    return std::strcmp(env && *env ? env : "native", target_.c_str()) == 0;
  }

  /// The attribute names a call looks up, interned once (a name made from a C string per lookup
  /// is hashed every time).
  struct Names {
    py::str dtype{"dtype"}, shape{"shape"}, is_cpu{"is_cpu"}, is_neg{"is_neg"}, data_ptr{"data_ptr"},
        stride{"stride"}, storage_offset{"storage_offset"}, ever_set{"_ever_set"}, version{"_version"},
        cpu_target{"_cpu_target"}, cache{"_cache"}, memory{"memory"}, last_tasks{"_last_tasks"}, pending{"pending"};
    Names() {
      for (py::str* s : {&dtype, &shape, &is_cpu, &is_neg, &data_ptr, &stride, &storage_offset, &ever_set, &version,
                         &cpu_target, &cache, &memory, &last_tasks, &pending}) {
        PyObject* p = s->release().ptr();
        PyUnicode_InternInPlace(&p);
        *s = py::reinterpret_steal<py::str>(p);
      }
    }
  };
  static const Names& names() {
    static const Names* n = new Names;  // never destroyed: it would outlive the interpreter
    return *n;
  }

  std::shared_ptr<CompiledProgram> program_;
  py::object compiled_;
  std::vector<int64_t> dyn_;
  py::object config_, golden_, tensor_type_;
  py::list arg_dtypes_, arg_shapes_;
  std::vector<int32_t> arg_items_;
  py::list out_shapes_, out_dtypes_;
  std::vector<int32_t> out_items_;
  py::object empty_, cached_empty_;
  int64_t cached_bytes_;
  py::object version_;
  std::string target_;
  std::vector<std::vector<int64_t>> out_dims_;
  std::vector<int64_t> out_bytes_;
  std::list<py::object> out_sizes_;            // the Python ints out_argv_ points at (a list: stable addresses)
  std::vector<std::vector<PyObject*>> out_argv_;  // per output, torch.empty's vectorcall arguments
  py::tuple dtype_kwname_ = py::make_tuple(py::str("dtype"));
};

}  // namespace

void bind_compile(py::module_& m) {
  py::class_<FastCall>(m, "FastCall", "The cached-call path of a jitted function called with torch tensors.")
      .def(py::init<std::shared_ptr<CompiledProgram>, py::object, std::vector<int64_t>, py::object, py::object,
                    py::object, py::list, py::list, std::vector<int32_t>, py::list, py::list, std::vector<int32_t>,
                    py::object, py::object, int64_t>())
      .def("__call__", &FastCall::operator());

  py::class_<PassOptions>(m, "PassOptions", "Options of the pass pipeline.")
      .def(py::init<>())
      .def_readwrite("verify", &PassOptions::verify)
      .def_readwrite("fusion", &PassOptions::fusion)
      .def_readwrite("disabled", &PassOptions::disabled)
      .def_readwrite("sram_budget_kb", &PassOptions::sram_budget_kb)
      .def_readwrite("empty_kernels", &PassOptions::empty_kernels)
      .def_readwrite("matmul_panels", &PassOptions::matmul_panels)
      .def_property(
          "cpu_target", [](const PassOptions& o) { return o.target.name; },
          [](PassOptions& o, const std::string& name) { o.target = target_by_name(name); },
          "The CPU target's name; setting an unknown one raises ValueError.");

  py::class_<CompiledProgram, std::shared_ptr<CompiledProgram>>(m, "CompiledProgram")
      .def("dump", &CompiledProgram::dump, py::arg("stage") = "")
      .def_readonly("pto", &CompiledProgram::pto)
      .def_readonly("source", &CompiledProgram::cpp)
      .def("stats", &stats)
      .def_property_readonly("runs_here", [](const CompiledProgram& p) { return missing_on_host(p.target).empty(); })
      .def("output_shapes", &CompiledProgram::output_shapes)
      .def("count_tasks", &CompiledProgram::count_tasks)
      .def_property_readonly("reads_tensor_data", &CompiledProgram::reads_tensor_data)
      .def_property_readonly("dyn_dims", [](const CompiledProgram& p) { return p.ir.tensor.dyn_dims; })
      .def_property_readonly("written", [](const CompiledProgram& p) { return p.written; },
                             "Per entry tensor (parameters, then outputs): whether some task writes it.")
      .def("run", &run, py::arg("tensors"), py::arg("scalars"), py::arg("trace_path") = "")
      .def("build_only", &build_only, py::arg("tensors"), py::arg("scalars"),
           "Builds the task graph in recording mode; returns (tasks, edges).")
      .def("record", &record, py::arg("tensors"), py::arg("scalars"),
           "The task graph the orchestration builds for these tensors, without running kernels.")
      .def("entry_memrefs",
           [](const CompiledProgram& p) {
             // (name, dtype, dims as Exprs, is_output) of the tensors the entry takes, in order.
             const ExecutionGraph& g = p.ir.execution;
             py::list out;
             auto add = [&](int id, bool is_out) {
               const MemRef& m = g.memrefs.at(id);
               out.append(py::make_tuple(m.name, m.dtype, m.shape, is_out));
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
  m.def(
      "compiler_flags", [](const std::string& target) { return codegen::compiler_flags(target_by_name(target)); },
      py::arg("cpu_target") = "native", "Flags generated code is compiled with (before -o and the source).");
  m.def("cpu_targets", &target_names, "The CPU target names, native first.");
  m.def(
      "cpu_target_info",
      [](const std::string& name) {
        Target t = target_by_name(name);
        py::dict d;
        d["name"] = t.name;
        d["arch"] = t.arch;
        d["features"] = t.features;
        d["vector_bytes"] = t.vector_bytes;
        d["library"] = t.library_name();
        d["int8_dot_products"] = t.int8_dot_products();
        d["bf16_dot_products"] = t.bf16_dot_products();
        d["flags"] = t.flags;
        d["l1d_bytes"] = t.l1d_bytes;
        d["l2_bytes"] = t.l2_bytes;
        d["l3_bytes"] = t.l3_bytes;
        d["missing_here"] = missing_on_host(t);
        d["description"] = t.describe();
        return d;
      },
      py::arg("name"), "The Target of a name, as a dict (missing_here: what this CPU lacks to run its code).");
}

}  // namespace pypto::bindings
