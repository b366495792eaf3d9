// The pypto._C extension module: one bind_* function per area.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace pypto::bindings {
void bind_errors(py::module_& m);
void bind_ir(py::module_& m);
void bind_compile(py::module_& m);
void bind_runtime(py::module_& m);
void bind_testing(py::module_& m);
void bind_pto(py::module_& m);
}  // namespace pypto::bindings

PYBIND11_MODULE(_C, m) {
  m.doc() = "pypto's C++ core: IR, passes, codegen and runtime.";
  pypto::bindings::bind_errors(m);
  pypto::bindings::bind_ir(m);
  pypto::bindings::bind_compile(m);
  pypto::bindings::bind_runtime(m);
  pypto::bindings::bind_testing(m);
  pypto::bindings::bind_pto(m);
}
