// rpc_server.h — the data-plane RPC server: accepts UCX connections on host:port and runs a
// handler for every request that arrives.
//
// One listener per rail (network path: a local address and the devices UCX may use for it),
// each with `workers` UCX workers on a context of its own, each worker with its own transport
// thread (ucx_worker.h); a rail's listener hands its connections to the rail's workers in
// turn. Without rails the server has one, on `host` with the environment's devices. The handler runs on the
// thread of the worker the request came in on; replies go back over the endpoint the request
// came in on. A client connection that dies takes its unsent replies with it (their responders
// become no-ops). Memory for incoming payloads is bounded by options.max_incoming_bytes, for
// all workers together.
//
// Thread safety: all public methods are thread-safe; Stop() and the destructor must not be
// called from the handler (the transport thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "penstock/status.h"
#include "transport/rpc.h"

namespace penstock {

// One network path of a multi-rail server (see RpcServerOptions::rails).
struct RpcRail {
  std::string host;          // local address the rail listens on
  std::string net_devices;   // UCX_NET_DEVICES of the rail's context ("": the environment's)
};

// Parses "HOST[@DEVICES];HOST[@DEVICES];..." (the target's --rails), e.g.
// "10.0.1.2@eth1;10.0.2.2@eth2"; DEVICES as UCX_NET_DEVICES takes them ("mlx5_0:1,eth1").
// Errors: kInvalidArgument naming the spec and the bad piece.
Result<std::vector<RpcRail>> ParseRails(const std::string& spec);

struct RpcServerOptions {
  std::string host = "127.0.0.1";  // the listening address when `rails` is empty
  uint16_t port = 0;  // 0 = pick a free port (per rail)
  MetricsRegistry* metrics = nullptr;  // borrowed, may be null; must outlive the server
  // Flow control (flow_control.h): request payload bytes held from receipt until the request
  // is answered (its Responder called or destroyed). Beyond it, rendezvous payloads are left
  // with UCX and received later, in arrival order (the senders' calls take longer; no error).
  // Eager (small) payloads are always taken. 0 = unlimited.
  uint64_t max_incoming_bytes = uint64_t{256} << 20;
  // Workers (threads) serving connections, per rail, 1..64 in all.
  unsigned workers = 1;
  // Multi-rail: one listener per rail, each on its own UCX context limited to the rail's
  // devices, so a client worker pinned to one network reaches the rail on it (address() lists
  // them all). Empty: one rail on `host`.
  std::vector<RpcRail> rails{};
  // Runs on each worker's thread before it handles anything; may give the worker's loop event
  // sources (`add_source(eventfd, progress)`, UcxWorker::AddSource) and returns what to run on
  // that thread when the server stops (before its connections close), or an empty function.
  // A target uses it to have its engine's read completions reaped on the transport thread.
  using AddSource = std::function<void(int fd, std::function<bool()> progress)>;
  std::function<std::function<void()>(const AddSource& add_source)> on_worker_start{};
  // The largest request payload accepted (rendezvous or copied from a client's memory): a
  // request claiming more is answered kInvalidArgument before anything is allocated for it.
  // Shards are at most 64 MiB (the largest stripe unit).
  uint64_t max_payload_bytes = uint64_t{1} << 30;
  // Direct copies with clients on this host that run as this server's user (local_direct.h):
  // replies written into the memory a client lent, request payloads copied out of its memory.
  // Off: every such offer is refused and the bytes go over the transport.
  bool local_direct = true;
};

class RpcServer {
 public:
  // Starts listening. Errors: kUnavailable "data port HOST:PORT is in use; ..." when the port
  // is taken, kUnavailable for other listen/UCX failures, kInvalidArgument for a bad host or
  // devices UCX does not accept.
  static Result<std::unique_ptr<RpcServer>> Start(const RpcServerOptions& options,
                                                  RpcHandler handler);
  // Stops: no handler runs after it returns; pending responders become no-ops.
  ~RpcServer();

  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  uint16_t port() const;         // the first rail's
  // "host:port", or with several rails each one's joined by ',' ("10.0.1.2:7000,10.0.2.2:7000",
  // the form RpcClient::Call takes: a client worker uses the rail of its own index).
  std::string address() const;

  // Closes the listener and every connection (clients see kUnavailable). Idempotent.
  void Stop();

  // Connections each worker has accepted so far (to check the spread), rail by rail.
  std::vector<uint64_t> ConnectionsPerWorker() const;

  class Impl;

 private:
  explicit RpcServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace penstock
