#include "python/native_client.h"

#include <algorithm>

#include "python/status_error.h"

namespace penstock::python {

Result<std::shared_ptr<NativeClient>> NativeClient::Connect(const ClientOptions& options, unsigned open_threads) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  std::shared_ptr<NativeClient> c(new NativeClient());
  c->client_ = std::move(client);
  c->async_ = std::make_unique<AsyncOps>(open_threads);
  return c;
}

NativeClient::~NativeClient() {
  if (PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    Close();
  } else {
    Close();
  }
}

Client& NativeClient::client() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!client_) ThrowStatus(FailedPrecondition("this penstock.Client is closed: create a new one"));
  return *client_;
}

AsyncOps& NativeClient::async() {
  client();  // raises when closed
  return *async_;
}

void NativeClient::Adopt(const std::shared_ptr<Detachable>& d) {
  std::lock_guard<std::mutex> lock(mu_);
  if (owned_.size() >= 64 && owned_.size() % 64 == 0) {
    std::erase_if(owned_, [](const std::weak_ptr<Detachable>& w) { return w.expired(); });
  }
  owned_.push_back(d);
}

void NativeClient::Close() {
  if (async_) async_->Stop();
  std::vector<std::weak_ptr<Detachable>> owned;
  std::unique_ptr<Client> client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    owned.swap(owned_);
    client.swap(client_);
  }
  // Newest first: a file before the file system it was opened from.
  for (auto it = owned.rbegin(); it != owned.rend(); ++it) {
    if (auto d = it->lock()) d->Detach();
  }
  client.reset();
}

void NativeClient::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::weak_ptr<Detachable>& w : owned_) {
    if (auto d = w.lock()) d->Abandon();
  }
  owned_.clear();
  (void)client_.release();  // leaked on purpose: see the header
  (void)async_.release();
}

bool NativeClient::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !client_;
}

}  // namespace penstock::python
