// rpc_server_impl.h — the inside of RpcServer (rpc_server.h): its rails, lanes and connections,
// the admission of requests under the receive budget, and the replies.
//
// Internal to the transport. One Impl per server, shared by the RpcServer and, through the
// ResponderGate, by every Responder it handed out (a Responder reaches the server only while it
// runs; Stop() closes the gate). Each rail (a listener and its workers) has one Lane per worker:
// the worker and what lives on its thread (connections, requests waiting for budget). The
// budget (options.max_incoming_bytes) is one for all lanes, under budget_mu_.
//
// Files, one concern each:
//   rpc_server.cc          RpcServer, starting and stopping, rails, listeners, accepting connections
//   rpc_server_request.cc  a request's way in: decoding, direct-copy checks, admission under the
//                          receive budget (deferred when it is spent), receiving its payload,
//                          running the handler
//   rpc_server_reply.cc    the way out: the Responder, reply placement, sending the reply
//
// Thread safety: Start, Stop, port, address and ConnectionsPerWorker as RpcServer's; the
// handlers and everything a lane owns run on the lane's thread (said per method); ReturnBudget,
// CountPlacement and NoteFallback on any thread.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/metrics.h"
#include "penstock/status.h"
#include "transport/flow_control.h"
#include "transport/rpc.h"
#include "transport/rpc_server.h"
#include "transport/socket_address.h"
#include "transport/ucx_worker.h"
#include "transport/wire.h"

namespace penstock {

class RpcServer::Impl {
 public:
  Impl(const RpcServerOptions& options, RpcHandler handler);
  ~Impl();

  Status Start();
  void Stop();

  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }
  std::vector<uint64_t> ConnectionsPerWorker() const;

 private:
  // What a Responder holds: lets it reach the server while it runs, and nothing after Stop().
  struct ResponderGate {
    std::mutex mu;
    Impl* impl = nullptr;  // guarded by mu; null once stopped
  };

  // One network path: its workers (the first owns the rail's context, limited to its devices;
  // the others share it, so a connection request from the rail's listener can be accepted on
  // any of them) and its listener, on the first worker.
  struct Lane;
  struct Rail {
    Impl* impl = nullptr;
    std::vector<Lane*> lanes;
    std::atomic<size_t> next_lane{0};
    ucp_listener_h listener = nullptr;  // the first lane's thread
    std::string address;                // "host:port"
    uint16_t port = 0;
  };

  // What an over-budget rendezvous request waits with.
  struct DeferredReceive {
    ucp_ep_h ep;
    uint64_t conn_id;
    uint64_t request_id;
    std::shared_ptr<RpcRequest> request;
    void* desc;  // UCX's data descriptor (rendezvous) or the eager bytes
    size_t length;
    std::shared_ptr<const wire::Placement> placement;  // memory the client lent for the reply
    // The client memory that holds the payload, to copy from (kPayloadSource; `desc` null).
    std::shared_ptr<const wire::Placement> source;
  };

  // A client connection, on its lane's thread.
  struct Conn {
    uint64_t id = 0;
    // The process that last offered memory for replies on this connection, and whether it runs
    // as this server's user (local_direct.h; checked once per process, not per request).
    uint32_t placement_pid = 0;
    bool placement_allowed = false;
    std::string placement_refusal;  // why not, when not
    // Where the connection came from (the listener's view), to tell which process holds its
    // client end (OwnsConnection); unset when UCX could not say.
    std::optional<SocketAddress> peer;
    // Whether small replies go in batches (BatchesPay): decided at the first reply, when the
    // connection's lanes are known.
    std::optional<bool> batch;
  };

  // One worker and what lives on its thread: its connections and its requests waiting for
  // budget (FIFO).
  struct Lane {
    Impl* impl = nullptr;
    Rail* rail = nullptr;
    size_t index = 0;  // in lanes_
    std::unique_ptr<UcxWorker> worker;
    std::unordered_map<ucp_ep_h, Conn> conns;      // its thread only
    std::deque<DeferredReceive> deferred;           // its thread only
    std::atomic<size_t> deferred_count{0};          // deferred.size(), for other threads
    std::atomic<uint64_t> accepted{0};
    std::function<void()> on_stop;  // its thread only (RpcServerOptions::on_worker_start)
  };

  // Holds `bytes` of the budget for one request until Release() or destruction (so a Responder
  // that is dropped without being called still returns them). Thread-safe.
  class BudgetTicket {
   public:
    BudgetTicket(std::shared_ptr<ResponderGate> gate, uint64_t bytes)
        : gate_(std::move(gate)), bytes_(bytes) {}
    ~BudgetTicket() { Release(); }
    void Release();

   private:
    std::shared_ptr<ResponderGate> gate_;
    std::atomic<uint64_t> bytes_;
  };

  // Rails, lanes and connections (rpc_server.cc).
  Status StartRail(const RpcRail& spec);
  Status AddLane(Rail* rail, const RpcRail& spec, unsigned i);
  Status Listen(Rail* rail, const RpcRail& spec, SocketAddress addr);
  static void OnConnection(ucp_conn_request_h request, void* arg);
  static void Accept(Lane* lane, ucp_conn_request_h request);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  // Requests (rpc_server_request.cc).
  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  bool DirectCopiesAllowed(Lane* lane, Conn& c, uint32_t pid);
  ucs_status_t AdmitPayloadSource(Lane* lane, DeferredReceive rx, wire::DecodedMessage& msg, bool allowed,
                                  const Conn& conn);
  bool AdmitOrDefer(Lane* lane, DeferredReceive& rx);
  void StartReceive(Lane* lane, DeferredReceive rx, uint64_t recv_attr);
  void Pull(Lane* lane, DeferredReceive rx, std::shared_ptr<BudgetTicket> ticket);
  void ReturnBudget(uint64_t bytes);
  void AdmitDeferred(Lane* lane);

  // Replies (rpc_server_reply.cc).
  static Responder MakeResponder(std::shared_ptr<ResponderGate> gate, size_t lane_index, ucp_ep_h ep,
                                 uint64_t conn_id, uint64_t request_id, uint16_t opcode,
                                 std::shared_ptr<BudgetTicket> ticket,
                                 std::shared_ptr<const wire::Placement> placement);
  void CountPlacement(const Status& placed, uint64_t bytes);
  void NoteFallback(const Status& why);
  void SendReply(Lane* lane, ucp_ep_h ep, uint64_t conn_id, uint64_t request_id, uint16_t opcode,
                 RpcReply reply, uint32_t flags = 0);

  RpcServerOptions options_;
  RpcHandler handler_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // fixed after Start; each rail's in a row
  std::vector<std::unique_ptr<Rail>> rails_;  // fixed after Start
  uint16_t port_ = 0;  // the first rail's
  std::string address_;
  std::shared_ptr<ResponderGate> gate_;
  std::atomic<uint64_t> next_conn_id_{0};
  std::mutex budget_mu_;
  ByteBudget budget_;  // guarded by budget_mu_
  Counter* deferred_total_ = nullptr;
  Counter* requests_ = nullptr;
  Counter* rx_bytes_ = nullptr;
  Counter* tx_bytes_ = nullptr;
  Counter* placed_bytes_ = nullptr;
  Counter* pulled_bytes_ = nullptr;
  Counter* placement_fallbacks_ = nullptr;
  Counter* batched_ = nullptr;
  std::array<std::atomic<bool>, 32> placement_logged_{};  // by StatusCode
};

}  // namespace penstock
