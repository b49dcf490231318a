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

}  // namespace penstock
