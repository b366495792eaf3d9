// Python access to the task runtime, mainly so that tests can build task
// graphs from Python callables and check scheduling behaviour.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace py = pybind11;

namespace pypto::bindings {

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

py::dict run_tasks(Runtime& rt, const py::list& tasks) {
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

  runtime::RunStats stats;
  {
    // Workers need the GIL to call into Python, so the caller must not hold it while waiting.
    py::gil_scoped_release release;
    stats = rt.run([&](const pypto_runtime_api*) {
      for (size_t i = 0; i < specs.size(); ++i) {
        // Capture the callable by pointer: copying a py::object would touch its
        // refcount without the GIL. `specs` outlives the run.
        const py::object* fn = &specs[i].fn;
        const auto index = static_cast<int64_t>(i);
        int64_t t = rt.task_alloc(
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
            0);
        for (const auto& r : specs[i].inputs) rt.add_input(t, r);
        for (const auto& r : specs[i].outputs) rt.add_output(t, r);
        rt.submit(t);
      }
    });
  }
  py::dict result;
  result["tasks"] = stats.tasks;
  result["edges"] = stats.edges;
  return result;
}

}  // namespace

/// Registers the `runtime` submodule.
void bind_runtime(py::module_& m) {
  py::module_ rt = m.def_submodule("runtime", "Task-graph runtime that executes generated code.");

  py::class_<Runtime>(rt, "Runtime", "A worker pool with region-based dependency tracking.")
      .def(py::init<int>(), py::arg("num_workers") = 0)
      .def_property_readonly("num_workers", &Runtime::num_workers)
      .def("run_tasks", &run_tasks, py::arg("tasks"),
           "Runs dicts {name, fn(task_index), inputs, outputs} as one task graph; regions are "
           "(buffer_id, offsets, extents). Returns {tasks, edges}; a failing fn raises RuntimeError.");

  rt.def(
      "default_num_workers", [] { return runtime::default_runtime().num_workers(); },
      "Number of workers of the process-wide runtime.");
}

}  // namespace pypto::bindings
