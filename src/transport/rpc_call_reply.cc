// rpc_call_reply.cc — the call engine's replies: matching a reply (alone or in a batch) to its
// call, and receiving its payload into the memory the call lent, into memory its
// ReplyDestination lends when the reply arrives, or into a buffer of its own. A reply to a
// call that already has an outcome (timed out, failed) is dropped. Progress thread only.
#include <string>

#include "common/log.h"
#include "transport/am_message.h"
#include "transport/registration_cache.h"
#include "transport/rpc_call_engine.h"

namespace penstock {

// Several replies in one message (wire.h, batches): each as if it had come alone. The calls
// of a batch that does not parse get no reply from it (they time out); the first such batch
// is logged.
ucs_status_t RpcCallEngine::OnBatch(void* arg, const void* header, size_t header_length, void* data,
                                    size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<RpcCallEngine*>(arg);
  return ReceiveBatch(
      self->worker_->worker(), header, header_length, data, length, param, &RpcCallEngine::OnReply, self,
      [self](const Status& bad, ucp_ep_h) {
        if (!std::exchange(self->bad_batch_logged_, true)) {
          PS_LOG_WARN("data plane: dropped a batch of replies: {}", bad.message());
        }
      });
}

ucs_status_t RpcCallEngine::OnReply(void* arg, const void* header, size_t header_length, void* data,
                                    size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<RpcCallEngine*>(arg);
  auto bytes = AmHeaderBytes(header, header_length);
  Result<wire::DecodedMessage> msg = wire::DecodeMessage(bytes, length);
  if (msg.ok() && msg->kind != wire::MessageKind::kReply) {
    msg = InvalidArgument("malformed data-plane reply: the message is a request");
  }
  uint64_t id = msg.ok() ? msg->request_id : wire::PeekRequestId(bytes);
  auto it = self->calls_.find(id);
  if (it == self->calls_.end() || it->second.outcome) return UCS_OK;  // late or unknown
  if (!it->second.endpoint->established) self->NoteEstablished(it->second.endpoint);
  if (!msg.ok()) {
    self->Complete(id, ErrorReply(Internal("bad reply from data-plane address " +
                                           it->second.endpoint->address + ": " +
                                           msg.status().message())));
    return UCS_OK;
  }
  auto reply = std::make_shared<RpcReply>();
  reply->from_peer = true;
  reply->status = Status(msg->status_code, std::string(msg->status_message));
  reply->header.assign(msg->op_header.begin(), msg->op_header.end());
  PendingCall& call = it->second;
  if (msg->pull_refused && call.pulling) return self->SendPayloadAfterAll(call, id, reply->status);
  if (msg->placed) return self->OnPlacedReply(call, id, std::move(*reply), msg->payload_len);
  return self->ReceiveReplyPayload(call, id, std::move(reply), msg->status_code == StatusCode::kOk, data,
                                   length, param);
}

// The connection works: the calls queued behind the first may go.
void RpcCallEngine::NoteEstablished(const std::shared_ptr<Endpoint>& e) {
  e->established = true;
  e->batch = BatchesPay(e->ep);
  worker_->Post([this, keep = e] { SendQueued(keep.get()); });
}

ucs_status_t RpcCallEngine::ReceiveReplyPayload(PendingCall& call, uint64_t id, std::shared_ptr<RpcReply> reply,
                                                bool status_ok, void* data, size_t length,
                                                const ucp_am_recv_param_t* param) {
  if (rx_bytes_ != nullptr) rx_bytes_->Inc(length);
  if (!call.lent.empty()) {
    // The server sent the payload instead of placing it: receive it into the same memory.
    std::vector<std::span<std::byte>> into = std::move(call.lent);
    call.lent.clear();
    call.ticket->store(0, std::memory_order_seq_cst);
    if (length > 0 && TrimTo(into, length)) {
      // It fitted, so the server would not write into this process at all (another user, a
      // ptrace policy, direct copies off there): offer it no more reply memory.
      if (status_ok && !std::exchange(call.endpoint->placement_refused, true)) {
        PS_LOG_INFO("data plane: {} sends replies instead of writing them into this process; "
                    "no more offers to it", call.endpoint->address);
      }
      return ReceiveInto(call, id, reply, data, length, param, std::move(into));
    }
    call.into->Return(length == 0);
  } else if (length > 0 && call.into != nullptr) {
    std::vector<std::span<std::byte>> into = call.into->Borrow(length);
    if (!into.empty()) return ReceiveInto(call, id, reply, data, length, param, std::move(into));
  }
  if (length > options_.max_reply_bytes) {
    Complete(id, ErrorReply(ResourceExhausted(
                     "reply of " + std::to_string(length) + " bytes from data-plane address " +
                     call.endpoint->address + " exceeds the client's max_reply_bytes (" +
                     std::to_string(options_.max_reply_bytes) +
                     "); raise RpcClientOptions::max_reply_bytes or lend the call a destination")));
    return UCS_OK;  // (UCX drops a payload nobody receives)
  }
  return ReceivePayload(worker_->worker(), data, length, param,
                        [this, id, reply](Result<AlignedBuffer> payload) {
                          if (!payload.ok()) return Complete(id, ErrorReply(payload.status()));
                          reply->payload = std::move(payload).value();
                          Complete(id, std::move(*reply));
                        });
}

// Cuts `spans` down to their first `length` bytes; false when they hold fewer.
bool RpcCallEngine::TrimTo(std::vector<std::span<std::byte>>& spans, uint64_t length) {
  uint64_t left = length;
  size_t n = 0;
  for (; n < spans.size() && left > 0; ++n) {
    if (spans[n].size() >= left) {
      spans[n] = spans[n].first(left);
      left = 0;
    } else {
      left -= spans[n].size();
    }
  }
  spans.resize(n);
  return left == 0;
}

// Receives the reply payload of call `id` into `into` (lent by call.into), then completes it.
ucs_status_t RpcCallEngine::ReceiveInto(PendingCall& call, uint64_t id, std::shared_ptr<RpcReply> reply,
                                        void* data, size_t length, const ucp_am_recv_param_t* param,
                                        std::vector<std::span<std::byte>> into) {
  uint64_t total = 0;
  for (auto piece : into) total += piece.size();
  if (total != length) {
    call.into->Return(false);
    Complete(id, ErrorReply(Internal("reply destination lent " + std::to_string(total) + " bytes for a " +
                                     std::to_string(length) + "-byte payload")));
    return UCS_OK;
  }
  ucp_mem_h memh = into.size() == 1 && registry_ != nullptr
                       ? registry_->Find(worker_->context(), into[0].data(), into[0].size())
                       : nullptr;
  call.receiving = true;
  return ReceivePayloadInto(worker_->worker(), data, length, param, std::move(into), memh,
                            [this, id, reply, length, dest = call.into](Status s) {
                              dest->Return(s.ok());
                              auto it = calls_.find(id);
                              if (it == calls_.end()) return;
                              it->second.receiving = false;
                              if (!s.ok()) return Complete(id, ErrorReply(std::move(s)));
                              if (placed_bytes_ != nullptr) placed_bytes_->Inc(length);
                              reply->placed = length;
                              Complete(id, std::move(*reply));
                            });
}

}  // namespace penstock
