// rpc_server.h — the data-plane RPC server: accepts UCX connections on host:port and runs a
// handler for every request that arrives.
//
// `workers` UCX workers (one context), each with its own transport thread (ucx_worker.h); the
// listener on worker 0 hands connections to the workers in turn. The handler runs on the
// thread of the worker the request came in on; replies go back over the endpoint the request
// came in on. A client connection that dies takes its unsent replies with it (their responders
// become no-ops). Memory for incoming payloads is bounded by options.max_incoming_bytes, for
// all workers together.
//
// Thread safety: all public methods are thread-safe; Stop() and the destructor must not be
// called from the handler (the transport thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "penstock/status.h"
#include "transport/rpc.h"

namespace penstock {

struct RpcServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0 = pick a free port
  MetricsRegistry* metrics = nullptr;  // borrowed, may be null; must outlive the server
  // Flow control (flow_control.h): request payload bytes held from receipt until the request
  // is answered (its Responder called or destroyed). Beyond it, rendezvous payloads are left
  // with UCX and received later, in arrival order (the senders' calls take longer; no error).
  // Eager (small) payloads are always taken. 0 = unlimited.
  uint64_t max_incoming_bytes = uint64_t{256} << 20;
  // Workers (threads) serving connections, 1..64.
  unsigned workers = 1;
};

class RpcServer {
 public:
  // Starts listening. Errors: kUnavailable "data port HOST:PORT is in use; ..." when the port
  // is taken, kUnavailable for other listen/UCX failures, kInvalidArgument for a bad host.
  static Result<std::unique_ptr<RpcServer>> Start(const RpcServerOptions& options,
                                                  RpcHandler handler);
  // Stops: no handler runs after it returns; pending responders become no-ops.
  ~RpcServer();

  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  uint16_t port() const;
  std::string address() const;  // "host:port"

  // Closes the listener and every connection (clients see kUnavailable). Idempotent.
  void Stop();

  // Connections each worker has accepted so far (to check the spread).
  std::vector<uint64_t> ConnectionsPerWorker() const;

  class Impl;

 private:
  explicit RpcServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace penstock
