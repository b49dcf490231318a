// am_message.h — sending one active message and receiving its payload, shared by the RPC
// server and client.
//
// A message is an AM header (see wire.h) plus an optional bulk payload sent zero-copy from the
// caller's memory (UCX picks eager or rendezvous by size). On receive, an eager payload is
// copied into an AlignedBuffer; a rendezvous payload is fetched by ucp_am_recv_data_nbx
// straight into one.
//
// Progress thread only (see ucx_worker.h). Completion callbacks run on the progress thread,
// possibly before the call returns.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/buffer.h"
#include "penstock/status.h"
#include "transport/wire.h"

namespace penstock {

// Everything UCX may read until a send completes.
struct OutgoingMessage {
  std::vector<std::byte> am_header;
  std::span<const std::byte> payload;  // points into `owned_payload` or caller memory
  AlignedBuffer owned_payload;         // set when the message owns its payload (replies)
  // Runs exactly once when UCX no longer references the message: UCS_OK or the send error.
  std::function<void(ucs_status_t)> on_complete;
};

// Sends `msg` on `ep` with AM id `id` and `flags` (e.g. UCP_AM_SEND_FLAG_REPLY).
void SendMessage(ucp_ep_h ep, wire::AmId id, std::unique_ptr<OutgoingMessage> msg, uint32_t flags);

// Receives the AM payload described by an AM callback's (data, length, param) into an
// AlignedBuffer and passes it (or kUnavailable) to `on_payload`. Returns the value the AM
// callback must return.
ucs_status_t ReceivePayload(ucp_worker_h worker, void* data, size_t length,
                            const ucp_am_recv_param_t* param,
                            std::function<void(Result<AlignedBuffer>)> on_payload);

// Receives the AM payload into caller memory `into` (in order, totalling `length` bytes):
// eager bytes are copied there at once, a rendezvous payload is fetched straight into it
// (UCP_DATATYPE_IOV for several pieces; one piece uses `memh` when the caller registered
// it). `on_done` gets OkStatus or kUnavailable once no byte will be written there any more.
// Returns the value the AM callback must return.
ucs_status_t ReceivePayloadInto(ucp_worker_h worker, void* data, size_t length,
                                const ucp_am_recv_param_t* param, std::vector<std::span<std::byte>> into,
                                ucp_mem_h memh, std::function<void(Status)> on_done);

// The AM header of an AM callback as bytes.
inline std::span<const std::byte> AmHeaderBytes(const void* header, size_t length) {
  return {static_cast<const std::byte*>(header), length};
}

}  // namespace penstock
