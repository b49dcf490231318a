// rpc_call_local_direct.cc — the call engine's side of direct copies with a server on this host
// (local_direct.h, RpcClientOptions::local_direct): offering a large request payload for the
// server to copy out of this process, or the reply destination's memory for it to write the
// reply into; each offer with a ticket the call clears (Revoke) before the memory goes back.
// Also what comes back: a reply the server placed, or its refusal to copy the payload (the call
// is then sent again with it). Progress thread only.
#include <unistd.h>

#include <algorithm>

#include "common/log.h"
#include "transport/rpc_call_engine.h"

namespace penstock {

// A large payload to a server on this host stays in the caller's memory (which must stay
// valid until the call completes anyway) for the server to copy (RpcClientOptions::
// local_direct).
std::optional<wire::Placement> RpcCallEngine::PayloadSource(PendingCall& call,
                                                            std::span<const std::byte> op_header) {
  if (!options_.local_direct || !call.endpoint->local || call.endpoint->pull_refused ||
      call.payload.size() < std::max<uint64_t>(options_.placement_threshold, 1)) {
    return std::nullopt;
  }
  call.pulling = true;
  call.op_header.assign(op_header.begin(), op_header.end());
  return Ticketed(call, {{reinterpret_cast<uintptr_t>(call.payload.data()), call.payload.size()}});
}

// Borrows the memory of a call whose reply the server may place (RpcClientOptions::
// local_direct) and describes it for the request.
std::optional<wire::Placement> RpcCallEngine::LendForPlacement(PendingCall& call) {
  if (!options_.local_direct || call.into == nullptr || !call.endpoint->local ||
      call.endpoint->placement_refused) {
    return std::nullopt;
  }
  const uint64_t length = call.into->UpFrontLength();
  if (length < std::max<uint64_t>(options_.placement_threshold, 1)) return std::nullopt;
  std::vector<std::span<std::byte>> spans = call.into->Borrow(length);
  if (spans.empty()) return std::nullopt;
  if (spans.size() > wire::kMaxPlacementIovs) {
    call.into->Return(false);
    return std::nullopt;
  }
  std::vector<wire::PlacementIov> iovs;
  for (auto s : spans) iovs.push_back({reinterpret_cast<uintptr_t>(s.data()), s.size()});
  call.lent = std::move(spans);
  return Ticketed(call, std::move(iovs));
}

// Memory of this process described for a server, with a fresh ticket the call keeps.
wire::Placement RpcCallEngine::Ticketed(PendingCall& call, std::vector<wire::PlacementIov> iovs) {
  wire::Placement p;
  p.pid = static_cast<uint32_t>(getpid());
  p.iovs = std::move(iovs);
  do {
    p.ticket = ticket_rng_();
  } while (p.ticket == 0);
  call.ticket = std::make_unique<std::atomic<uint64_t>>(p.ticket);
  p.ticket_addr = reinterpret_cast<uintptr_t>(call.ticket.get());
  return p;
}

// Clears the call's ticket, so a server that has not yet checked it leaves the call's memory
// alone, then returns memory the call lent up front (if any) to its destination.
void RpcCallEngine::Revoke(PendingCall& call, bool ok) {
  if (call.ticket != nullptr) call.ticket->store(0, std::memory_order_seq_cst);
  if (call.lent.empty()) return;
  call.lent.clear();
  call.into->Return(ok);
}

// The server would not copy the payload out of our memory (it did not run the request): send
// the call again with its payload, and no more payload sources to that server.
ucs_status_t RpcCallEngine::SendPayloadAfterAll(PendingCall& call, uint64_t id, const Status& why) {
  call.ticket->store(0, std::memory_order_seq_cst);
  call.pulling = false;
  if (!std::exchange(call.endpoint->pull_refused, true)) {
    PS_LOG_INFO("data plane: {} will not copy request payloads from this process ({}); sending them",
                call.endpoint->address, why.message());
  }
  call.am_header = std::move(wire::EncodeRequest(id, call.opcode, call.op_header, call.payload.size()).value());
  if (call.send_done) {
    Send(id, call);
  } else {
    call.resend = true;  // OnSendComplete sends it
  }
  return UCS_OK;
}

// A reply whose `length` payload bytes the server wrote into the memory the call lent.
ucs_status_t RpcCallEngine::OnPlacedReply(PendingCall& call, uint64_t id, RpcReply reply, uint64_t length) {
  uint64_t lent = 0;
  for (auto piece : call.lent) lent += piece.size();
  if (call.lent.empty() || length > lent) {
    Complete(id, ErrorReply(Internal("bad reply from data-plane address " + call.endpoint->address +
                                     ": it placed " + std::to_string(length) + " bytes in " +
                                     std::to_string(lent) + " bytes of lent memory")));
    return UCS_OK;
  }
  Revoke(call, true);
  if (placed_bytes_ != nullptr) placed_bytes_->Inc(length);
  reply.placed = length;
  Complete(id, std::move(reply));
  return UCS_OK;
}

}  // namespace penstock
