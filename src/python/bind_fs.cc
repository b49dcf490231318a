// bind_fs.cc — _penstock.FileSystem: an fs container's files (as Handles) and namespace calls
// by path (python/penstock/fs.py is the API users see). Blocking calls release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "python/native_fs.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace penstock::python {
namespace {

std::shared_ptr<fs::FileSystem> Need(NativeFs& self) { return ValueOrThrow(self.Get()); }

std::shared_ptr<Handle> OpenFile(NativeFs& self, const std::string& path, unsigned flags, uint32_t mode) {
  std::shared_ptr<Handle> h = ValueOrThrow(WithoutGil([&] { return self.OpenFile(path, flags, mode); }));
  self.owner().Adopt(h);
  return h;
}

py::list ListDir(NativeFs& self, const std::string& path) {
  std::vector<fs::DirEntry> entries = ValueOrThrow(WithoutGil([&] { return self.ListDir(path); }));
  py::list out;
  for (const fs::DirEntry& e : entries) out.append(e.name);
  return out;
}

// (name, is_dir) of every entry.
py::list ScanDir(NativeFs& self, const std::string& path) {
  std::vector<fs::DirEntry> entries = ValueOrThrow(WithoutGil([&] { return self.ListDir(path); }));
  py::list out;
  for (const fs::DirEntry& e : entries) out.append(py::make_tuple(e.name, e.type == fs::FileType::kDirectory));
  return out;
}

py::list ReadMany(std::shared_ptr<NativeFs> self, const std::vector<std::string>& paths) {
  AsyncOps& async = self->owner().async();
  py::list out;
  for (const std::string& path : paths) {
    auto op = std::make_unique<PendingOp>();
    op->value = FutureValue::kBytes;
    auto [id, future] = async.Track(std::move(op));
    async.Post(id, [self, &async, path](uint64_t id) {
      async.OpenThenSubmit(id, [&] { return self->OpenFile(path, fs::kRead, 0); }, IoKind::kRead, 0);
    });
    out.append(future);
  }
  return out;
}

template <typename F>
void Call(NativeFs& self, F&& f) {
  std::shared_ptr<fs::FileSystem> fs = Need(self);
  ThrowIfError(WithoutGil([&] { return f(*fs); }));
}

}  // namespace

void BindFs(py::module_& m) {
  py::class_<NativeFs, std::shared_ptr<NativeFs>>(m, "FileSystem")
      .def_property_readonly("container", &NativeFs::container)
      .def("open", &OpenFile, py::arg("path"), py::arg("flags"), py::arg("mode") = 0644)
      .def("listdir", &ListDir, py::arg("path") = "/")
      .def("scandir", &ScanDir, py::arg("path") = "/")
      .def("stat", [](NativeFs& self, const std::string& path) {
        std::shared_ptr<fs::FileSystem> fs = Need(self);
        return ValueOrThrow(WithoutGil([&] { return fs->StatPath(path); }));
      })
      .def("mkdir", [](NativeFs& self, const std::string& path, uint32_t mode, bool parents) {
        Call(self, [&](fs::FileSystem& fs) { return fs.MkdirPath(path, mode, parents).status(); });
      }, py::arg("path"), py::arg("mode") = 0755, py::arg("parents") = false)
      .def("remove", [](NativeFs& self, const std::string& path) {
        Call(self, [&](fs::FileSystem& fs) { return fs.UnlinkPath(path); });
      })
      .def("rmdir", [](NativeFs& self, const std::string& path) {
        Call(self, [&](fs::FileSystem& fs) { return fs.RmdirPath(path); });
      })
      .def("rename", [](NativeFs& self, const std::string& from, const std::string& to) {
        Call(self, [&](fs::FileSystem& fs) { return fs.RenamePath(from, to); });
      })
      .def("read_many", &ReadMany, py::arg("paths"))
      .def("abandon", &NativeFs::Abandon);
}

}  // namespace penstock::python
