// rpc_server_request.cc — a request's way into RpcServer: decoding it (alone or from a batch),
// checking what a client on this host may have copied directly (local_direct.h), admitting its
// payload under the receive budget (options.max_incoming_bytes, all lanes together; a request
// that does not fit waits in its lane's FIFO and UCX keeps its payload), receiving or copying
// the payload, and running the handler with a Responder (rpc_server_reply.cc).
#include <new>
#include <string>
#include <utility>

#include "common/log.h"
#include "transport/am_message.h"
#include "transport/local_direct.h"
#include "transport/rpc_server_impl.h"

namespace penstock {

// Several requests in one message (wire.h, batches): each as if it had come alone. A batch
// that does not parse is answered kInvalidArgument (to request id 0: which calls it held is
// unknown; they time out at the client).
ucs_status_t RpcServer::Impl::OnBatch(void* arg, const void* header, size_t header_length, void* data,
                                      size_t length, const ucp_am_recv_param_t* param) {
  auto* lane = static_cast<Lane*>(arg);
  return ReceiveBatch(
      lane->worker->worker(), header, header_length, data, length, param, &Impl::OnRequest, lane,
      [lane](const Status& bad, ucp_ep_h ep) {
        auto conn = lane->conns.find(ep);
        if (ep == nullptr || conn == lane->conns.end()) return;
        lane->impl->SendReply(lane, ep, conn->second.id, 0, 0, RpcReply{bad, {}, AlignedBuffer()});
      });
}

ucs_status_t RpcServer::Impl::OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                        size_t length, const ucp_am_recv_param_t* param) {
  auto* lane = static_cast<Lane*>(arg);
  Impl* self = lane->impl;
  ucp_ep_h ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
  auto conn = lane->conns.find(ep);
  if (ep == nullptr || conn == lane->conns.end()) {
    PS_LOG_WARN("data plane {}: dropping a request with no reply endpoint", self->address_);
    return UCS_OK;
  }
  uint64_t conn_id = conn->second.id;
  auto bytes = AmHeaderBytes(header, header_length);
  Result<wire::DecodedMessage> msg = wire::DecodeMessage(bytes, length);
  if (msg.ok() && msg->kind != wire::MessageKind::kRequest) {
    msg = InvalidArgument("malformed data-plane request: the message is a reply");
  }
  if (!msg.ok()) {
    self->SendReply(lane, ep, conn_id, wire::PeekRequestId(bytes), 0,
                    RpcReply{msg.status(), {}, AlignedBuffer()});
    return UCS_OK;  // a rendezvous payload is dropped by UCX
  }
  auto request = std::make_shared<RpcRequest>();
  request->opcode = msg->opcode;
  request->header.assign(msg->op_header.begin(), msg->op_header.end());
  DeferredReceive rx{ep, conn_id, msg->request_id, request, data, length, nullptr, nullptr};
  const bool allowed = msg->placement && self->DirectCopiesAllowed(lane, conn->second, msg->placement->pid);
  // A payload's length is the client's word: nothing is allocated for more than the limit.
  if (msg->payload_len > self->options_.max_payload_bytes) {
    self->SendReply(lane, ep, conn_id, msg->request_id, msg->opcode,
                    RpcReply{InvalidArgument("request payload of " + std::to_string(msg->payload_len) +
                                             " bytes is over this server's limit of " +
                                             std::to_string(self->options_.max_payload_bytes) +
                                             "; split it"),
                             {}, AlignedBuffer()});
    return UCS_OK;  // a rendezvous payload is dropped by UCX
  }
  if (msg->payload_source) return self->AdmitPayloadSource(lane, std::move(rx), *msg, allowed, conn->second);
  if (msg->placement && allowed) {
    rx.placement = std::make_shared<const wire::Placement>(std::move(*msg->placement));
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    // Over budget: keep UCX's descriptor and fetch the payload once memory is returned.
    if (!self->AdmitOrDefer(lane, rx)) return UCS_INPROGRESS;
  } else {
    std::lock_guard lock(self->budget_mu_);
    self->budget_.ForceReserve(length);
  }
  self->StartReceive(lane, std::move(rx), param->recv_attr);
  return UCS_OK;
}

// The lane's thread. Whether direct copies with the client process `pid`, which offered its
// memory with a request on connection `c`, are allowed; a refusal is counted and noted
// (NoteFallback).
bool RpcServer::Impl::DirectCopiesAllowed(Lane* lane, Conn& c, uint32_t pid) {
  if (options_.local_direct && c.placement_pid != pid) {
    // Checked once per connection and process, not per request.
    c.placement_pid = pid;
    const std::string who = "the client (pid " + std::to_string(c.placement_pid) + ")";
    if (!SameUser(c.placement_pid)) {
      c.placement_refusal = who + " runs as another user";
    } else if (!c.peer || !OwnsConnection(c.placement_pid, *c.peer, lane->rail->port)) {
      c.placement_refusal = who + " does not hold the connection its requests came on";
    } else {
      c.placement_refusal.clear();
    }
    c.placement_allowed = c.placement_refusal.empty();
  }
  const bool allowed = options_.local_direct && c.placement_allowed;
  if (!options_.local_direct) {
    NoteFallback(FailedPrecondition("direct copies with local clients are off"));
  } else if (!allowed) {
    NoteFallback(PermissionDenied(c.placement_refusal));
  }
  return allowed;
}

// The lane's thread. A request whose payload stays in the client's memory (kPayloadSource):
// admitted like a rendezvous payload and copied by Pull, or, when direct copies with that
// client are not `allowed`, answered kPullRefused without running it.
ucs_status_t RpcServer::Impl::AdmitPayloadSource(Lane* lane, DeferredReceive rx, wire::DecodedMessage& msg,
                                                 bool allowed, const Conn& conn) {
  if (!allowed) {
    const std::string why = options_.local_direct ? conn.placement_refusal : "turned off";
    SendReply(lane, rx.ep, rx.conn_id, msg.request_id, msg.opcode,
              RpcReply{FailedPrecondition("this target does not copy from the client's memory (" + why +
                                          "); send the payload"),
                       {}, AlignedBuffer()},
              wire::kPullRefused);
    return UCS_OK;
  }
  rx.source = std::make_shared<const wire::Placement>(std::move(*msg.placement));
  rx.desc = nullptr;
  rx.length = msg.payload_len;
  if (AdmitOrDefer(lane, rx)) StartReceive(lane, std::move(rx), 0);
  return UCS_OK;  // deferred: no UCX descriptor is kept
}

// The lane's thread. Reserves budget for a request whose payload is not in memory yet
// (rendezvous, or a payload source) and says true, or, when it does not fit or earlier ones
// wait, queues it behind them (AdmitDeferred starts it once budget returns) and says false.
// The count other threads read goes up under the budget's lock, in the step that found the
// budget short: a ReturnBudget after that step sees it and wakes this lane (AdmitDeferred,
// posted, runs after this callback has queued the request). Counted after the lock, a
// release that came between the two found no one waiting, and with no later release the
// request would wait for good.
bool RpcServer::Impl::AdmitOrDefer(Lane* lane, DeferredReceive& rx) {
  {
    std::lock_guard lock(budget_mu_);
    if (lane->deferred.empty() && budget_.TryReserve(rx.length)) return true;
    lane->deferred_count = lane->deferred.size() + 1;
  }
  lane->deferred.push_back(std::move(rx));
  if (deferred_total_ != nullptr) deferred_total_->Inc();
  return false;
}

void RpcServer::Impl::BudgetTicket::Release() {
  uint64_t bytes = bytes_.exchange(0);
  if (bytes == 0) return;
  std::lock_guard lock(gate_->mu);
  Impl* impl = gate_->impl;
  if (impl != nullptr) impl->ReturnBudget(bytes);
}

// The lane's thread. Receives the payload of an admitted request (its bytes are already
// reserved), then runs the handler.
void RpcServer::Impl::StartReceive(Lane* lane, DeferredReceive rx, uint64_t recv_attr) {
  if (requests_ != nullptr) {
    requests_->Inc();
    rx_bytes_->Inc(rx.length);
  }
  auto ticket = std::make_shared<BudgetTicket>(gate_, rx.length);
  if (rx.source != nullptr) return Pull(lane, std::move(rx), std::move(ticket));
  ucp_am_recv_param_t param{};
  param.recv_attr = recv_attr;
  ucp_ep_h ep = rx.ep;
  uint64_t conn_id = rx.conn_id, request_id = rx.request_id;
  auto request = rx.request;
  const size_t index = lane->index;
  ReceivePayload(
      lane->worker->worker(), rx.desc, rx.length, &param,
      [this, index, ep, conn_id, request_id, request, ticket,
       placement = std::move(rx.placement)](Result<AlignedBuffer> payload) {
        if (!payload.ok()) {
          PS_LOG_WARN("data plane {}: request {}: {}", address_, request_id,
                      payload.status().message());
          return;  // the connection is failing; the client sees kUnavailable
        }
        request->payload = std::move(payload).value();
        handler_(std::move(*request), MakeResponder(gate_, index, ep, conn_id, request_id,
                                                    request->opcode, ticket, placement));
      });
}

// The lane's thread. Copies the payload of a kPayloadSource request out of the client's
// memory (the kernel's copy, in place of the socket's), then runs the handler; when it
// cannot, answers kPullRefused without running the request, and the client sends the payload.
void RpcServer::Impl::Pull(Lane* lane, DeferredReceive rx, std::shared_ptr<BudgetTicket> ticket) {
  AlignedBuffer payload;
  Status s;
  try {
    payload = AlignedBuffer(rx.length);
    s = PullPayload(*rx.source, payload.span());
  } catch (const std::bad_alloc&) {
    s = ResourceExhausted("no memory for a " + std::to_string(rx.length) + "-byte payload");
  }
  if (!s.ok()) {
    NoteFallback(s);
    SendReply(lane, rx.ep, rx.conn_id, rx.request_id, rx.request->opcode,
              RpcReply{FailedPrecondition("cannot copy the payload from the client: " + s.message()),
                       {}, AlignedBuffer()},
              wire::kPullRefused);
    return;  // `ticket` returns the budget
  }
  if (pulled_bytes_ != nullptr) pulled_bytes_->Inc(rx.length);
  rx.request->payload = std::move(payload);
  handler_(std::move(*rx.request), MakeResponder(gate_, lane->index, rx.ep, rx.conn_id, rx.request_id,
                                                 rx.request->opcode, std::move(ticket), nullptr));
}

// Any thread (under the gate): returns budget, then lets every worker with requests waiting
// for it take what now fits.
void RpcServer::Impl::ReturnBudget(uint64_t bytes) {
  std::vector<Lane*> waiting;
  {
    std::lock_guard lock(budget_mu_);
    budget_.Release(bytes);
    for (auto& lane : lanes_) {
      if (lane->deferred_count.load() != 0) waiting.push_back(lane.get());
    }
  }
  for (Lane* l : waiting) l->worker->Post([this, l] { AdmitDeferred(l); });
}

// The lane's thread.
void RpcServer::Impl::AdmitDeferred(Lane* lane) {
  while (!lane->deferred.empty()) {
    {
      std::lock_guard lock(budget_mu_);  // see AdmitOrDefer
      if (!budget_.TryReserve(lane->deferred.front().length)) return;
      lane->deferred_count = lane->deferred.size() - 1;
    }
    DeferredReceive rx = std::move(lane->deferred.front());
    lane->deferred.pop_front();
    StartReceive(lane, std::move(rx), UCP_AM_RECV_ATTR_FLAG_RNDV);
  }
}

}  // namespace penstock
