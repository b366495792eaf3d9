// Maps the C++ error hierarchy (ir/errors.h) and the runtime's task errors to
// Python exceptions, so that no bare std:: message reaches a user.
#include <pybind11/pybind11.h>

#include "ir/errors.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace pypto::bindings {

void bind_errors(py::module_& m) {
  // Order matters: pybind11 tries translators newest first, so the catch-all goes first.
  static py::exception<std::exception> internal_any(m, "InternalError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const py::error_already_set&) {
      throw;
    } catch (const pypto::Error&) {
      throw;
    } catch (const runtime::TaskError&) {
      throw;
    } catch (const std::exception& e) {
      py::set_error(internal_any, (std::string("pypto internal error: ") + e.what()).c_str());
    }
  });
  static py::exception<pypto::UserError>& user_error =
      py::register_exception<pypto::UserError>(m, "UserError", PyExc_ValueError);
  py::register_exception<pypto::TypeError>(m, "UserTypeError", PyExc_TypeError);
  py::register_exception<pypto::VerifyError>(m, "VerifyError", PyExc_RuntimeError);
  py::register_exception<pypto::CompileError>(m, "CompileError", PyExc_RuntimeError);
  py::register_exception<pypto::NotSupportedError>(m, "NotSupportedError", PyExc_NotImplementedError);
  py::register_exception<pypto::InternalError>(m, "PyptoInternalError", internal_any.ptr());
  py::register_exception<runtime::TaskError>(m, "TaskError", PyExc_RuntimeError);
  // A malformed PYPTO_* variable or limit is the user's ValueError; running out of memory is a
  // MemoryError, as for any Python allocation.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const runtime::ConfigError& e) {
      py::set_error(user_error, e.what());
    } catch (const runtime::OutOfMemory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "pypto: out of memory");
    }
  });
  // A SyntaxError with the position as `line` and `column` attributes.
  static py::exception<PtoSyntaxError> pto_syntax(m, "PtoSyntaxError", PyExc_SyntaxError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PtoSyntaxError& e) {
      py::object err = py::reinterpret_borrow<py::object>(pto_syntax.ptr())(e.what());
      err.attr("line") = e.line();
      err.attr("column") = e.column();
      PyErr_SetObject(pto_syntax.ptr(), err.ptr());
    }
  });
}

}  // namespace pypto::bindings
