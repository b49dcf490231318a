// rpc.h — the request and reply values of the data-plane RPC (see rpc_server.h, rpc_client.h).
//
// A request is (opcode, small op header, bulk payload); a reply is (Status, op header,
// payload). The transport never looks inside op headers or payloads: their meaning per opcode
// belongs to the target and the client. Values: move them between threads freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/buffer.h"
#include "penstock/status.h"

namespace penstock {

struct RpcRequest {
  uint16_t opcode = 0;
  std::vector<std::byte> header;  // op-specific small header (<= wire::kMaxOpHeader, 4 KiB)
  AlignedBuffer payload;          // bulk data (may be empty), received in full before the handler runs
};

struct RpcReply {
  Status status;                  // a handler's non-OK Status arrives here unchanged (code + message,
                                  // the message cut at wire::kMaxStatusMessage bytes)
  std::vector<std::byte> header;  // <= 4 KiB
  AlignedBuffer payload;
  // Payload bytes the transport received straight into the call's ReplyDestination (then
  // `payload` is empty): the first `placed` bytes of the memory it lent.
  uint64_t placed = 0;
  // True when a reply arrived from the server (`status` is then the handler's); false for the
  // client's own errors (unreachable, connection lost, timed out, cancelled, malformed reply).
  bool from_peer = false;
};

// Caller memory a reply's payload may be received into directly (zero-copy receive: a
// rendezvous payload is fetched by UCX straight into it; an eager one is copied once out of
// UCX's receive buffer, which is the transport's own copy).
//
// Borrow runs on a transport thread when the reply arrives, with the payload's length; it
// returns the memory to receive into, in order, totalling exactly `length` bytes, or nothing,
// which has the payload delivered in RpcReply::payload as without a destination (the memory
// is no longer the caller's, or too small). Memory it returned is lent to the transport until
// Return runs: exactly once per Borrow that returned memory, before the call's completion,
// with whether every byte arrived (false: the memory's contents are undefined). A destination
// whose owner cancels must wait for Return before it reuses or frees the memory; the transport
// bounds that wait by the call's timeout (it closes the connection of a transfer still
// running then). Implementations are thread-safe.
//
// A destination that knows the largest payload before the call is sent (a read of a known
// range) says so in UpFrontLength: the client may then Borrow that much when it sends the call,
// so that a server on the same host writes the payload straight into it (reply placement,
// transport/local_direct.h); the reply may fill less of it (RpcReply::placed).
class ReplyDestination {
 public:
  virtual ~ReplyDestination() = default;
  virtual std::vector<std::span<std::byte>> Borrow(uint64_t length) = 0;
  virtual void Return(bool ok) = 0;
  virtual uint64_t UpFrontLength() const { return 0; }  // 0: unknown, Borrow when the reply comes
};

// Sends the reply to one request. Call exactly once (later calls are ignored), from any thread.
// Takes ownership of the payload until sent. A no-op once the server has stopped or the
// client's connection is gone.
using Responder = std::function<void(RpcReply reply)>;

// Serves one request. Runs on the server's transport thread: must not block; hand slow work to
// another thread and call `respond` later.
using RpcHandler = std::function<void(RpcRequest request, Responder respond)>;

}  // namespace penstock
