// bind_handle.cc — _penstock.Handle: an open object or file, read and written at offsets
// (python/penstock/io.py builds the file object on it). Blocking calls release the GIL.
#include <pybind11/pybind11.h>

#include <algorithm>

#include "python/bindings.h"
#include "python/buffer.h"
#include "python/handle.h"
#include "python/status_error.h"
#include "python/transfer.h"

namespace py = pybind11;

namespace penstock::python {
namespace {

// Reads into `out` (any writable C-contiguous buffer) from `offset`: the bytes read, 0 at or
// past the end.
uint64_t ReadInto(Handle& h, uint64_t offset, py::handle out) {
  HeldBuffer buf(out, HeldBuffer::Access::kWrite);
  const uint64_t size = ValueOrThrow(h.Size());
  if (offset >= size || buf.size() == 0) return 0;
  const size_t len = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - offset));
  return Transfer(h, IoKind::kRead, offset, buf.data(), len);
}

uint64_t WriteFrom(Handle& h, uint64_t offset, py::handle data) {
  HeldBuffer buf(data, HeldBuffer::Access::kRead);
  if (buf.size() == 0) return 0;
  return Transfer(h, IoKind::kWrite, offset, buf.data(), buf.size());
}

}  // namespace

void BindHandle(py::module_& m) {
  py::class_<Handle, std::shared_ptr<Handle>>(m, "Handle")
      .def("size", [](Handle& h) { return ValueOrThrow(h.Size()); })
      .def("read_into", &ReadInto, py::arg("offset"), py::arg("out"),
           "Reads into `out` from `offset`; returns the bytes read (0 at the end).")
      .def("write_from", &WriteFrom, py::arg("offset"), py::arg("data"),
           "Writes all of `data` at `offset`; returns its length.")
      .def("truncate", [](Handle& h, uint64_t size) { ThrowIfError(WithoutGil([&] { return h.Truncate(size); })); })
      .def("flush", [](Handle& h) { ThrowIfError(WithoutGil([&] { return h.Flush(); })); })
      .def("close", [](Handle& h) { ThrowIfError(WithoutGil([&] { return h.Close(); })); })
      .def("abandon", &Handle::Abandon, "Forgets the object without releasing it (in a forked child).");
}

}  // namespace penstock::python
