// buffer.h — a caller's Python buffer (bytes, bytearray, memoryview, numpy array, ...) held
// for the length of an I/O: PyObject_GetBuffer on construction, PyBuffer_Release on
// destruction. The bytes are C-contiguous; a writable one is asked for writability, so a
// read into bytes (read-only) raises BufferError and a non-buffer raises TypeError before any
// I/O starts. Construct and destroy with the GIL held; the memory may be used without it
// (the export keeps the object from resizing or freeing it meanwhile).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace penstock::python {

class HeldBuffer {
 public:
  enum class Access { kRead, kWrite };
  // Throws pybind11::error_already_set (TypeError, BufferError) when `obj` cannot give it.
  HeldBuffer(pybind11::handle obj, Access access);
  ~HeldBuffer();
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

}  // namespace penstock::python
