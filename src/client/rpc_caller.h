// rpc_caller.h — the seam between the client library and the data-plane transport.
//
// ShardClient sends every shard request through an RpcCaller. In production it is
// UcxRpcCaller (the UCX RpcClient); unit tests substitute a fake that serves shard requests
// from memory and can delay or fail replies on demand. Implementations are thread-safe and
// run `done` exactly once, possibly on another thread (never assume the calling thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "transport/call_abandon.h"
#include "transport/rpc.h"

namespace penstock {

class RpcClient;

class RpcCaller {
 public:
  virtual ~RpcCaller() = default;
  // Sends a request; `payload` must stay valid until `done` runs. With `into`, the reply's
  // payload may be received into the memory it lends (ReplyDestination, RpcReply::placed).
  // With `abandon`, the caller may give up on the call before its reply (CallAbandon).
  virtual void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
                    std::span<const std::byte> payload, std::function<void(RpcReply)> done,
                    std::shared_ptr<ReplyDestination> into = nullptr,
                    std::shared_ptr<CallAbandon> abandon = nullptr) = 0;
  // Blocking form. Must not be called from a thread that runs `done` callbacks.
  RpcReply CallSync(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
                    std::span<const std::byte> payload);
};

// The production caller: requests over UCX. `rpc` is borrowed.
class UcxRpcCaller : public RpcCaller {
 public:
  explicit UcxRpcCaller(RpcClient* rpc) : rpc_(rpc) {}
  void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
            std::span<const std::byte> payload, std::function<void(RpcReply)> done,
            std::shared_ptr<ReplyDestination> into = nullptr,
            std::shared_ptr<CallAbandon> abandon = nullptr) override;

 private:
  RpcClient* rpc_;
};

}  // namespace penstock
