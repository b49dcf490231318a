// bind_async.cc — the client's asynchronous calls: each returns concurrent.futures.Future(s)
// resolved by AsyncOps (async_ops.h). Reads and writes go through the CompletionQueue; the
// opens and whole-object puts before them, which the C++ API only has in blocking form, run
// on the AsyncOps pool.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "python/async_ops.h"
#include "python/bindings.h"
#include "python/native_client.h"

namespace py = pybind11;

namespace penstock::python {
namespace {

std::unique_ptr<PendingOp> NewOp(FutureValue value, py::handle buffer, HeldBuffer::Access access) {
  auto op = std::make_unique<PendingOp>();
  op->value = value;
  if (!buffer.is_none()) op->buffer = std::make_unique<HeldBuffer>(buffer, access);
  return op;
}

// Opens object `name` of `container` on a pool thread, then submits `kind` at `offset`.
py::object OpenAndSubmit(NativeClient& self, const std::string& container, const std::string& name,
                         std::unique_ptr<PendingOp> op, IoKind kind, uint64_t offset) {
  Client& client = self.client();
  AsyncOps& async = self.async();
  auto [id, future] = async.Track(std::move(op));
  async.Post(id, [&client, &async, container, name, kind, offset](uint64_t id) {
    async.OpenThenSubmit(id, [&]() -> Result<std::shared_ptr<Handle>> {
      OpenOptions o;
      o.create = kind == IoKind::kWrite;
      PS_ASSIGN_OR_RETURN(std::shared_ptr<Object> obj, client.Open(container, name, o));
      return MakeObjectHandle(std::move(obj));
    }, kind, offset);
  });
  return future;
}

py::list GetMany(NativeClient& self, const std::string& container, const std::vector<std::string>& names) {
  py::list out;
  for (const std::string& name : names) {
    out.append(OpenAndSubmit(self, container, name, NewOp(FutureValue::kBytes, py::none(), {}), IoKind::kRead, 0));
  }
  return out;
}

// A whole-object put (atomic replace) on a pool thread.
py::object PutAsync(NativeClient& self, const std::string& container, const std::string& name, py::handle data) {
  Client& client = self.client();
  AsyncOps& async = self.async();
  std::unique_ptr<PendingOp> op = NewOp(FutureValue::kNone, data, HeldBuffer::Access::kRead);
  std::span<const std::byte> bytes(op->buffer->data(), op->buffer->size());
  auto [id, future] = async.Track(std::move(op));  // holds the buffer until resolved
  async.Post(id, [&client, &async, container, name, bytes](uint64_t id) {
    async.Resolve(id, client.Put(container, name, bytes));
  });
  return future;
}

py::list PutMany(NativeClient& self, const std::string& container, const std::vector<std::string>& names,
                 const py::sequence& datas) {
  if (names.size() != datas.size()) throw py::value_error("put_many: as many names as data buffers, please");
  py::list out;
  for (size_t i = 0; i < names.size(); ++i) out.append(PutAsync(self, container, names[i], datas[i]));
  return out;
}

py::object ReadAsync(NativeClient& self, const std::string& container, const std::string& name, uint64_t offset,
                     py::object out) {
  const FutureValue value = out.is_none() ? FutureValue::kBytes : FutureValue::kCount;
  return OpenAndSubmit(self, container, name, NewOp(value, out, HeldBuffer::Access::kWrite), IoKind::kRead,
                       offset);
}

py::object WriteAsync(NativeClient& self, const std::string& container, const std::string& name, py::handle data,
                      std::optional<uint64_t> offset) {
  if (!offset) return PutAsync(self, container, name, data);
  return OpenAndSubmit(self, container, name, NewOp(FutureValue::kCount, data, HeldBuffer::Access::kRead),
                       IoKind::kWrite, *offset);
}

// A read or write of an open handle, submitted from this thread.
py::object HandleAsync(NativeClient& self, Handle& handle, IoKind kind, uint64_t offset, py::handle buffer) {
  AsyncOps& async = self.async();
  const auto access = kind == IoKind::kRead ? HeldBuffer::Access::kWrite : HeldBuffer::Access::kRead;
  auto [id, future] = async.Track(NewOp(FutureValue::kCount, buffer, access));
  WithoutGil([&, id = id] {
    async.Submit(id, handle, kind, offset);
    return 0;
  });
  return future;
}

}  // namespace

void BindAsync(ClientClass& cls) {
  cls.def("get_many", &GetMany, py::arg("container"), py::arg("names"))
      .def("put_many", &PutMany, py::arg("container"), py::arg("names"), py::arg("datas"))
      .def("read_async", &ReadAsync, py::arg("container"), py::arg("name"), py::arg("offset") = 0,
           py::arg("out") = py::none())
      .def("write_async", &WriteAsync, py::arg("container"), py::arg("name"), py::arg("data"),
           py::arg("offset") = std::nullopt)
      .def("handle_read_async", [](NativeClient& self, Handle& h, uint64_t offset, py::handle out) {
        return HandleAsync(self, h, IoKind::kRead, offset, out);
      })
      .def("handle_write_async", [](NativeClient& self, Handle& h, uint64_t offset, py::handle data) {
        return HandleAsync(self, h, IoKind::kWrite, offset, data);
      });
}

}  // namespace penstock::python
