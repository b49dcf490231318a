// rpc_server_reply.cc — a reply's way out of RpcServer: the Responder a handler calls (once,
// from any thread), which writes the payload straight into memory a client on this host lent
// for it when it can (reply placement, local_direct.h), returns the request's budget, and has
// the request's lane send the reply on the connection the request came in on.
#include <optional>
#include <string>
#include <utility>

#include "common/log.h"
#include "transport/am_message.h"
#include "transport/local_direct.h"
#include "transport/rpc_server_impl.h"

namespace penstock {

// The Responder writes a payload into the memory the client lent (`placement`, may be null)
// on the calling thread, before the reply goes to the lane: the copy runs beside the
// transport, not on it.
Responder RpcServer::Impl::MakeResponder(std::shared_ptr<ResponderGate> gate, size_t lane_index, ucp_ep_h ep,
                                         uint64_t conn_id, uint64_t request_id, uint16_t opcode,
                                         std::shared_ptr<BudgetTicket> ticket,
                                         std::shared_ptr<const wire::Placement> placement) {
  auto once = std::make_shared<std::atomic<bool>>(false);
  return [gate, lane_index, ep, conn_id, request_id, opcode, once, ticket,
          placement](RpcReply reply) {
    if (once->exchange(true)) return;
    std::optional<Status> placed;  // set when tried
    if (placement != nullptr && reply.status.ok() && !reply.payload.empty()) {
      placed = PlaceReply(*placement, reply.payload.span());
      if (placed->ok()) {
        reply.placed = reply.payload.size();
        reply.payload = AlignedBuffer();
      }
    }
    auto boxed = std::make_shared<RpcReply>(std::move(reply));
    {
      std::lock_guard lock(gate->mu);
      if (gate->impl == nullptr) return;
      Impl* impl = gate->impl;
      if (placed) impl->CountPlacement(*placed, boxed->placed);
      Lane* lane = impl->lanes_[lane_index].get();
      lane->worker->Post([impl, lane, ep, conn_id, request_id, opcode, boxed] {
        impl->SendReply(lane, ep, conn_id, request_id, opcode, std::move(*boxed));
      });
    }
    ticket->Release();
  };
}

// Any thread, under the gate. The first refusal of each kind is logged, so an operator
// learns why replies are not placed (a ptrace policy, say) without a line per reply.
void RpcServer::Impl::CountPlacement(const Status& placed, uint64_t bytes) {
  if (!placed.ok()) return NoteFallback(placed);
  if (placed_bytes_ != nullptr) placed_bytes_->Inc(bytes);
}

void RpcServer::Impl::NoteFallback(const Status& why) {
  if (placement_fallbacks_ != nullptr) placement_fallbacks_->Inc();
  const auto code = static_cast<size_t>(why.code());
  if (code < placement_logged_.size() && !placement_logged_[code].exchange(true)) {
    PS_LOG_INFO("data plane {}: data goes over the transport instead of straight to or from a "
                "local client's memory: {}", address_, why.message());
  }
}

// The lane's thread.
// `flags`: kPullRefused, or 0 (kPlaced is set here when the reply was placed).
void RpcServer::Impl::SendReply(Lane* lane, ucp_ep_h ep, uint64_t conn_id, uint64_t request_id,
                                uint16_t opcode, RpcReply reply, uint32_t flags) {
  auto conn = lane->conns.find(ep);
  if (conn == lane->conns.end() || conn->second.id != conn_id) return;  // client gone
  const bool placed = reply.placed > 0;
  auto header = wire::EncodeReply(request_id, opcode, reply.status, reply.header,
                                  placed ? reply.placed : reply.payload.size(),
                                  placed ? uint32_t{wire::kPlaced} : flags);
  if (!header.ok()) {
    Status err = Internal("handler for opcode " + std::to_string(opcode) +
                          " built a bad reply: " + header.status().message());
    header = wire::EncodeReply(request_id, opcode, err, {}, 0);
    reply.payload = AlignedBuffer();
  }
  if (tx_bytes_ != nullptr) tx_bytes_->Inc(reply.payload.size());
  auto out = std::make_unique<OutgoingMessage>();
  out->am_header = std::move(header).value();
  out->owned_payload = std::move(reply.payload);
  out->payload = out->owned_payload.span();
  out->on_complete = [this, request_id](ucs_status_t st) {
    if (st != UCS_OK && st != UCS_ERR_CANCELED) {
      PS_LOG_DEBUG("data plane {}: reply to request {} not sent: {}", address_, request_id,
                   ucs_status_string(st));
    }
  };
  if (!conn->second.batch) conn->second.batch = BatchesPay(ep);
  if (*conn->second.batch) return lane->worker->Send(ep, wire::AmId::kReply, std::move(out), 0);
  SendMessage(ep, wire::AmId::kReply, std::move(out), 0);
}

}  // namespace penstock
