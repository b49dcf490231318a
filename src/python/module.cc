// module.cc — the _penstock extension module: a thin layer over libpenstock (the client
// library); python/penstock is the API users import.
#include <pybind11/pybind11.h>

#include "python/bindings.h"

PYBIND11_MODULE(_penstock, m) {
  m.doc() = "Native layer of the penstock package (use `import penstock`).";
  penstock::python::BindValues(m);
  penstock::python::BindHandle(m);
  penstock::python::BindClient(m);
  penstock::python::BindFs(m);
}
