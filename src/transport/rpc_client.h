// rpc_client.h — the data-plane RPC client: calls RpcServers by "host:port".
//
// `workers` UCX workers, each with its own transport thread (ucx_worker.h) and, optionally, its
// own network devices (UCX_NET_DEVICES); calls go to the workers in turn, so one client spreads
// its traffic over all of them (threads, and rails when the devices differ). A multi-rail
// server's address lists its rails ("h1:p1,h2:p2", RpcServer::address): worker i calls rail
// i % rails, so with workers pinned to networks in the rails' order each worker reaches the
// server on its own network. Each worker has one
// endpoint per server address, created on the first call and cached; when a connection fails
// (refused, peer died, server stopped) its outstanding calls fail with kUnavailable and the
// endpoint is dropped, so the next call reconnects. Timeouts are enforced on the transport
// threads. Each address has a window of calls and bytes in flight, split evenly between the
// workers; calls beyond it queue (FIFO, per worker) at the client. Calls are not ordered with
// respect to each other (as before: callers that need order wait for the reply).
//
// Thread safety: all public methods are thread-safe. Completion callbacks run on the transport
// thread and must not block; CallSync() must not be called from one. Destroying the client
// fails every pending call with kCancelled before returning.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/metrics.h"
#include "penstock/status.h"
#include "transport/call_abandon.h"
#include "transport/rpc.h"

namespace penstock {

class RpcCallEngine;      // one worker's calls (rpc_call_engine.h, internal)
class RegistrationCache;  // memory registered by Register (registration_cache.h, internal)

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
  // Multi-worker / multi-rail: UCX workers (threads) in this client, 1..64; worker i uses
  // net_devices[i % size] as its UCX_NET_DEVICES (empty list: the environment's for all).
  // A worker whose devices exist but that UCX cannot use (their link is down) is left out
  // with a warning and the client starts with the others (its rail's calls go through them,
  // as for a rail that fails later); a device that does not exist is an error.
  unsigned workers = 1;
  std::vector<std::string> net_devices{};
  // A rail of a multi-rail server whose connection failed (unreachable, lost, timed out) gets
  // no calls for this long: they go to the workers whose rails work, then one call tries it again.
  std::chrono::milliseconds rail_retry_after{5000};
  // Direct copies with servers on this host (local_direct.h), for servers whose address is local
  // and that run as this user: a request payload of at least placement_threshold bytes stays in
  // the caller's memory and the server copies it from there (a server that cannot answers so,
  // and the call is sent again with its payload); otherwise a call whose ReplyDestination
  // knows its length up front (at least placement_threshold bytes) lends that memory with the
  // request and the server writes the reply straight into it.
  bool local_direct = true;
  uint64_t placement_threshold = 64 << 10;
  // A reply payload longer than this is refused (the call fails kResourceExhausted, nothing is
  // allocated for it) unless the call's ReplyDestination lends memory for it: a reply's length
  // is the server's word. The mirror of RpcServerOptions::max_payload_bytes.
  uint64_t max_reply_bytes = uint64_t{1} << 30;
};

class RpcClient {
 public:
  // Errors: kUnavailable when UCX cannot be initialised (check UCX_TLS), when a network device
  // does not exist (naming it), or when no worker can use its network devices.
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
  //
  // A multi-rail address ("host:port,host:port", RpcServer::address) is called on the worker's
  // own rail (RailFor). A rail whose call fails without an answer from the server (unreachable,
  // connection lost, timed out) is avoided for options.rail_retry_after: its calls go to
  // workers whose rails work (PickRail). The failed call itself is not retried here.
  //
  // With `into`, a reply payload is received straight into the memory `into` lends (see
  // ReplyDestination; RpcReply::placed says how much went there). A transfer into it that is
  // still running when the call times out closes the connection, so the memory comes back
  // within the timeout whatever the peer does.
  //
  // With `abandon`, the caller may give up on the call before its reply (CallAbandon).
  void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
            std::span<const std::byte> payload, std::function<void(RpcReply)> done,
            std::shared_ptr<ReplyDestination> into = nullptr, std::shared_ptr<CallAbandon> abandon = nullptr);

  // Registers [data, data + size) with every UCX context of this client (ucp_mem_map), so
  // transfers into it skip per-transfer registration on transports that need it (RDMA);
  // unregistered when the returned handle is destroyed, which must happen before the memory is
  // freed and before the client is destroyed. Registering is optional: any memory works.
  // Errors: kInvalidArgument for an empty range, kResourceExhausted when UCX cannot pin it.
  class Registration;
  Result<std::shared_ptr<Registration>> Register(void* data, size_t size);

  // Blocking convenience wrapper around Call().
  RpcReply CallSync(const std::string& address, uint16_t opcode,
                    std::span<const std::byte> header, std::span<const std::byte> payload);

  // Which UCX transport(s) the connection to `address` uses, e.g. "tcp" or "posix,cma"
  // (best effort; "" when there is no connection or it is unknown).
  std::string TransportName(const std::string& address);

  // Calls handed to each worker so far (to check the spread).
  std::vector<uint64_t> CallsPerWorker() const;
  // Rails (pieces of a multi-rail address) now avoided after a failed connection.
  std::vector<std::string> RailsDown();

 private:
  RpcClient(std::vector<std::unique_ptr<RpcCallEngine>> engines, std::vector<size_t> slots,
            std::shared_ptr<RegistrationCache> registry, std::chrono::milliseconds rail_retry_after);
  // The worker and rail for a call to multi-rail `address`: worker `first` (round robin) on its
  // own rail, unless that rail is down: then another worker's own rail that is not, else any
  // rail that is not, through worker `first`.
  std::pair<size_t, std::string> PickRail(const std::string& address, size_t first);
  void MarkRailDown(const std::string& rail);

  std::vector<std::unique_ptr<RpcCallEngine>> engines_;  // one per worker that started
  std::vector<size_t> slots_;  // engines_[k] is worker slots_[k] of the options (its rail, RailFor)
  std::shared_ptr<RegistrationCache> registry_;
  std::unique_ptr<std::atomic<uint64_t>[]> calls_;  // per worker
  std::atomic<uint64_t> next_worker_{0};
  const std::chrono::milliseconds rail_retry_after_;
  std::mutex rails_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> rails_down_;  // guarded by rails_mu_
  std::atomic<bool> any_rail_down_{false};  // rails_down_ may be non-empty
};

}  // namespace penstock
