// rpc_call_engine.cc — the call engine's calls: starting one, sending it through its endpoint's
// window, finishing it (reply, failure, timeout, shutdown), and the endpoints they go through.
// Replies are matched to calls in rpc_call_reply.cc.
#include "transport/rpc_call_engine.h"

#include <algorithm>
#include <future>

#include "common/log.h"
#include "transport/am_message.h"
#include "transport/local_direct.h"
#include "transport/registration_cache.h"
#include "transport/socket_address.h"

namespace penstock {

RpcCallEngine::RpcCallEngine(const RpcClientOptions& options, UcxWorker::Options worker_options,
                             RegistrationCache* registry)
    : options_(options), registry_(registry), worker_options_(std::move(worker_options)) {
  if (options.metrics != nullptr) {
    auto& m = *options.metrics;
    calls_total_ = &m.GetCounter("penstock_transport_client_calls_total", "Data-plane calls");
    failures_ = &m.GetCounter("penstock_transport_client_failures_total",
                              "Data-plane calls that failed in the transport");
    tx_bytes_ = &m.GetCounter("penstock_transport_client_bytes_total",
                              "Data-plane payload bytes", {{"direction", "tx"}});
    rx_bytes_ = &m.GetCounter("penstock_transport_client_bytes_total",
                              "Data-plane payload bytes", {{"direction", "rx"}});
    placed_bytes_ = &m.GetCounter("penstock_transport_client_placed_bytes_total",
                                  "Reply payload bytes received straight into caller memory");
    batched_ = &m.GetCounter("penstock_transport_client_batched_requests_total",
                             "Requests sent together with others to the same target, in one message");
  }
}

Status RpcCallEngine::Init() {
  PS_ASSIGN_OR_RETURN(worker_, UcxWorker::Create(worker_options_));
  worker_->CountBatchedInto(batched_);
  PS_RETURN_IF_ERROR(worker_->SetAmHandlers(
      {{wire::AmId::kReply, &RpcCallEngine::OnReply}, {wire::AmId::kBatch, &RpcCallEngine::OnBatch}},
      this));
  worker_->Start([this] { return CheckDeadlines(); });
  return OkStatus();
}

RpcCallEngine::~RpcCallEngine() {
  if (worker_ != nullptr) worker_->Stop([this] { Shutdown(); });
}

void RpcCallEngine::Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
                         std::span<const std::byte> payload, std::function<void(RpcReply)> done,
                         std::shared_ptr<ReplyDestination> into, std::shared_ptr<CallAbandon> abandon) {
  uint64_t id = next_id_.fetch_add(1) + 1;
  auto op_header = std::make_shared<std::vector<std::byte>>(header.begin(), header.end());
  auto done_box = std::make_shared<std::function<void(RpcReply)>>(std::move(done));
  bool posted = worker_->Post([this, id, address, opcode, op_header, payload, done_box, into = std::move(into),
                               abandon = std::move(abandon)] {
    StartCall(id, address, opcode, *op_header, payload, std::move(*done_box), into, abandon);
  });
  if (!posted) (*done_box)(ErrorReply(Cancelled("data-plane client is shutting down")));
}

std::string RpcCallEngine::TransportName(const std::string& address) {
  if (worker_->OnProgressThread()) return TransportNameNow(address);
  auto p = std::make_shared<std::promise<std::string>>();
  auto f = p->get_future();
  if (!worker_->Post([this, p, address] { p->set_value(TransportNameNow(address)); })) return "";
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return "";
  return f.get();
}

// ---- everything below runs on the progress thread ----

void RpcCallEngine::StartCall(uint64_t id, const std::string& address, uint16_t opcode,
                              std::span<const std::byte> op_header, std::span<const std::byte> payload,
                              std::function<void(RpcReply)> done, std::shared_ptr<ReplyDestination> into,
                              std::shared_ptr<CallAbandon> abandon) {
  if (calls_total_ != nullptr) calls_total_->Inc();
  if (shutting_down_) return done(ErrorReply(Cancelled("data-plane client is shutting down")));
  if (op_header.size() > wire::kMaxOpHeader) {
    return done(ErrorReply(wire::EncodeRequest(id, opcode, op_header, 0).status()));
  }
  Result<std::shared_ptr<Endpoint>> ep = Connect(address);
  if (!ep.ok()) return done(ErrorReply(ep.status()));
  PendingCall& call = calls_[id];
  call.endpoint = *ep;
  call.opcode = opcode;
  call.deadline = Clock::now() + options_.timeout;
  call.done = std::move(done);
  call.payload = payload;
  call.into = std::move(into);
  if (abandon) {
    call.abandon = std::move(abandon);
    call.abandon->Bind([this, id](const Status& why) {
      worker_->Post([this, id, why] { EndBeforeReply(id, why, "was given up"); });
    });
  }
  std::optional<wire::Placement> placement = PayloadSource(call, op_header);
  if (!placement) placement = LendForPlacement(call);
  call.am_header = std::move(wire::EncodeRequest(id, opcode, op_header, payload.size(),
                                                 placement ? &*placement : nullptr,
                                                 call.pulling ? uint32_t{wire::kPayloadSource} : 0))
                       .value();
  (*ep)->calls.insert(id);
  deadlines_.insert({call.deadline, id});
  if ((*ep)->queue.empty() && Admit(**ep, payload.size())) {
    Send(id, call);
  } else {
    call.send_done = true;  // nothing handed to UCX yet: it can be failed at any time
    (*ep)->queue.push_back(id);
  }
}

// Hands an admitted call to UCX.
void RpcCallEngine::Send(uint64_t id, PendingCall& call) {
  call.admitted = true;
  call.send_done = false;
  if (tx_bytes_ != nullptr) tx_bytes_->Inc(call.payload.size());
  auto out = std::make_unique<OutgoingMessage>();
  out->am_header = std::move(call.am_header);
  if (!call.pulling) out->payload = call.payload;  // else the server copies it from our memory
  out->on_complete = [this, id](ucs_status_t st) { OnSendComplete(id, st); };
  uint32_t flags = UCP_AM_SEND_FLAG_REPLY;
  if (options_.rendezvous_threshold != 0 && out->payload.size() >= options_.rendezvous_threshold) {
    flags |= UCP_AM_SEND_FLAG_RNDV;
  }
  if (out->payload.empty() || !call.endpoint->batch) {
    // A call that carries no payload (a read, a head, or a large same-host write whose
    // payload the target copies itself) goes at once: the target starts its work (a device
    // read, a copy) as soon as it arrives. Held for the pass's batch, 4 KiB random reads
    // reached the targets in bursts and ran ~10% slower (docs/performance.md, issue 7).
    // Calls that carry payloads go together, which also lets a target's group commit gather
    // them.
    return SendMessage(call.endpoint->ep, wire::AmId::kRequest, std::move(out), flags);
  }
  worker_->Send(call.endpoint->ep, wire::AmId::kRequest, std::move(out), flags);
}

// Takes window room for a call of `bytes` on `e` (one call only while it is not established).
bool RpcCallEngine::Admit(Endpoint& e, uint64_t bytes) {
  if (!e.established && e.window.ops() > 0) return false;
  return e.window.TryAcquire(bytes);
}

// Sends queued calls of `e` while its window has room, in FIFO order.
void RpcCallEngine::SendQueued(Endpoint* e) {
  while (!e->failed && !e->queue.empty()) {
    auto it = calls_.find(e->queue.front());
    if (it == calls_.end() || it->second.outcome) {  // finished (timed out) while queued
      e->queue.pop_front();
      continue;
    }
    if (!Admit(*e, it->second.payload.size())) return;
    e->queue.pop_front();
    Send(it->first, it->second);
  }
}

void RpcCallEngine::OnSendComplete(uint64_t id, ucs_status_t st) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  it->second.send_done = true;
  if (std::exchange(it->second.resend, false) && st == UCS_OK && !it->second.outcome) {
    return Send(id, it->second);  // the server refused to copy the payload: it goes now
  }
  if (st != UCS_OK && !it->second.outcome) {
    it->second.outcome = ErrorReply(Unavailable("sending to data-plane address " +
                                                it->second.endpoint->address + " failed: " +
                                                ucs_status_string(st)));
  }
  if (it->second.outcome && !it->second.receiving) Finish(it);
}

// Records the outcome of call `id` (first one wins); delivers it once the send is done.
void RpcCallEngine::Complete(uint64_t id, RpcReply reply) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  if (!it->second.outcome) it->second.outcome = std::move(reply);
  if (it->second.send_done && !it->second.receiving) Finish(it);
}

void RpcCallEngine::Finish(CallMap::iterator it) {
  PendingCall call = std::move(it->second);
  uint64_t id = it->first;
  calls_.erase(it);
  Revoke(call, false);  // lent memory no reply used (a placed reply returned it already)
  if (call.abandon) call.abandon->Unbind();
  call.endpoint->calls.erase(id);
  deadlines_.erase({call.deadline, id});
  if (!call.outcome->status.ok() && failures_ != nullptr) failures_->Inc();
  if (call.admitted) call.endpoint->window.Release(call.payload.size());
  call.done(std::move(*call.outcome));
  if (call.admitted) SendQueued(call.endpoint.get());
}

std::chrono::milliseconds RpcCallEngine::CheckDeadlines() {
  auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = calls_.find(id);
    if (it == calls_.end() || it->second.outcome) continue;
    EndBeforeReply(id,
                   DeadlineExceeded("data-plane call (opcode " + std::to_string(it->second.opcode) + ") to " +
                                    it->second.endpoint->address + " got no reply within " +
                                    std::to_string(options_.timeout.count()) + " ms"),
                   "timed out");
  }
  if (deadlines_.empty()) return std::chrono::milliseconds::max();
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadlines_.begin()->first - now);
  return std::max(wait, std::chrono::milliseconds(1));
}

void RpcCallEngine::EndBeforeReply(uint64_t id, Status why, const std::string& ended) {
  auto it = calls_.find(id);
  if (it == calls_.end() || it->second.outcome) return;
  if (!it->second.send_done) {
    // Its request may still wait in this pass's batch (sent from a call this loop just
    // finished, say): it goes now, so it is handed to UCX like any other.
    worker_->FlushSends();
    it = calls_.find(id);
    if (it == calls_.end() || it->second.outcome) return;
  }
  PendingCall& call = it->second;
  call.outcome = ErrorReply(std::move(why));
  if (call.send_done && !call.receiving) return Finish(it);  // a pulled payload: its ticket is cleared
  // UCX still reads the caller's payload, or writes the reply into memory the caller lent:
  // only closing the connection releases it.
  FailEndpoint(call.endpoint.get(), Unavailable("data-plane connection to " + call.endpoint->address +
                                                " reset after a " + (call.receiving ? "reply" : "send") + " " +
                                                ended));
}

void RpcCallEngine::Shutdown() {
  shutting_down_ = true;
  for (auto& [id, call] : calls_) {
    if (!call.outcome) call.outcome = ErrorReply(Cancelled("data-plane client destroyed"));
  }
  std::vector<ucp_ep_h> eps;
  for (auto& [address, e] : endpoints_) {
    e->failed = true;
    eps.push_back(e->ep);
  }
  worker_->CloseEndpoints(eps);  // completes in-flight sends and receives, which delivers their calls
  endpoints_.clear();
  for (auto& [id, call] : calls_) {
    if (call.receiving) {  // not ended by closing (should not happen): give the memory back unfinished
      call.receiving = false;
      call.into->Return(false);
    }
  }
  while (!calls_.empty()) Finish(calls_.begin());
}

// ---- endpoints ----

Result<std::shared_ptr<RpcCallEngine::Endpoint>> RpcCallEngine::Connect(const std::string& address) {
  auto it = endpoints_.find(address);
  if (it != endpoints_.end()) return it->second;
  PS_ASSIGN_OR_RETURN(SocketAddress addr, ResolveSocketAddress(address));
  auto e = std::make_shared<Endpoint>(options_.max_inflight_ops, options_.max_inflight_bytes);
  e->address = address;
  e->engine = this;
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = addr.get();
  p.sockaddr.addrlen = addr.length;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &RpcCallEngine::OnEndpointError;
  p.err_handler.arg = e.get();
  ucs_status_t st = ucp_ep_create(worker_->worker(), &p, &e->ep);
  if (st != UCS_OK) {
    return Unavailable("cannot connect to data-plane address " + address + ": " +
                       ucs_status_string(st) + "; is the target running?");
  }
  e->local = IsLocalAddress(addr);
  endpoints_[address] = e;
  return e;
}

void RpcCallEngine::OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* e = static_cast<Endpoint*>(arg);
  e->engine->FailEndpoint(e, Unavailable("data-plane connection to " + e->address + " failed: " +
                                       ucs_status_string(status) +
                                       "; is the target running and reachable?"));
}

// Fails every call on `e` with `status`, drops it from the cache and closes it.
void RpcCallEngine::FailEndpoint(Endpoint* e, const Status& status) {
  if (e->failed) return;
  e->failed = true;
  auto it = endpoints_.find(e->address);
  std::shared_ptr<Endpoint> keep;
  if (it != endpoints_.end() && it->second.get() == e) {
    keep = it->second;
    endpoints_.erase(it);
  }
  std::vector<uint64_t> ids(e->calls.begin(), e->calls.end());
  for (uint64_t id : ids) Complete(id, ErrorReply(status));
  worker_->CloseEndpointAsync(e->ep, [keep] {});
}

std::string RpcCallEngine::TransportNameNow(const std::string& address) {
  auto it = endpoints_.find(address);
  if (it == endpoints_.end()) return "";
  return EndpointTransports(it->second->ep);
}

}  // namespace penstock
