// bind_values.cc — the value types the client returns, as read-only Python objects.
#include <pybind11/pybind11.h>

#include "penstock/client.h"
#include "penstock/fs.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace penstock::python {
namespace {

const char* TypeName(fs::FileType t) {
  switch (t) {
    case fs::FileType::kDirectory: return "dir";
    case fs::FileType::kSymlink: return "symlink";
    default: return "file";
  }
}

}  // namespace

void BindValues(py::module_& m) {
  py::class_<ContainerInfo>(m, "ContainerInfo")
      .def_readonly("id", &ContainerInfo::id)
      .def_readonly("name", &ContainerInfo::name)
      .def_property_readonly("redundancy", [](const ContainerInfo& c) { return c.redundancy.ToString(); })
      .def_property_readonly("min_durable", [](const ContainerInfo& c) { return c.redundancy.quorum(); })
      .def_readonly("stripe_unit", &ContainerInfo::stripe_unit)
      .def_property_readonly("created", [](const ContainerInfo& c) { return c.created_ms / 1000.0; })
      .def("__repr__", [](const ContainerInfo& c) {
        return "ContainerInfo(name='" + c.name + "', redundancy='" + c.redundancy.ToString() +
               "', stripe_unit=" + std::to_string(c.stripe_unit) + ")";
      });

  py::class_<ObjectInfo>(m, "ObjectInfo")
      .def_readonly("name", &ObjectInfo::name)
      .def_readonly("size", &ObjectInfo::size)
      .def_readonly("stripe_unit", &ObjectInfo::stripe_unit)
      .def_property_readonly("mtime", [](const ObjectInfo& o) { return o.mtime_ms / 1000.0; })
      .def_readonly("lost", &ObjectInfo::lost)
      .def("__repr__", [](const ObjectInfo& o) {
        return "ObjectInfo(name='" + o.name + "', size=" + std::to_string(o.size) + ")";
      });

  py::class_<fs::Attr>(m, "FileAttr")
      .def_readonly("ino", &fs::Attr::ino)
      .def_property_readonly("type", [](const fs::Attr& a) { return TypeName(a.type); })
      .def_property_readonly("is_dir", [](const fs::Attr& a) { return a.type == fs::FileType::kDirectory; })
      .def_readonly("mode", &fs::Attr::mode)
      .def_readonly("uid", &fs::Attr::uid)
      .def_readonly("gid", &fs::Attr::gid)
      .def_readonly("nlink", &fs::Attr::nlink)
      .def_readonly("size", &fs::Attr::size)
      .def_property_readonly("mtime", [](const fs::Attr& a) { return a.mtime_ns / 1e9; })
      .def_property_readonly("atime", [](const fs::Attr& a) { return a.atime_ns / 1e9; })
      .def_property_readonly("ctime", [](const fs::Attr& a) { return a.ctime_ns / 1e9; })
      .def("__repr__", [](const fs::Attr& a) {
        return std::string("FileAttr(type='") + TypeName(a.type) + "', size=" + std::to_string(a.size) + ")";
      });
}

}  // namespace penstock::python
