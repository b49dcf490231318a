// rpc_client.h — the data-plane RPC client: calls RpcServers by "host:port".
//
// One UCX worker and one transport thread per client (ucx_worker.h). One endpoint per server
// address, created on the first call and cached; when a connection fails (refused, peer died,
// server stopped) its outstanding calls fail with kUnavailable and the endpoint is dropped, so
// the next call reconnects. Timeouts are enforced on the transport thread. Each address has a
// window of calls and bytes in flight; calls beyond it queue (FIFO) at the client.
//
// Thread safety: all public methods are thread-safe. Completion callbacks run on the transport
// thread and must not block; CallSync() must not be called from one. Destroying the client
// fails every pending call with kCancelled before returning.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/metrics.h"
#include "penstock/status.h"
#include "transport/rpc.h"

namespace penstock {

struct RpcClientOptions {
  std::chrono::milliseconds timeout{30000};  // per call, from Call() to the reply (queueing included)
  MetricsRegistry* metrics = nullptr;        // borrowed, may be null; must outlive the client
  // Flow control, per target address (flow_control.h): at most this many calls / request
  // payload bytes in flight; further calls wait in a FIFO queue at the client and are sent as
  // replies come back. 0 = unlimited. A call larger than max_inflight_bytes is sent alone.
  uint32_t max_inflight_ops = 64;
  uint64_t max_inflight_bytes = uint64_t{64} << 20;
  // Request payloads of at least this many bytes are always sent by rendezvous
  // (UCP_AM_SEND_FLAG_RNDV), so the server receives them into its own buffer when it has the
  // memory (RpcServerOptions::max_incoming_bytes). UCX alone sometimes sends even MiB-sized
  // messages eagerly, which lands them in the server's memory unasked. 0 = let UCX choose.
  uint64_t rendezvous_threshold = 64 << 10;
};

class RpcClient {
 public:
  // Errors: kUnavailable when UCX cannot be initialised (check UCX_TLS).
  static Result<std::unique_ptr<RpcClient>> Create(const RpcClientOptions& options);
  ~RpcClient();

  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // Asynchronous call. `header` (<= 4 KiB) is copied; `payload` must stay valid until `done`
  // runs (it is sent zero-copy). `done` runs exactly once, on the transport thread, with the
  // reply (whose status is the handler's) or an error: kUnavailable naming the address when it
  // cannot be reached or the connection dies, kDeadlineExceeded after options.timeout,
  // kInvalidArgument for a bad address or an oversized header, kCancelled when the client is
  // destroyed first.
  void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
            std::span<const std::byte> payload, std::function<void(RpcReply)> done);

  // Blocking convenience wrapper around Call().
  RpcReply CallSync(const std::string& address, uint16_t opcode,
                    std::span<const std::byte> header, std::span<const std::byte> payload);

  // Which UCX transport(s) the connection to `address` uses, e.g. "tcp" or "posix,cma"
  // (best effort; "" when there is no connection or it is unknown).
  std::string TransportName(const std::string& address);

  class Impl;

 private:
  explicit RpcClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace penstock
