// rpc_call_engine.h — one worker of an RpcClient: its calls, from Call() to the reply.
//
// Internal to the transport (RpcClient, rpc_client.h, routes each call to one of these). The
// engine owns one UcxWorker and, on that worker's progress thread, everything its calls touch:
// one endpoint per server address (created on the first call, cached, dropped when the
// connection fails so the next call reconnects), the flow-control window of each endpoint
// (calls beyond it queue, FIFO), the pending calls by request id, their deadlines, and the
// matching of replies to calls. With a server on this host it also offers the call's memory for
// direct copies (local_direct.h): a large request payload to copy out of this process, or the
// reply destination's memory for the server to write the reply into (rpc_call_local_direct.cc).
//
// Files: rpc_call_engine.cc (starting, sending and finishing calls; endpoints; deadlines),
// rpc_call_reply.cc (receiving replies), rpc_call_local_direct.cc (direct copies' client side).
//
// Thread safety: Call, TransportName, OnProgressThread and context are thread-safe; everything
// else runs on the progress thread. `done` callbacks run there. Destroying the engine fails
// every pending call with kCancelled before it returns.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/metrics.h"
#include "penstock/status.h"
#include "transport/call_abandon.h"
#include "transport/flow_control.h"
#include "transport/rpc.h"
#include "transport/rpc_client.h"
#include "transport/ucx_worker.h"
#include "transport/wire.h"

namespace penstock {

class RegistrationCache;

// A reply carrying only the client's own error (not from the server).
inline RpcReply ErrorReply(Status status) { return RpcReply{std::move(status), {}, AlignedBuffer(), 0}; }

class RpcCallEngine {
 public:
  // `options` are this worker's (its share of the per-target window); `registry` is the
  // RpcClient's and outlives the engine (may be null).
  RpcCallEngine(const RpcClientOptions& options, UcxWorker::Options worker_options,
                RegistrationCache* registry);
  ~RpcCallEngine();

  RpcCallEngine(const RpcCallEngine&) = delete;
  RpcCallEngine& operator=(const RpcCallEngine&) = delete;

  // Creates the worker and starts its thread. Errors: UcxWorker::Create's.
  Status Init();

  // RpcClient::Call for one address (one rail); `header` is copied, `payload` must stay valid
  // until `done` runs.
  void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
            std::span<const std::byte> payload, std::function<void(RpcReply)> done,
            std::shared_ptr<ReplyDestination> into, std::shared_ptr<CallAbandon> abandon = nullptr);

  // The UCX transports of the connection to `address` ("" when none; waits up to 5 s for the
  // progress thread).
  std::string TransportName(const std::string& address);

  bool OnProgressThread() const { return worker_->OnProgressThread(); }
  ucp_context_h context() const { return worker_->context(); }

 private:
  using Clock = std::chrono::steady_clock;

  struct Endpoint {
    Endpoint(uint64_t max_ops, uint64_t max_bytes) : window(max_ops, max_bytes) {}
    std::string address;
    ucp_ep_h ep = nullptr;
    bool failed = false;
    bool local = false;  // the server's address is on this host: direct copies may work
    bool pull_refused = false;  // the server would not copy a payload from us: send them
    bool placement_refused = false;  // it sent a reply that fitted the memory we lent
    // Until the first reply arrives the connection may still be wiring up: one call at a time.
    // (UCX 1.13 can abort with "Assertion `max_iov > 1'" when it replays many requests queued
    // during wire-up, seen with several workers of one process over shared memory.)
    bool established = false;
    bool batch = false;  // set once established: small calls go in batches (BatchesPay)
    std::unordered_set<uint64_t> calls;  // sent and queued
    InflightWindow window;               // calls handed to UCX and not yet finished
    std::deque<uint64_t> queue;          // calls waiting for the window, FIFO
    RpcCallEngine* engine = nullptr;
  };
  struct PendingCall {
    std::shared_ptr<Endpoint> endpoint;
    uint16_t opcode = 0;
    Clock::time_point deadline;
    std::function<void(RpcReply)> done;
    bool send_done = false;
    std::optional<RpcReply> outcome;  // set once; delivered when the send is done too
    bool admitted = false;            // took room in the endpoint's window (handed to UCX)
    std::vector<std::byte> am_header;  // until sent
    std::span<const std::byte> payload;
    std::shared_ptr<ReplyDestination> into;  // where the reply payload may go (may be null)
    std::shared_ptr<CallAbandon> abandon;    // bound while the call runs (may be null)
    // A reply payload is being received into memory `into` lent: the call is delivered only
    // after it ended (and the memory was returned).
    bool receiving = false;
    // Memory `into` lent when the call was sent, offered to the server for the reply (reply
    // placement), and the ticket word the server reads back before it writes there; cleared
    // before the memory goes back (Revoke).
    std::vector<std::span<std::byte>> lent;
    std::unique_ptr<std::atomic<uint64_t>> ticket;
    // The payload stays in the caller's memory for the server to copy (kPayloadSource); the op
    // header is kept to send the call again with its payload if the server refuses.
    bool pulling = false;
    bool resend = false;  // refused before our send completed: send again once it has
    std::vector<std::byte> op_header;
  };
  using CallMap = std::unordered_map<uint64_t, PendingCall>;

  // ---- everything below runs on the progress thread ----

  // Calls and endpoints (rpc_call_engine.cc).
  void StartCall(uint64_t id, const std::string& address, uint16_t opcode,
                 std::span<const std::byte> op_header, std::span<const std::byte> payload,
                 std::function<void(RpcReply)> done, std::shared_ptr<ReplyDestination> into,
                 std::shared_ptr<CallAbandon> abandon);
  void Send(uint64_t id, PendingCall& call);
  static bool Admit(Endpoint& e, uint64_t bytes);
  void SendQueued(Endpoint* e);
  void OnSendComplete(uint64_t id, ucs_status_t st);
  void Complete(uint64_t id, RpcReply reply);
  void Finish(CallMap::iterator it);
  // Ends call `id` before its reply with `why` (its deadline passed, or CallAbandon): at once
  // when UCX no longer reads its payload nor writes its reply, else by closing its connection
  // (the message says the send or reply `ended`, e.g. "timed out").
  void EndBeforeReply(uint64_t id, Status why, const std::string& ended);
  // The worker's tick: ends the calls past their deadline; returns how long until the next one.
  std::chrono::milliseconds CheckDeadlines();
  void Shutdown();
  Result<std::shared_ptr<Endpoint>> Connect(const std::string& address);
  static void OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status);
  void FailEndpoint(Endpoint* e, const Status& status);
  std::string TransportNameNow(const std::string& address);

  // Replies (rpc_call_reply.cc).
  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnReply(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  void NoteEstablished(const std::shared_ptr<Endpoint>& e);
  // Receives the payload of a reply to call `id` (`reply`: its status and header; `status_ok`:
  // the server's status is OK) that the server sent rather than placed: into the memory the call
  // lent, into memory its destination lends now, or into a buffer of its own; then completes it.
  ucs_status_t ReceiveReplyPayload(PendingCall& call, uint64_t id, std::shared_ptr<RpcReply> reply,
                                   bool status_ok, void* data, size_t length,
                                   const ucp_am_recv_param_t* param);
  ucs_status_t ReceiveInto(PendingCall& call, uint64_t id, std::shared_ptr<RpcReply> reply, void* data,
                           size_t length, const ucp_am_recv_param_t* param,
                           std::vector<std::span<std::byte>> into);
  static bool TrimTo(std::vector<std::span<std::byte>>& spans, uint64_t length);

  // Direct copies with a server on this host (rpc_call_local_direct.cc).
  std::optional<wire::Placement> PayloadSource(PendingCall& call, std::span<const std::byte> op_header);
  std::optional<wire::Placement> LendForPlacement(PendingCall& call);
  wire::Placement Ticketed(PendingCall& call, std::vector<wire::PlacementIov> iovs);
  static void Revoke(PendingCall& call, bool ok);
  ucs_status_t SendPayloadAfterAll(PendingCall& call, uint64_t id, const Status& why);
  ucs_status_t OnPlacedReply(PendingCall& call, uint64_t id, RpcReply reply, uint64_t length);

  RpcClientOptions options_;
  RegistrationCache* registry_;  // the RpcClient's, outlives this
  std::unique_ptr<UcxWorker> worker_;
  std::atomic<uint64_t> next_id_{0};
  // Progress thread only:
  bool shutting_down_ = false;
  bool bad_batch_logged_ = false;
  std::unordered_map<std::string, std::shared_ptr<Endpoint>> endpoints_;
  CallMap calls_;
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;
  Counter* calls_total_ = nullptr;
  Counter* failures_ = nullptr;
  Counter* tx_bytes_ = nullptr;
  Counter* rx_bytes_ = nullptr;
  Counter* placed_bytes_ = nullptr;
  Counter* batched_ = nullptr;
  std::mt19937_64 ticket_rng_{std::random_device{}()};  // progress thread
  const UcxWorker::Options worker_options_;
};

}  // namespace penstock
