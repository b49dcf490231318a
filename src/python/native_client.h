// native_client.h — the Client behind a penstock.Client (python/penstock/client.py), with what
// the binding adds: the futures machinery (AsyncOps) and the list of open handles and file
// systems to release before the Client goes.
//
// Close() waits for pending futures, releases every handle, then destroys the Client; later
// calls raise penstock.Error ("closed"). Abandon() is for the child of a fork: the Client, its
// threads and its handles are parent state that must neither run nor be destroyed there, so
// they are leaked. Thread-safe, except that Close must not race with calls still using the
// Client (close when done).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "penstock/client.h"
#include "python/async_ops.h"
#include "python/handle.h"

namespace penstock::python {

class NativeClient {
 public:
  // Connects (call without the GIL). Errors: the Status of Client::Connect.
  static Result<std::shared_ptr<NativeClient>> Connect(const ClientOptions& options, unsigned open_threads);
  ~NativeClient();

  // The Client; raises penstock.Error when closed. GIL held.
  Client& client();
  AsyncOps& async();
  // Registers `d` to be detached by Close (or abandoned by Abandon).
  void Adopt(const std::shared_ptr<Detachable>& d);
  void Close();  // without the GIL
  void Abandon();
  bool closed() const;

 private:
  NativeClient() = default;
  mutable std::mutex mu_;
  std::unique_ptr<Client> client_;                // guarded by mu_ for reset
  std::unique_ptr<AsyncOps> async_;
  std::vector<std::weak_ptr<Detachable>> owned_;  // guarded by mu_
};

}  // namespace penstock::python
