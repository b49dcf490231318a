#include "transport/raw_am_client.h"

#include "transport/am_message.h"
#include "transport/socket_address.h"
#include "transport/wire.h"

namespace penstock {

Result<std::unique_ptr<RawAmClient>> RawAmClient::Connect(const std::string& address) {
  std::unique_ptr<RawAmClient> c(new RawAmClient());
  PS_ASSIGN_OR_RETURN(c->worker_, UcxWorker::Create({.name = "raw-am-client"}));
  PS_RETURN_IF_ERROR(c->worker_->SetAmHandlers(
      {{wire::AmId::kReply, &RawAmClient::OnReply}, {wire::AmId::kBatch, &RawAmClient::OnBatch}}, c.get()));
  PS_ASSIGN_OR_RETURN(SocketAddress addr, ResolveSocketAddress(address));
  c->worker_->Start(nullptr);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ucs_status_t st = UCS_OK;
  RawAmClient* self = c.get();
  c->worker_->Post([&] {
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = addr.get();
    p.sockaddr.addrlen = addr.length;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    const ucs_status_t s = ucp_ep_create(self->worker_->worker(), &p, &self->ep_);
    std::lock_guard lock(mu);
    st = s;
    done = true;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  if (st != UCS_OK) {
    return Unavailable("cannot connect to " + address + ": " + ucs_status_string(st));
  }
  return c;
}

RawAmClient::~RawAmClient() {
  worker_->Stop([this] {
    if (ep_ != nullptr) worker_->CloseEndpoints({ep_});
  });
}

void RawAmClient::Send(std::vector<std::byte> am_header, size_t payload_bytes) {
  SendAs(static_cast<uint8_t>(wire::AmId::kRequest), std::move(am_header),
         std::make_shared<std::vector<std::byte>>(payload_bytes, std::byte{0x33}));
}

void RawAmClient::SendWithPayload(std::vector<std::byte> am_header, std::vector<std::byte> payload) {
  SendAs(static_cast<uint8_t>(wire::AmId::kRequest), std::move(am_header),
         std::make_shared<std::vector<std::byte>>(std::move(payload)));
}

void RawAmClient::SendBatch(std::vector<std::byte> am_header, std::vector<std::byte> data) {
  SendAs(static_cast<uint8_t>(wire::AmId::kBatch), std::move(am_header),
         std::make_shared<std::vector<std::byte>>(std::move(data)));
}

void RawAmClient::SendAs(uint8_t am_id, std::vector<std::byte> am_header,
                         std::shared_ptr<std::vector<std::byte>> payload) {
  worker_->Post([this, am_id, am_header = std::move(am_header), payload]() mutable {
    auto out = std::make_unique<OutgoingMessage>();
    out->am_header = std::move(am_header);
    out->payload = {payload->data(), payload->size()};
    out->on_complete = [payload](ucs_status_t) {};
    SendMessage(ep_, static_cast<wire::AmId>(am_id), std::move(out), UCP_AM_SEND_FLAG_REPLY);
  });
}

std::vector<std::pair<uint64_t, StatusCode>> RawAmClient::WaitForReplies(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return replies_.size() >= n; });
  return replies_;
}

std::vector<std::string> RawAmClient::bad_replies() const {
  std::lock_guard lock(mu_);
  return bad_;
}

// The server's replies may come in batches: each is taken as if it had come alone.
ucs_status_t RawAmClient::OnBatch(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
  auto* self = static_cast<RawAmClient*>(arg);
  return ReceiveBatch(self->worker_->worker(), header, header_length, data, length, param, &RawAmClient::OnReply,
                      self, [self](const Status& bad, ucp_ep_h) {
                        std::lock_guard lock(self->mu_);
                        self->bad_.push_back("a bad batch: " + bad.ToString());
                        self->cv_.notify_all();
                      });
}

ucs_status_t RawAmClient::OnReply(void* arg, const void* header, size_t header_length, void*, size_t length,
                                  const ucp_am_recv_param_t*) {
  // A rendezvous payload (a good echo of a large request) is left to UCX, which drops it.
  auto* self = static_cast<RawAmClient*>(arg);
  auto m = wire::DecodeMessage(AmHeaderBytes(header, header_length), length);
  std::lock_guard lock(self->mu_);
  if (m.ok()) {
    self->replies_.emplace_back(m->request_id, m->status_code);
  } else {
    self->bad_.push_back("a reply that does not decode: " + m.status().ToString());
  }
  self->cv_.notify_all();
  return UCS_OK;
}

}  // namespace penstock
