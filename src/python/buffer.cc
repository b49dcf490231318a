#include "python/buffer.h"

namespace py = pybind11;

namespace penstock::python {

HeldBuffer::HeldBuffer(py::handle obj, Access access) {
  const int flags = access == Access::kWrite ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
  if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) throw py::error_already_set();
}

HeldBuffer::~HeldBuffer() { PyBuffer_Release(&view_); }

}  // namespace penstock::python
