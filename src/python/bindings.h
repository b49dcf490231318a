// bindings.h — the parts of the _penstock extension module, each defined in its own file:
// value types (bind_values.cc), the client (bind_client.cc), its asynchronous calls
// (bind_async.cc), open objects and files (bind_handle.cc), fs containers (bind_fs.cc).
// python/penstock/*.py is the API users see; this module is its thin native layer.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

#include "python/native_client.h"

namespace penstock::python {

void BindValues(pybind11::module_& m);
void BindClient(pybind11::module_& m);
using ClientClass = pybind11::class_<NativeClient, std::shared_ptr<NativeClient>>;
void BindAsync(ClientClass& cls);
void BindHandle(pybind11::module_& m);
void BindFs(pybind11::module_& m);

// Runs `f` with the GIL released and returns what it returns.
template <typename F>
auto WithoutGil(F&& f) {
  pybind11::gil_scoped_release nogil;
  return std::forward<F>(f)();
}

}  // namespace penstock::python
