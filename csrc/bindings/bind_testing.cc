// `_C.testing`: helpers for pypto's own tests, not part of the API. A `Runtime` of its own size
// that runs task graphs built from Python callables (or records them), and the sizes of the
// runtime's task records.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/target.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace pypto::bindings {

/// (id, name, buffer_bytes, preds) per recorded task (bind_runtime.cc).
py::list recorded_tasks(const runtime::TaskGraphRecord& graph);

namespace {

using runtime::Runtime;

// Region given as (buffer_id, offsets, extents).
using RegionSpec = std::tuple<int64_t, std::vector<int64_t>, std::vector<int64_t>>;

struct TaskSpec {
  std::string name;
  py::object fn;
  std::vector<pypto_region> inputs;
  std::vector<pypto_region> outputs;
};

// Maps test buffer ids to distinct fake base pointers. The pointers are never
// dereferenced: they only give each buffer its identity for dependency tracking.
class FakeBuffers {
 public:
  pypto_region region(const RegionSpec& spec) {
    const auto& [id, offsets, extents] = spec;
    if (offsets.size() != extents.size()) {
      throw py::value_error("region offsets and extents must have the same length");
    }
    if (offsets.size() > PYPTO_MAX_DIMS) {
      throw py::value_error("region rank exceeds " + std::to_string(PYPTO_MAX_DIMS));
    }
    auto it = bases_.find(id);
    if (it == bases_.end()) {
      auto fake = reinterpret_cast<void*>(static_cast<uintptr_t>(bases_.size() + 1) << 32);
      it = bases_.emplace(id, fake).first;
    }
    pypto_region r{};
    r.base = it->second;
    r.ndim = static_cast<int32_t>(offsets.size());
    r.elem_size = 1;
    // Row-major strides of a buffer whose dims are large enough for any test box,
    // while the whole buffer still fits in 60 bits of index space.
    const int bits = r.ndim > 0 ? std::min(20, 60 / r.ndim) : 0;
    const int64_t dim = int64_t{1} << bits;
    int64_t stride = 1;
    for (int d = r.ndim - 1; d >= 0; --d) {
      if (offsets[d] < 0 || extents[d] < 0 || offsets[d] + extents[d] > dim) {
        throw py::value_error("region box [" + std::to_string(offsets[d]) + ", +" + std::to_string(extents[d]) +
                              ") in dim " + std::to_string(d) + " exceeds the test buffer size " +
                              std::to_string(dim));
      }
      r.offset[d] = offsets[d];
      r.extent[d] = extents[d];
      r.stride[d] = stride;
      stride *= dim;
    }
    return r;
  }

 private:
  std::unordered_map<int64_t, void*> bases_;
};

std::vector<pypto_region> parse_regions(const py::dict& task, const char* key, FakeBuffers& buffers) {
  std::vector<pypto_region> regions;
  if (!task.contains(key)) return regions;
  for (const auto& spec : task[key].cast<std::vector<RegionSpec>>()) regions.push_back(buffers.region(spec));
  return regions;
}

std::vector<TaskSpec> parse_tasks(const py::list& tasks) {
  FakeBuffers buffers;
  std::vector<TaskSpec> specs;
  specs.reserve(tasks.size());
  for (const auto& item : tasks) {
    auto task = item.cast<py::dict>();
    TaskSpec spec;
    spec.name = task["name"].cast<std::string>();
    spec.fn = task["fn"].cast<py::object>();
    if (!PyCallable_Check(spec.fn.ptr())) throw py::type_error("task '" + spec.name + "': fn is not callable");
    spec.inputs = parse_regions(task, "inputs", buffers);
    spec.outputs = parse_regions(task, "outputs", buffers);
    specs.push_back(std::move(spec));
  }
  return specs;
}

// The orchestration submitting `specs` in order; `specs` must outlive the run.
std::function<void(const pypto_runtime_api*)> orchestration(Runtime& rt, const std::vector<TaskSpec>& specs) {
  return [&rt, &specs](const pypto_runtime_api*) {
      for (size_t i = 0; i < specs.size(); ++i) {
        // Capture the callable by pointer: copying a py::object would touch its
        // refcount without the GIL. `specs` outlives the run.
        const py::object* fn = &specs[i].fn;
        const auto index = static_cast<int64_t>(i);
        rt.submit_regions(
            specs[i].name,
            [fn, index](const pypto_region*, int32_t) {
              std::string error;
              {
                py::gil_scoped_acquire gil;
                try {
                  (*fn)(index);
                } catch (py::error_already_set& e) {
                  // Format and drop the Python exception while the GIL is still held.
                  error = e.what();
                }
              }
              if (!error.empty()) throw std::runtime_error(error);
            },
            specs[i].inputs, specs[i].outputs);
      }
  };
}

py::dict run_tasks(Runtime& rt, const py::list& tasks, const std::string& trace_path) {
  std::vector<TaskSpec> specs = parse_tasks(tasks);
  runtime::RunStats stats;
  {
    // Workers need the GIL to call into Python, so the caller must not hold it while waiting.
    py::gil_scoped_release release;
    auto orchestrate = orchestration(rt, specs);
    stats = trace_path.empty() ? rt.run(orchestrate) : rt.run(orchestrate, trace_path);
  }
  py::dict result;
  if (!stats.trace_error.empty()) throw runtime::TraceError(stats.trace_error);
  result["tasks"] = stats.tasks;
  result["edges"] = stats.edges;
  return result;
}

py::list record_tasks(Runtime& rt, const py::list& tasks) {
  std::vector<TaskSpec> specs = parse_tasks(tasks);
  runtime::TaskGraphRecord graph;
  {
    py::gil_scoped_release release;
    graph = rt.record(orchestration(rt, specs));
  }
  return recorded_tasks(graph);
}

}  // namespace

/// Registers the `testing` submodule.
void bind_testing(py::module_& m) {
  py::module_ t = m.def_submodule("testing", "Helpers for pypto's own tests (not part of the API).");
  py::class_<Runtime>(t, "Runtime", "A worker pool with region-based dependency tracking.")
      .def(py::init<int>(), py::arg("num_workers") = 0)
      .def_property_readonly("num_workers", &Runtime::num_workers)
      .def("run_tasks", &run_tasks, py::arg("tasks"), py::arg("trace_path") = "",
           "Runs dicts {name, fn(task_index), inputs, outputs} as one task graph; regions are "
           "(buffer_id, offsets, extents). Returns {tasks, edges}; a failing fn raises RuntimeError. "
           "A non-empty trace_path writes a Chrome trace (otherwise PYPTO_TRACE applies).")
      .def("record_tasks", &record_tasks, py::arg("tasks"),
           "Builds the task graph of run_tasks' dicts without running any fn; returns a list of "
           "(id, name, buffer_bytes, preds).")
      .def_property(
          "task_window", &Runtime::task_window,
          [](Runtime& r, int64_t n) { r.set_task_window(n); },
          "Bound on submitted but unfinished tasks.");
  t.def("task_record_bytes", &runtime::Runtime::task_record_bytes, "sizeof of the fixed part of a task record.");
  t.def("region_record_bytes", &runtime::Runtime::region_record_bytes, py::arg("ndim"),
         "Bytes of one region of rank ndim stored in a task record.");
  t.def("link_bytes", &runtime::Runtime::link_bytes, "Bytes of one successor link stored in a task record.");
  t.def("region_bytes", [] { return sizeof(pypto_region); }, "sizeof(pypto_region).");
  t.def(
      "set_host_features",
      [](const std::optional<std::vector<std::string>>& features) {
        set_host_features_for_testing(features ? &*features : nullptr);
      },
      py::arg("features"),
      "Pretends this CPU has exactly these /proc/cpuinfo features (None: the real ones again), to test "
      "what happens with code built for a CPU target it lacks.");
}

}  // namespace pypto::bindings
