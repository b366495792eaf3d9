// Python access to the process-wide task runtime: its window and counters, and the output cache.
// The helpers that build task graphs from Python callables are test-only (bind_testing.cc).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/memory.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace pypto::bindings {

/// (id, name, buffer_bytes, preds) per recorded task; also used by bind_compile.cc.
py::list recorded_tasks(const runtime::TaskGraphRecord& graph);

namespace {

// A block of the output cache, owned by Python: the arrays viewing it keep it alive, and it goes
// back to the cache when the last one is gone.
class OutputBlock {
 public:
  explicit OutputBlock(size_t bytes) : data_(runtime::BlockCache::instance().acquire(bytes)), bytes_(bytes) {}
  ~OutputBlock() { runtime::BlockCache::instance().release(data_, bytes_); }
  OutputBlock(const OutputBlock&) = delete;
  OutputBlock& operator=(const OutputBlock&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

}  // namespace

py::list recorded_tasks(const runtime::TaskGraphRecord& graph) {
  py::list out;
  for (const auto& t : graph.tasks) out.append(py::make_tuple(t.id, t.name, t.buffer_bytes, t.preds));
  return out;
}

/// Registers the `runtime` submodule.
void bind_runtime(py::module_& m) {
  py::module_ rt = m.def_submodule("runtime", "Task-graph runtime that executes generated code.");

  // A trace file that cannot be written is an OSError, not an internal error.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const runtime::TraceError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });

  rt.def(
      "set_task_window", [](int64_t n) { runtime::default_runtime().set_task_window(n); },
      py::arg("n"),
      "Sets the task window of the process-wide runtime.");
  rt.def(
      "task_window", [] { return runtime::default_runtime().task_window(); },
      "Task window of the process-wide runtime.");
  rt.def(
      "last_run_stats",
      [] {
        runtime::RunStats s = runtime::default_runtime().last_stats();
        py::dict d;
        d["tasks"] = s.tasks;
        d["edges"] = s.edges;
        d["task_bytes"] = s.task_bytes;
        d["peak_live_tasks"] = s.peak_live_tasks;
        d["build_ns"] = s.build_ns;
        d["total_ns"] = s.total_ns;
        return d;
      },
      "Counters of the process-wide runtime's last run or build: tasks, edges, task_bytes "
      "(bytes of task records allocated), peak_live_tasks, build_ns (orchestration wall time) and "
      "total_ns (whole run).");
  rt.def(
      "advise_huge_pages",
      [](uintptr_t ptr, size_t bytes) { return runtime::advise_huge_pages(reinterpret_cast<void*>(ptr), bytes); },
      py::arg("ptr"), py::arg("bytes"),
      "Asks for transparent huge pages on the 2 MiB-aligned part of a fresh allocation; returns whether "
      "anything was advised.");

  py::class_<OutputBlock>(rt, "OutputBlock", py::buffer_protocol(),
                          "Writable memory from the output cache (a bytes-like buffer); returned to the cache when "
                          "the last array viewing it is gone.")
      .def(py::init<size_t>(), py::arg("bytes"))
      .def_property_readonly("address", [](const OutputBlock& b) { return reinterpret_cast<uintptr_t>(b.data()); })
      .def_property_readonly("nbytes", &OutputBlock::bytes)
      .def_buffer([](OutputBlock& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.bytes())}, {py::ssize_t{1}});
      });
  rt.def(
      "output_cache_limit", [] { return runtime::BlockCache::instance().limit(); },
      "Byte limit of the blocks the output cache keeps.");
  rt.def(
      "set_output_cache_limit", [](size_t bytes) { runtime::BlockCache::instance().set_limit(bytes); },
      py::arg("bytes"), "Sets the output cache's byte limit, freeing cached blocks beyond it.");
  rt.def(
      "clear_output_cache", [] { runtime::BlockCache::instance().clear(); }, "Frees every cached output block.");
  rt.def(
      "output_cache_stats",
      [] {
        const auto st = runtime::BlockCache::instance().stats();
        py::dict d;
        d["cached_bytes"] = st.cached_bytes;
        d["hits"] = st.hits;
        d["misses"] = st.misses;
        d["limit"] = runtime::BlockCache::instance().limit();
        return d;
      },
      "Cached bytes, hits, misses and limit of the output cache.");

  rt.def(
      "default_num_workers", [] { return runtime::default_runtime().num_workers(); },
      "Number of workers of the process-wide runtime.");
}

}  // namespace pypto::bindings
