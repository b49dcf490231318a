#include "python/status_error.h"

namespace py = pybind11;

namespace penstock::python {

py::object StatusException(const Status& status) {
  py::object from_status = py::module_::import("penstock.errors").attr("from_status");
  return from_status(static_cast<int>(status.code()), status.message());
}

void ThrowStatus(const Status& status) {
  py::object exc = StatusException(status);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

}  // namespace penstock::python
