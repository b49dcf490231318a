#include "transport/am_message.h"

#include <cstring>
#include <memory>

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

struct PendingReceive {
  AlignedBuffer buffer;
  std::function<void(Result<AlignedBuffer>)> on_payload;
};

void FinishReceive(std::unique_ptr<PendingReceive> r, ucs_status_t status) {
  if (status != UCS_OK) {
    r->on_payload(Unavailable(std::string("data-plane payload receive failed: ") +
                              ucs_status_string(status) + "; the peer may have gone away"));
    return;
  }
  r->on_payload(std::move(r->buffer));
}

}  // namespace

ucs_status_t ReceivePayload(ucp_worker_h worker, void* data, size_t length,
                            const ucp_am_recv_param_t* param,
                            std::function<void(Result<AlignedBuffer>)> on_payload) {
  if (length == 0) {
    on_payload(AlignedBuffer());
    return UCS_OK;
  }
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    on_payload(AlignedBuffer::CopyOf({static_cast<const std::byte*>(data), length}));
    return UCS_OK;
  }
  auto r = std::make_unique<PendingReceive>();
  r->buffer = AlignedBuffer(length);
  r->on_payload = std::move(on_payload);
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                    UCP_OP_ATTR_FIELD_DATATYPE;
  rp.datatype = ucp_dt_make_contig(1);
  rp.user_data = r.get();
  rp.cb.recv_am = [](void* request, ucs_status_t status, size_t, void* user_data) {
    std::unique_ptr<PendingReceive> pr(static_cast<PendingReceive*>(user_data));
    ucp_request_free(request);
    FinishReceive(std::move(pr), status);
  };
  PendingReceive* raw = r.release();
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker, data, raw->buffer.data(), length, &rp);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    FinishReceive(std::unique_ptr<PendingReceive>(raw),
                  req == nullptr ? UCS_OK : UCS_PTR_STATUS(req));
  }
  return UCS_OK;
}

}  // namespace penstock
