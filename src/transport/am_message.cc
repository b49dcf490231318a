#include "transport/am_message.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace penstock {

void SendMessage(ucp_ep_h ep, wire::AmId id, std::unique_ptr<OutgoingMessage> msg,
                 uint32_t flags) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_DATATYPE;
  param.flags = flags;
  param.datatype = ucp_dt_make_contig(1);
  param.user_data = msg.get();
  param.cb.send = [](void* request, ucs_status_t status, void* user_data) {
    std::unique_ptr<OutgoingMessage> m(static_cast<OutgoingMessage*>(user_data));
    ucp_request_free(request);
    m->on_complete(status);
  };
  OutgoingMessage* raw = msg.release();
  ucs_status_ptr_t req =
      ucp_am_send_nbx(ep, static_cast<unsigned>(id), raw->am_header.data(),
                      raw->am_header.size(), raw->payload.data(), raw->payload.size(), &param);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    std::unique_ptr<OutgoingMessage> m(raw);
    m->on_complete(req == nullptr ? UCS_OK : UCS_PTR_STATUS(req));
  }
}

void MessageBatcher::Send(ucp_ep_h ep, wire::AmId id, std::unique_ptr<OutgoingMessage> msg,
                          uint32_t flags) {
  if ((flags & UCP_AM_SEND_FLAG_RNDV) != 0 ||
      msg->am_header.size() + msg->payload.size() > wire::kMaxBatchedMessage) {
    return SendMessage(ep, id, std::move(msg), flags);
  }
  for (Waiting& w : waiting_) {
    if (w.ep == ep && w.id == id && w.flags == flags) {
      w.msgs.push_back(std::move(msg));
      return;
    }
  }
  Waiting& w = waiting_.emplace_back(Waiting{ep, id, flags, {}});
  w.msgs.push_back(std::move(msg));
}

bool MessageBatcher::Flush() {
  if (waiting_.empty()) return false;
  std::vector<Waiting> now;
  // A send that completes at once runs its completion here, which may send more (a client's
  // next queued call): those wait in waiting_ meanwhile, and go in the next round, so nothing
  // is left behind when the thread goes to sleep.
  while (!waiting_.empty()) {
    now.clear();
    now.swap(waiting_);
    for (Waiting& w : now) {
      if (w.msgs.size() == 1) {
        SendMessage(w.ep, w.id, std::move(w.msgs[0]), w.flags);
        continue;
      }
      std::vector<std::unique_ptr<OutgoingMessage>> batch;
      size_t bytes = 0;
      for (auto& m : w.msgs) {
        const size_t n = wire::BatchEntryBytes(m->am_header.size(), m->payload.size());
        if (!batch.empty() && (sizeof(wire::BatchHeader) + bytes + n > wire::kMaxBatchBytes ||
                               batch.size() == wire::kMaxBatchCount)) {
          SendBatch(w.ep, w.id, w.flags, std::move(batch), bytes);
          batch.clear();
          bytes = 0;
        }
        batch.push_back(std::move(m));
        bytes += n;
      }
      SendBatch(w.ep, w.id, w.flags, std::move(batch), bytes);
    }
  }
  now.clear();
  if (waiting_.capacity() < now.capacity()) waiting_.swap(now);  // keep the larger vector
  return true;
}

void MessageBatcher::SendBatch(ucp_ep_h ep, wire::AmId id, uint32_t flags,
                               std::vector<std::unique_ptr<OutgoingMessage>> msgs, size_t data_bytes) {
  // The receiver tells requests from replies by their headers (Waiting keeps AM ids apart, so
  // a batch holds one kind).
  if (msgs.size() == 1) return SendMessage(ep, id, std::move(msgs[0]), flags);
  auto out = std::make_unique<OutgoingMessage>();  // no AM header: it is in the data (wire.h)
  const wire::BatchHeader h = wire::MakeBatchHeader(static_cast<uint16_t>(msgs.size()));
  out->owned_payload = AlignedBuffer(sizeof h + data_bytes);
  std::memcpy(out->owned_payload.data(), &h, sizeof h);
  std::byte* at = out->owned_payload.data() + sizeof h;
  for (const auto& m : msgs) at = wire::WriteBatchEntry(at, m->am_header, m->payload);
  out->payload = out->owned_payload.span();
  if (counter_ != nullptr) counter_->Inc(msgs.size());
  // The messages' bytes are copied; they complete with the batch (a caller's payload memory
  // is then known to be free, as with a send of its own).
  auto parts = std::make_shared<std::vector<std::unique_ptr<OutgoingMessage>>>(std::move(msgs));
  out->on_complete = [parts](ucs_status_t st) {
    for (auto& m : *parts) m->on_complete(st);
  };
  // (Not UCP_AM_SEND_FLAG_EAGER: with it UCX 1.13 failed 2 KiB batches on shared memory,
  // "Invalid am_short_iov length"; at this size UCX sends eagerly anyway.)
  SendMessage(ep, wire::AmId::kBatch, std::move(out), flags);
}

std::vector<std::unique_ptr<OutgoingMessage>> MessageBatcher::Take(ucp_ep_h ep) {
  std::vector<std::unique_ptr<OutgoingMessage>> out;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->ep != ep) {
      ++it;
      continue;
    }
    for (auto& m : it->msgs) out.push_back(std::move(m));
    it = waiting_.erase(it);
  }
  return out;
}

std::vector<std::unique_ptr<OutgoingMessage>> MessageBatcher::TakeAll() {
  std::vector<std::unique_ptr<OutgoingMessage>> out;
  for (Waiting& w : waiting_) {
    for (auto& m : w.msgs) out.push_back(std::move(m));
  }
  waiting_.clear();
  return out;
}

namespace {

struct PendingPlacedReceive {
  std::vector<ucp_dt_iov_t> iov;
  std::function<void(Status)> on_done;
};

Status PlacedReceiveStatus(ucs_status_t status) {
  if (status == UCS_OK) return OkStatus();
  return Unavailable(std::string("data-plane payload receive failed: ") + ucs_status_string(status) +
                     "; the peer may have gone away");
}

}  // namespace

ucs_status_t ReceivePayloadInto(ucp_worker_h worker, void* data, size_t length,
                                const ucp_am_recv_param_t* param, std::vector<std::span<std::byte>> into,
                                ucp_mem_h memh, std::function<void(Status)> on_done) {
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    // Eager: the bytes are in UCX's receive buffer now; one copy places them.
    size_t at = 0;
    for (auto piece : into) {
      const size_t n = std::min(piece.size(), length - at);
      if (n > 0) std::memcpy(piece.data(), static_cast<const std::byte*>(data) + at, n);
      at += n;
    }
    on_done(OkStatus());
    return UCS_OK;
  }
  auto r = std::make_unique<PendingPlacedReceive>();
  r->on_done = std::move(on_done);
  for (auto piece : into) {
    if (!piece.empty()) r->iov.push_back({piece.data(), piece.size()});
  }
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  void* buffer;
  size_t count;
  if (r->iov.size() == 1) {
    rp.datatype = ucp_dt_make_contig(1);
    buffer = r->iov[0].buffer;
    count = r->iov[0].length;
    if (memh != nullptr) {
      rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      rp.memh = memh;
    }
  } else {
    rp.datatype = ucp_dt_make_iov();
    buffer = r->iov.data();
    count = r->iov.size();
  }
  rp.cb.recv_am = [](void* request, ucs_status_t status, size_t, void* user_data) {
    std::unique_ptr<PendingPlacedReceive> pr(static_cast<PendingPlacedReceive*>(user_data));
    ucp_request_free(request);
    pr->on_done(PlacedReceiveStatus(status));
  };
  PendingPlacedReceive* raw = r.release();
  rp.user_data = raw;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker, data, buffer, count, &rp);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    std::unique_ptr<PendingPlacedReceive> pr(raw);
    pr->on_done(PlacedReceiveStatus(req == nullptr ? UCS_OK : UCS_PTR_STATUS(req)));
  }
  return UCS_OK;
}

ucs_status_t ReceivePayload(ucp_worker_h worker, void* data, size_t length,
                            const ucp_am_recv_param_t* param,
                            std::function<void(Result<AlignedBuffer>)> on_payload) {
  if (length == 0) {
    on_payload(AlignedBuffer());
    return UCS_OK;
  }
  // Into a fresh buffer of its own: the same receive as into caller memory.
  std::shared_ptr<AlignedBuffer> buffer;
  try {
    buffer = std::make_shared<AlignedBuffer>(length);
  } catch (const std::bad_alloc&) {  // (on a transport thread: an exception would end the process)
    on_payload(ResourceExhausted("no memory for a " + std::to_string(length) + "-byte payload"));
    return UCS_OK;
  }
  return ReceivePayloadInto(worker, data, length, param, {buffer->span()}, nullptr,
                            [buffer, on_payload = std::move(on_payload)](Status s) {
                              if (!s.ok()) return on_payload(std::move(s));
                              on_payload(std::move(*buffer));
                            });
}

namespace {

void DispatchBatch(std::span<const std::byte> data, uint64_t recv_attr, ucp_ep_h reply_ep,
                   ucp_am_recv_callback_t each, void* arg,
                   const std::function<void(const Status&, ucp_ep_h)>& bad) {
  Result<std::vector<wire::BatchItem>> items = wire::DecodeBatch(data);
  if (!items.ok()) return bad(items.status(), reply_ep);
  ucp_am_recv_param_t p{};
  p.recv_attr = recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP;  // each message: eager, transient
  p.reply_ep = reply_ep;
  for (const wire::BatchItem& item : *items) {
    // (`data` is not written through: handlers copy eager data out.)
    each(arg, item.am_header.data(), item.am_header.size(), const_cast<std::byte*>(item.data.data()),
         item.data.size(), &p);
  }
}

}  // namespace

ucs_status_t ReceiveBatch(ucp_worker_h worker, const void* header, size_t header_length, void* data,
                          size_t length, const ucp_am_recv_param_t* param, ucp_am_recv_callback_t each,
                          void* arg, std::function<void(const Status&, ucp_ep_h)> bad) {
  (void)header;
  const uint64_t attr = param->recv_attr;
  ucp_ep_h reply_ep = (attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
  if (header_length != 0) {
    bad(InvalidArgument("malformed data-plane batch: it has an AM header of " + std::to_string(header_length) +
                        " bytes (a batch's header is in its data)"),
        reply_ep);
    return UCS_OK;  // (UCX drops a payload nobody receives)
  }
  if (!(attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    DispatchBatch({static_cast<const std::byte*>(data), length}, attr, reply_ep, each, arg, bad);
    return UCS_OK;
  }
  // Not what this code sends (batches are small, so eager), but a peer may: fetch it first.
  if (length > sizeof(wire::BatchHeader) + wire::kMaxBatchCount * (sizeof(wire::BatchEntry) + wire::kMaxAmHeader +
                                                                    wire::kMaxBatchedMessage)) {
    bad(InvalidArgument("malformed data-plane batch: " + std::to_string(length) + " bytes is more than a batch holds"),
        reply_ep);
    return UCS_OK;
  }
  return ReceivePayload(worker, data, length, param,
                        [attr, reply_ep, each, arg, bad = std::move(bad)](Result<AlignedBuffer> payload) {
                          if (!payload.ok()) return;  // the connection is failing
                          DispatchBatch(payload->span(), attr, reply_ep, each, arg, bad);
                        });
}

}  // namespace penstock
