// bind_client.cc — _penstock.Client: connecting, containers and whole objects
// (python/penstock/client.py is the API users see). Every call that may wait releases the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "penstock/client.h"
#include "python/bindings.h"
#include "python/buffer.h"
#include "python/native_client.h"
#include "python/native_fs.h"
#include "python/status_error.h"
#include "python/transfer.h"

namespace py = pybind11;

namespace penstock::python {
namespace {

std::shared_ptr<NativeClient> Connect(std::string mgmt, std::string api_key, std::string tls_ca,
                                      std::string tls_cert, std::string tls_key, uint64_t timeout_ms,
                                      unsigned data_workers, bool local_direct,
                                      std::vector<std::string> net_devices, unsigned max_inflight_stripes,
                                      unsigned open_threads) {
  ClientOptions o;
  o.mgmt_address = std::move(mgmt);
  o.api_key = std::move(api_key);
  o.tls_ca = std::move(tls_ca);
  o.tls_cert = std::move(tls_cert);
  o.tls_key = std::move(tls_key);
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.data_workers = data_workers;
  o.local_direct = local_direct;
  o.net_devices = std::move(net_devices);
  if (max_inflight_stripes > 0) o.max_inflight_stripes = max_inflight_stripes;
  return ValueOrThrow(WithoutGil([&] { return NativeClient::Connect(o, open_threads); }));
}

ContainerInfo CreateContainer(NativeClient& self, const std::string& name, std::optional<std::string> redundancy,
                              uint64_t stripe_unit, uint32_t min_durable) {
  ContainerProps props;
  if (redundancy) props.redundancy = ValueOrThrow(ParseRedundancy(*redundancy));
  props.stripe_unit = stripe_unit;
  props.min_durable = min_durable;
  Client& c = self.client();
  return ValueOrThrow(WithoutGil([&] { return c.CreateContainer(name, props); }));
}

void Put(NativeClient& self, const std::string& container, const std::string& name, py::handle data) {
  HeldBuffer buf(data, HeldBuffer::Access::kRead);
  Client& c = self.client();
  ThrowIfError(WithoutGil([&] { return c.Put(container, name, {buf.data(), buf.size()}); }));
}

// The whole object as bytes, read straight into the bytes object (no copy).
py::bytes Get(NativeClient& self, const std::string& container, const std::string& name) {
  Client& c = self.client();
  std::shared_ptr<Object> obj = ValueOrThrow(WithoutGil([&] { return c.Open(container, name); }));
  std::shared_ptr<Handle> h = MakeObjectHandle(std::move(obj));
  const uint64_t size = ValueOrThrow(h->Size());
  py::bytes out = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size)));
  if (!out) throw py::error_already_set();
  auto* data = reinterpret_cast<std::byte*>(PyBytes_AS_STRING(out.ptr()));
  const uint64_t n = size == 0 ? 0 : Transfer(*h, IoKind::kRead, 0, data, size);
  WithoutGil([&] { return h->Close(); }).IgnoreError();
  if (n < size) return py::bytes(reinterpret_cast<const char*>(data), n);  // shrank meanwhile
  return out;
}

std::shared_ptr<Handle> Open(NativeClient& self, const std::string& container, const std::string& name,
                             bool create, bool replace) {
  Client& c = self.client();
  OpenOptions o;
  o.create = create;
  o.replace = replace;
  std::shared_ptr<Object> obj = ValueOrThrow(WithoutGil([&] { return c.Open(container, name, o); }));
  std::shared_ptr<Handle> h = MakeObjectHandle(std::move(obj));
  self.Adopt(h);
  return h;
}

std::shared_ptr<NativeFs> OpenFs(std::shared_ptr<NativeClient> self, const std::string& container, bool format) {
  Client& c = self->client();
  std::shared_ptr<NativeFs> fs = ValueOrThrow(WithoutGil([&] { return NativeFs::Open(self, c, container, format); }));
  self->Adopt(fs);
  return fs;
}

void BindContainers(ClientClass& cls) {
  cls.def("create_container", &CreateContainer, py::arg("name"), py::arg("redundancy") = std::nullopt,
          py::arg("stripe_unit") = uint64_t{1} << 20, py::arg("min_durable") = 0)
      .def("container_info", [](NativeClient& self, const std::string& name) {
        Client& c = self.client();
        return ValueOrThrow(WithoutGil([&] { return c.GetContainer(name); }));
      })
      .def("containers", [](NativeClient& self) {
        Client& c = self.client();
        return ValueOrThrow(WithoutGil([&] { return c.ListContainers(); }));
      })
      .def("delete_container", [](NativeClient& self, const std::string& name, bool force) {
        Client& c = self.client();
        ThrowIfError(WithoutGil([&] { return c.DeleteContainer(name, force); }));
      }, py::arg("name"), py::arg("force") = false);
}

void BindObjects(ClientClass& cls) {
  cls.def("put", &Put, py::arg("container"), py::arg("name"), py::arg("data"))
      .def("get", &Get, py::arg("container"), py::arg("name"))
      .def("stat", [](NativeClient& self, const std::string& container, const std::string& name) {
        Client& c = self.client();
        return ValueOrThrow(WithoutGil([&] { return c.Stat(container, name); }));
      })
      .def("list", [](NativeClient& self, const std::string& container, const std::string& prefix) {
        Client& c = self.client();
        return ValueOrThrow(WithoutGil([&] { return c.List(container, ListOptions{prefix}); }));
      }, py::arg("container"), py::arg("prefix") = "")
      .def("delete", [](NativeClient& self, const std::string& container, const std::string& name) {
        Client& c = self.client();
        ThrowIfError(WithoutGil([&] { return c.Delete(container, name); }));
      })
      .def("open", &Open, py::arg("container"), py::arg("name"), py::arg("create") = false,
           py::arg("replace") = false)
      .def("fs", &OpenFs, py::arg("container"), py::arg("format") = false);
}

}  // namespace

void BindClient(py::module_& m) {
  ClientClass cls(m, "Client");
  cls.def(py::init(&Connect), py::arg("mgmt"), py::arg("api_key"), py::arg("tls_ca"), py::arg("tls_cert"),
          py::arg("tls_key"), py::arg("timeout_ms"), py::arg("data_workers"), py::arg("local_direct"),
          py::arg("net_devices"), py::arg("max_inflight_stripes"), py::arg("open_threads"))
      .def("close", &NativeClient::Close, py::call_guard<py::gil_scoped_release>())
      .def("abandon", &NativeClient::Abandon, "Forgets the client without destroying it (in a forked child).")
      .def_property_readonly("closed", &NativeClient::closed)
      .def("map_epoch", [](NativeClient& self) { return self.client().map_epoch(); })
      .def("read_path_stats", [](NativeClient& self) {
        ReadPathStats s = self.client().read_path_stats();
        py::dict d;
        d["bytes"] = s.bytes;
        d["placed"] = s.placed;
        d["copied"] = s.copied;
        return d;
      });
  BindContainers(cls);
  BindObjects(cls);
  BindAsync(cls);
}

}  // namespace penstock::python
