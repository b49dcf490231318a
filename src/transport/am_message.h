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
#include "common/metrics.h"
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

// Gathers the small messages a transport thread sends during one pass of its loop and sends
// those for one endpoint together, as batches (wire.h, AmId::kBatch): one system call, one
// packet and one wake-up of the peer for all of them, where each used to cost its own. A
// target answering the reads that completed in one pass, or a client sending the calls its
// callbacks made, has several for the same peer. Its owner (UcxWorker) flushes at the end of
// every pass, before it sleeps, so a message waits no longer than the pass it was sent in.
// Messages for an endpoint may leave in another order than they were sent (a large one goes at
// once, small ones at the flush); each is a call or a reply of its own. Progress thread only.
class MessageBatcher {
 public:
  // As SendMessage: at once when `msg` is over wire::kMaxBatchedMessage or asks for a
  // rendezvous, else at the next Flush.
  void Send(ucp_ep_h ep, wire::AmId id, std::unique_ptr<OutgoingMessage> msg, uint32_t flags);
  // Sends every message waiting: a message alone when it is its endpoint's only one, else in
  // batches of up to wire::kMaxBatchBytes. A batch's messages complete (on_complete) together,
  // when UCX is done with the batch. Returns whether anything was sent.
  bool Flush();
  // Takes out the messages waiting for `ep` (the caller is about to close it); the caller
  // completes them (UCS_ERR_CANCELED).
  std::vector<std::unique_ptr<OutgoingMessage>> Take(ucp_ep_h ep);
  // Every message still waiting (the worker is stopping).
  std::vector<std::unique_ptr<OutgoingMessage>> TakeAll();
  // Counts the messages that go in batches into `counter` (a metric; may be null). Before the
  // first Send.
  void CountInto(Counter* counter) { counter_ = counter; }

 private:
  struct Waiting {
    ucp_ep_h ep;
    wire::AmId id;
    uint32_t flags;
    std::vector<std::unique_ptr<OutgoingMessage>> msgs;
  };
  void SendBatch(ucp_ep_h ep, wire::AmId id, uint32_t flags,
                 std::vector<std::unique_ptr<OutgoingMessage>> msgs, size_t data_bytes);
  std::vector<Waiting> waiting_;  // a few endpoints a pass: searched in order
  Counter* counter_ = nullptr;
};

// For an AM handler of AmId::kBatch: runs `each(arg, header, header_length, data, length,
// param)`, the worker's handler of single messages, for every message of the batch, in order,
// as if it had arrived alone (eager data, the batch's reply endpoint); `each` must not keep
// `data` (its return value is not used). A malformed batch runs none of it: `bad` gets the
// error and the batch's reply endpoint (or null). A batch that came by rendezvous is received
// into a buffer first. Returns the value the AM callback must return.
ucs_status_t ReceiveBatch(ucp_worker_h worker, const void* header, size_t header_length, void* data,
                          size_t length, const ucp_am_recv_param_t* param, ucp_am_recv_callback_t each,
                          void* arg, std::function<void(const Status&, ucp_ep_h)> bad);

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
