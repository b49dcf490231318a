// rpc.h — the request and reply values of the data-plane RPC (see rpc_server.h, rpc_client.h).
//
// A request is (opcode, small op header, bulk payload); a reply is (Status, op header,
// payload). The transport never looks inside op headers or payloads: their meaning per opcode
// belongs to the target and the client. Values: move them between threads freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
};

// Sends the reply to one request. Call exactly once (later calls are ignored), from any thread.
// Takes ownership of the payload until sent. A no-op once the server has stopped or the
// client's connection is gone.
using Responder = std::function<void(RpcReply reply)>;

// Serves one request. Runs on the server's transport thread: must not block; hand slow work to
// another thread and call `respond` later.
using RpcHandler = std::function<void(RpcRequest request, Responder respond)>;

}  // namespace penstock
