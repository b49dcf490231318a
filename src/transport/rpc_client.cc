#include "transport/rpc_client.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "common/await.h"
#include "common/log.h"
#include "transport/am_message.h"
#include "transport/flow_control.h"
#include "transport/local_direct.h"
#include "transport/socket_address.h"
#include "transport/ucx_worker.h"
#include "transport/wire.h"

namespace penstock {
namespace {

using Clock = std::chrono::steady_clock;

RpcReply ErrorReply(Status status) { return RpcReply{std::move(status), {}, AlignedBuffer(), 0}; }

}  // namespace

// Memory registered by RpcClient::Register, found by address when a transfer lands in it.
struct RpcClient::Registry {
  struct Region {
    uintptr_t begin = 0, end = 0;
    std::vector<std::pair<ucp_context_h, ucp_mem_h>> memh;  // one per distinct context
  };
  std::shared_mutex mu;
  std::map<uintptr_t, const Region*> regions;  // by begin; never overlapping

  // The handle of `ctx` for memory [p, p + n), or null when no registration covers it.
  ucp_mem_h Find(ucp_context_h ctx, const std::byte* p, size_t n) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::shared_lock lock(mu);
    auto it = regions.upper_bound(at);
    if (it == regions.begin()) return nullptr;
    --it;
    if (at + n > it->second->end) return nullptr;
    for (auto [c, h] : it->second->memh) {
      if (c == ctx) return h;
    }
    return nullptr;
  }
};

class RpcClient::Registration {
 public:
  Registration(std::shared_ptr<Registry> registry, Registry::Region region)
      : registry_(std::move(registry)), region_(std::move(region)) {}
  ~Registration() {
    {
      std::unique_lock lock(registry_->mu);
      registry_->regions.erase(region_.begin);
    }
    for (auto [c, h] : region_.memh) ucp_mem_unmap(c, h);
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  const Registry::Region& region() const { return region_; }

 private:
  std::shared_ptr<Registry> registry_;
  Registry::Region region_;
};

class RpcClient::Impl {
 public:
  Impl(const RpcClientOptions& options, UcxWorker::Options worker_options, Registry* registry)
      : options_(options), registry_(registry), worker_options_(std::move(worker_options)) {
    if (options.metrics != nullptr) {
      auto& m = *options.metrics;
      calls_total_ = &m.GetCounter("penstock_transport_client_calls_total", "Data-plane calls");
      failures_ = &m.GetCounter("penstock_transport_client_failures_total",
                                "Data-plane calls that failed in the transport");
      tx_bytes_ = &m.GetCounter("penstock_transport_client_bytes_total",
                                "Data-plane payload bytes", {{"direction", "tx"}});
      rx_bytes_ = &m.GetCounter("penstock_transport_client_bytes_total",
                                "Data-plane payload bytes", {{"direction", "rx"}});
      placed_bytes_ = &m.GetCounter("penstock_transport_client_placed_bytes_total",
                                    "Reply payload bytes received straight into caller memory");
      batched_ = &m.GetCounter("penstock_transport_client_batched_requests_total",
                               "Requests sent together with others to the same target, in one message");
    }
  }

  Status Init() {
    PS_ASSIGN_OR_RETURN(worker_, UcxWorker::Create(worker_options_));
    worker_->CountBatchedInto(batched_);
    PS_RETURN_IF_ERROR(worker_->SetAmHandlers(
        {{wire::AmId::kReply, &Impl::OnReply}, {wire::AmId::kBatch, &Impl::OnBatch}}, this));
    worker_->Start([this] { return CheckDeadlines(); });
    return OkStatus();
  }

  ~Impl() {
    if (worker_ != nullptr) worker_->Stop([this] { Shutdown(); });
  }

  void Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
            std::span<const std::byte> payload, std::function<void(RpcReply)> done,
            std::shared_ptr<ReplyDestination> into) {
    uint64_t id = next_id_.fetch_add(1) + 1;
    auto op_header = std::make_shared<std::vector<std::byte>>(header.begin(), header.end());
    auto done_box = std::make_shared<std::function<void(RpcReply)>>(std::move(done));
    bool posted = worker_->Post([this, id, address, opcode, op_header, payload, done_box, into = std::move(into)] {
      StartCall(id, address, opcode, *op_header, payload, std::move(*done_box), into);
    });
    if (!posted) (*done_box)(ErrorReply(Cancelled("data-plane client is shutting down")));
  }

  std::string TransportName(const std::string& address) {
    if (worker_->OnProgressThread()) return TransportNameNow(address);
    auto p = std::make_shared<std::promise<std::string>>();
    auto f = p->get_future();
    if (!worker_->Post([this, p, address] { p->set_value(TransportNameNow(address)); })) return "";
    if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return "";
    return f.get();
  }

  bool OnProgressThread() const { return worker_->OnProgressThread(); }
  ucp_context_h context() const { return worker_->context(); }

 private:
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
    Impl* impl = nullptr;
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

  // ---- everything below runs on the progress thread ----

  void StartCall(uint64_t id, const std::string& address, uint16_t opcode,
                 std::span<const std::byte> op_header, std::span<const std::byte> payload,
                 std::function<void(RpcReply)> done, std::shared_ptr<ReplyDestination> into) {
    if (calls_total_ != nullptr) calls_total_->Inc();
    if (shutting_down_) return done(ErrorReply(Cancelled("data-plane client is shutting down")));
    if (op_header.size() > wire::kMaxOpHeader) {
      return done(ErrorReply(wire::EncodeRequest(id, opcode, op_header, 0).status()));
    }
    Result<std::shared_ptr<Endpoint>> ep = Connect(address);
    if (!ep.ok()) return done(ErrorReply(ep.status()));
    PendingCall& call = calls_[id];
    call.endpoint = *ep;
    call.opcode = opcode;
    call.deadline = Clock::now() + options_.timeout;
    call.done = std::move(done);
    call.payload = payload;
    call.into = std::move(into);
    std::optional<wire::Placement> placement = PayloadSource(call, op_header);
    if (!placement) placement = LendForPlacement(call);
    call.am_header = std::move(wire::EncodeRequest(id, opcode, op_header, payload.size(),
                                                   placement ? &*placement : nullptr,
                                                   call.pulling ? uint32_t{wire::kPayloadSource} : 0))
                         .value();
    (*ep)->calls.insert(id);
    deadlines_.insert({call.deadline, id});
    if ((*ep)->queue.empty() && Admit(**ep, payload.size())) {
      Send(id, call);
    } else {
      call.send_done = true;  // nothing handed to UCX yet: it can be failed at any time
      (*ep)->queue.push_back(id);
    }
  }

  // A large payload to a server on this host stays in the caller's memory (which must stay
  // valid until the call completes anyway) for the server to copy (RpcClientOptions::
  // local_direct).
  std::optional<wire::Placement> PayloadSource(PendingCall& call, std::span<const std::byte> op_header) {
    if (!options_.local_direct || !call.endpoint->local || call.endpoint->pull_refused ||
        call.payload.size() < std::max<uint64_t>(options_.placement_threshold, 1)) {
      return std::nullopt;
    }
    call.pulling = true;
    call.op_header.assign(op_header.begin(), op_header.end());
    return Ticketed(call, {{reinterpret_cast<uintptr_t>(call.payload.data()), call.payload.size()}});
  }

  // Borrows the memory of a call whose reply the server may place (RpcClientOptions::
  // local_direct) and describes it for the request.
  std::optional<wire::Placement> LendForPlacement(PendingCall& call) {
    if (!options_.local_direct || call.into == nullptr || !call.endpoint->local ||
        call.endpoint->placement_refused) {
      return std::nullopt;
    }
    const uint64_t length = call.into->UpFrontLength();
    if (length < std::max<uint64_t>(options_.placement_threshold, 1)) return std::nullopt;
    std::vector<std::span<std::byte>> spans = call.into->Borrow(length);
    if (spans.empty()) return std::nullopt;
    if (spans.size() > wire::kMaxPlacementIovs) {
      call.into->Return(false);
      return std::nullopt;
    }
    std::vector<wire::PlacementIov> iovs;
    for (auto s : spans) iovs.push_back({reinterpret_cast<uintptr_t>(s.data()), s.size()});
    call.lent = std::move(spans);
    return Ticketed(call, std::move(iovs));
  }

  // Memory of this process described for a server, with a fresh ticket the call keeps.
  wire::Placement Ticketed(PendingCall& call, std::vector<wire::PlacementIov> iovs) {
    wire::Placement p;
    p.pid = static_cast<uint32_t>(getpid());
    p.iovs = std::move(iovs);
    do {
      p.ticket = ticket_rng_();
    } while (p.ticket == 0);
    call.ticket = std::make_unique<std::atomic<uint64_t>>(p.ticket);
    p.ticket_addr = reinterpret_cast<uintptr_t>(call.ticket.get());
    return p;
  }

  // Clears the call's ticket, so a server that has not yet checked it leaves the call's memory
  // alone, then returns memory the call lent up front (if any) to its destination.
  static void Revoke(PendingCall& call, bool ok) {
    if (call.ticket != nullptr) call.ticket->store(0, std::memory_order_seq_cst);
    if (call.lent.empty()) return;
    call.lent.clear();
    call.into->Return(ok);
  }

  // Hands an admitted call to UCX.
  void Send(uint64_t id, PendingCall& call) {
    call.admitted = true;
    call.send_done = false;
    if (tx_bytes_ != nullptr) tx_bytes_->Inc(call.payload.size());
    auto out = std::make_unique<OutgoingMessage>();
    out->am_header = std::move(call.am_header);
    if (!call.pulling) out->payload = call.payload;  // else the server copies it from our memory
    out->on_complete = [this, id](ucs_status_t st) { OnSendComplete(id, st); };
    uint32_t flags = UCP_AM_SEND_FLAG_REPLY;
    if (options_.rendezvous_threshold != 0 && out->payload.size() >= options_.rendezvous_threshold) {
      flags |= UCP_AM_SEND_FLAG_RNDV;
    }
    if (out->payload.empty() || !call.endpoint->batch) {
      // A call that carries no payload (a read, a head, or a large same-host write whose
      // payload the target copies itself) goes at once: the target starts its work (a device
      // read, a copy) as soon as it arrives. Held for the pass's batch, 4 KiB random reads
      // reached the targets in bursts and ran ~10% slower (docs/performance.md, issue 7).
      // Calls that carry payloads go together, which also lets a target's group commit gather
      // them.
      return SendMessage(call.endpoint->ep, wire::AmId::kRequest, std::move(out), flags);
    }
    worker_->Send(call.endpoint->ep, wire::AmId::kRequest, std::move(out), flags);
  }

  // Takes window room for a call of `bytes` on `e` (one call only while it is not established).
  static bool Admit(Endpoint& e, uint64_t bytes) {
    if (!e.established && e.window.ops() > 0) return false;
    return e.window.TryAcquire(bytes);
  }

  // Sends queued calls of `e` while its window has room, in FIFO order.
  void SendQueued(Endpoint* e) {
    while (!e->failed && !e->queue.empty()) {
      auto it = calls_.find(e->queue.front());
      if (it == calls_.end() || it->second.outcome) {  // finished (timed out) while queued
        e->queue.pop_front();
        continue;
      }
      if (!Admit(*e, it->second.payload.size())) return;
      e->queue.pop_front();
      Send(it->first, it->second);
    }
  }

  Result<std::shared_ptr<Endpoint>> Connect(const std::string& address) {
    auto it = endpoints_.find(address);
    if (it != endpoints_.end()) return it->second;
    PS_ASSIGN_OR_RETURN(SocketAddress addr, ResolveSocketAddress(address));
    auto e = std::make_shared<Endpoint>(options_.max_inflight_ops, options_.max_inflight_bytes);
    e->address = address;
    e->impl = this;
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                   UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = addr.get();
    p.sockaddr.addrlen = addr.length;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &Impl::OnEndpointError;
    p.err_handler.arg = e.get();
    ucs_status_t st = ucp_ep_create(worker_->worker(), &p, &e->ep);
    if (st != UCS_OK) {
      return Unavailable("cannot connect to data-plane address " + address + ": " +
                         ucs_status_string(st) + "; is the target running?");
    }
    e->local = IsLocalAddress(addr);
    endpoints_[address] = e;
    return e;
  }

  static void OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* e = static_cast<Endpoint*>(arg);
    e->impl->FailEndpoint(e, Unavailable("data-plane connection to " + e->address + " failed: " +
                                         ucs_status_string(status) +
                                         "; is the target running and reachable?"));
  }

  // Fails every call on `e` with `status`, drops it from the cache and closes it.
  void FailEndpoint(Endpoint* e, const Status& status) {
    if (e->failed) return;
    e->failed = true;
    auto it = endpoints_.find(e->address);
    std::shared_ptr<Endpoint> keep;
    if (it != endpoints_.end() && it->second.get() == e) {
      keep = it->second;
      endpoints_.erase(it);
    }
    std::vector<uint64_t> ids(e->calls.begin(), e->calls.end());
    for (uint64_t id : ids) Complete(id, ErrorReply(status));
    worker_->CloseEndpointAsync(e->ep, [keep] {});
  }

  void OnSendComplete(uint64_t id, ucs_status_t st) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    it->second.send_done = true;
    if (std::exchange(it->second.resend, false) && st == UCS_OK && !it->second.outcome) {
      return Send(id, it->second);  // the server refused to copy the payload: it goes now
    }
    if (st != UCS_OK && !it->second.outcome) {
      it->second.outcome = ErrorReply(Unavailable("sending to data-plane address " +
                                                  it->second.endpoint->address + " failed: " +
                                                  ucs_status_string(st)));
    }
    if (it->second.outcome && !it->second.receiving) Finish(it);
  }

  // Records the outcome of call `id` (first one wins); delivers it once the send is done.
  void Complete(uint64_t id, RpcReply reply) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    if (!it->second.outcome) it->second.outcome = std::move(reply);
    if (it->second.send_done && !it->second.receiving) Finish(it);
  }

  void Finish(std::unordered_map<uint64_t, PendingCall>::iterator it) {
    PendingCall call = std::move(it->second);
    uint64_t id = it->first;
    calls_.erase(it);
    Revoke(call, false);  // lent memory no reply used (a placed reply returned it already)
    call.endpoint->calls.erase(id);
    deadlines_.erase({call.deadline, id});
    if (!call.outcome->status.ok() && failures_ != nullptr) failures_->Inc();
    if (call.admitted) call.endpoint->window.Release(call.payload.size());
    call.done(std::move(*call.outcome));
    if (call.admitted) SendQueued(call.endpoint.get());
  }

  std::chrono::milliseconds CheckDeadlines() {
    auto now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      uint64_t id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      auto it = calls_.find(id);
      if (it == calls_.end() || it->second.outcome) continue;
      if (!it->second.send_done) {
        // Its request may still wait in this pass's batch (sent from a call this loop just
        // finished, say): it goes now, so it is handed to UCX like any other.
        worker_->FlushSends();
        it = calls_.find(id);
        if (it == calls_.end() || it->second.outcome) continue;
      }
      PendingCall& call = it->second;
      call.outcome = ErrorReply(DeadlineExceeded(
          "data-plane call (opcode " + std::to_string(call.opcode) + ") to " +
          call.endpoint->address + " got no reply within " +
          std::to_string(options_.timeout.count()) + " ms"));
      if (call.send_done && !call.receiving) {
        Finish(it);
      } else {
        // UCX still reads the caller's payload, or writes the reply into memory the caller
        // lent: only closing the connection releases it.
        FailEndpoint(call.endpoint.get(),
                     Unavailable("data-plane connection to " + call.endpoint->address + " reset after a " +
                                 (call.receiving ? "reply" : "send") + " timed out"));
      }
    }
    if (deadlines_.empty()) return std::chrono::milliseconds::max();
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadlines_.begin()->first - now);
    return std::max(wait, std::chrono::milliseconds(1));
  }

  // Several replies in one message (wire.h, batches): each as if it had come alone. The calls
  // of a batch that does not parse get no reply from it (they time out); the first such batch
  // is logged.
  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<Impl*>(arg);
    return ReceiveBatch(
        self->worker_->worker(), header, header_length, data, length, param, &Impl::OnReply, self,
        [self](const Status& bad, ucp_ep_h) {
          if (!std::exchange(self->bad_batch_logged_, true)) {
            PS_LOG_WARN("data plane: dropped a batch of replies: {}", bad.message());
          }
        });
  }

  static ucs_status_t OnReply(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<Impl*>(arg);
    auto bytes = AmHeaderBytes(header, header_length);
    Result<wire::DecodedMessage> msg = wire::DecodeMessage(bytes, length);
    if (msg.ok() && msg->kind != wire::MessageKind::kReply) {
      msg = InvalidArgument("malformed data-plane reply: the message is a request");
    }
    uint64_t id = msg.ok() ? msg->request_id : wire::PeekRequestId(bytes);
    auto it = self->calls_.find(id);
    if (it == self->calls_.end() || it->second.outcome) return UCS_OK;  // late or unknown
    Endpoint* e = it->second.endpoint.get();
    if (!e->established) {  // the connection works: the calls queued behind the first may go
      e->established = true;
      e->batch = BatchesPay(e->ep);
      self->worker_->Post([self, keep = it->second.endpoint] { self->SendQueued(keep.get()); });
    }
    if (!msg.ok()) {
      self->Complete(id, ErrorReply(Internal("bad reply from data-plane address " +
                                             it->second.endpoint->address + ": " +
                                             msg.status().message())));
      return UCS_OK;
    }
    auto reply = std::make_shared<RpcReply>();
    reply->from_peer = true;
    reply->status = Status(msg->status_code, std::string(msg->status_message));
    reply->header.assign(msg->op_header.begin(), msg->op_header.end());
    PendingCall& call = it->second;
    if (msg->pull_refused && call.pulling) return self->SendPayloadAfterAll(call, id, reply->status);
    if (msg->placed) return self->OnPlacedReply(call, id, std::move(*reply), msg->payload_len);
    if (self->rx_bytes_ != nullptr) self->rx_bytes_->Inc(length);
    if (!call.lent.empty()) {
      // The server sent the payload instead of placing it: receive it into the same memory.
      std::vector<std::span<std::byte>> into = std::move(call.lent);
      call.lent.clear();
      call.ticket->store(0, std::memory_order_seq_cst);
      if (length > 0 && TrimTo(into, length)) {
        // It fitted, so the server would not write into this process at all (another user, a
        // ptrace policy, direct copies off there): offer it no more reply memory.
        if (msg->status_code == StatusCode::kOk && !std::exchange(call.endpoint->placement_refused, true)) {
          PS_LOG_INFO("data plane: {} sends replies instead of writing them into this process; "
                      "no more offers to it", call.endpoint->address);
        }
        return self->ReceiveInto(call, id, reply, data, length, param, std::move(into));
      }
      call.into->Return(length == 0);
    } else if (length > 0 && call.into != nullptr) {
      std::vector<std::span<std::byte>> into = call.into->Borrow(length);
      if (!into.empty()) return self->ReceiveInto(call, id, reply, data, length, param, std::move(into));
    }
    if (length > self->options_.max_reply_bytes) {
      self->Complete(id, ErrorReply(ResourceExhausted(
                             "reply of " + std::to_string(length) + " bytes from data-plane address " +
                             call.endpoint->address + " exceeds the client's max_reply_bytes (" +
                             std::to_string(self->options_.max_reply_bytes) +
                             "); raise RpcClientOptions::max_reply_bytes or lend the call a destination")));
      return UCS_OK;  // (UCX drops a payload nobody receives)
    }
    return ReceivePayload(self->worker_->worker(), data, length, param,
                          [self, id, reply](Result<AlignedBuffer> payload) {
                            if (!payload.ok()) return self->Complete(id, ErrorReply(payload.status()));
                            reply->payload = std::move(payload).value();
                            self->Complete(id, std::move(*reply));
                          });
  }

  // The server would not copy the payload out of our memory (it did not run the request): send
  // the call again with its payload, and no more payload sources to that server.
  ucs_status_t SendPayloadAfterAll(PendingCall& call, uint64_t id, const Status& why) {
    call.ticket->store(0, std::memory_order_seq_cst);
    call.pulling = false;
    if (!std::exchange(call.endpoint->pull_refused, true)) {
      PS_LOG_INFO("data plane: {} will not copy request payloads from this process ({}); sending them",
                  call.endpoint->address, why.message());
    }
    call.am_header = std::move(wire::EncodeRequest(id, call.opcode, call.op_header, call.payload.size()).value());
    if (call.send_done) {
      Send(id, call);
    } else {
      call.resend = true;  // OnSendComplete sends it
    }
    return UCS_OK;
  }

  // A reply whose `length` payload bytes the server wrote into the memory the call lent.
  ucs_status_t OnPlacedReply(PendingCall& call, uint64_t id, RpcReply reply, uint64_t length) {
    uint64_t lent = 0;
    for (auto piece : call.lent) lent += piece.size();
    if (call.lent.empty() || length > lent) {
      Complete(id, ErrorReply(Internal("bad reply from data-plane address " + call.endpoint->address +
                                       ": it placed " + std::to_string(length) + " bytes in " +
                                       std::to_string(lent) + " bytes of lent memory")));
      return UCS_OK;
    }
    Revoke(call, true);
    if (placed_bytes_ != nullptr) placed_bytes_->Inc(length);
    reply.placed = length;
    Complete(id, std::move(reply));
    return UCS_OK;
  }

  // Cuts `spans` down to their first `length` bytes; false when they hold fewer.
  static bool TrimTo(std::vector<std::span<std::byte>>& spans, uint64_t length) {
    uint64_t left = length;
    size_t n = 0;
    for (; n < spans.size() && left > 0; ++n) {
      if (spans[n].size() >= left) {
        spans[n] = spans[n].first(left);
        left = 0;
      } else {
        left -= spans[n].size();
      }
    }
    spans.resize(n);
    return left == 0;
  }

  // Receives the reply payload of call `id` into `into` (lent by call.into), then completes it.
  ucs_status_t ReceiveInto(PendingCall& call, uint64_t id, std::shared_ptr<RpcReply> reply, void* data,
                           size_t length, const ucp_am_recv_param_t* param, std::vector<std::span<std::byte>> into) {
    uint64_t total = 0;
    for (auto piece : into) total += piece.size();
    if (total != length) {
      call.into->Return(false);
      Complete(id, ErrorReply(Internal("reply destination lent " + std::to_string(total) + " bytes for a " +
                                       std::to_string(length) + "-byte payload")));
      return UCS_OK;
    }
    ucp_mem_h memh = into.size() == 1 && registry_ != nullptr
                         ? registry_->Find(worker_->context(), into[0].data(), into[0].size())
                         : nullptr;
    call.receiving = true;
    return ReceivePayloadInto(worker_->worker(), data, length, param, std::move(into), memh,
                              [this, id, reply, length, dest = call.into](Status s) {
                                dest->Return(s.ok());
                                auto it = calls_.find(id);
                                if (it == calls_.end()) return;
                                it->second.receiving = false;
                                if (!s.ok()) return Complete(id, ErrorReply(std::move(s)));
                                if (placed_bytes_ != nullptr) placed_bytes_->Inc(length);
                                reply->placed = length;
                                Complete(id, std::move(*reply));
                              });
  }

  void Shutdown() {
    shutting_down_ = true;
    for (auto& [id, call] : calls_) {
      if (!call.outcome) call.outcome = ErrorReply(Cancelled("data-plane client destroyed"));
    }
    std::vector<ucp_ep_h> eps;
    for (auto& [address, e] : endpoints_) {
      e->failed = true;
      eps.push_back(e->ep);
    }
    worker_->CloseEndpoints(eps);  // completes in-flight sends and receives, which delivers their calls
    endpoints_.clear();
    for (auto& [id, call] : calls_) {
      if (call.receiving) {  // not ended by closing (should not happen): give the memory back unfinished
        call.receiving = false;
        call.into->Return(false);
      }
    }
    while (!calls_.empty()) Finish(calls_.begin());
  }

  std::string TransportNameNow(const std::string& address) {
    auto it = endpoints_.find(address);
    if (it == endpoints_.end()) return "";
    return EndpointTransports(it->second->ep);
  }

  RpcClientOptions options_;
  Registry* registry_;  // the RpcClient's, outlives this
  std::unique_ptr<UcxWorker> worker_;
  std::atomic<uint64_t> next_id_{0};
  // Progress thread only:
  bool shutting_down_ = false;
  bool bad_batch_logged_ = false;
  std::unordered_map<std::string, std::shared_ptr<Endpoint>> endpoints_;
  std::unordered_map<uint64_t, PendingCall> calls_;
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

namespace {

// Whether every device of a UCX_NET_DEVICES list ("eth1", "mlx5_0:1,eth2", "all") exists on
// this host, as a network interface or an RDMA device, whether or not UCX can use it now.
bool NetworkDevicesExist(const std::string& devices) {
  std::stringstream list(devices);
  std::string device;
  while (std::getline(list, device, ',')) {
    const std::string name = device.substr(0, device.find(':'));
    if (name == "all") continue;
    if (name.empty() || name.find('/') != std::string::npos) return false;
    std::error_code ec;
    if (!std::filesystem::exists("/sys/class/net/" + name, ec) &&
        !std::filesystem::exists("/sys/class/infiniband/" + name, ec)) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<RpcClient>> RpcClient::Create(const RpcClientOptions& options) {
  if (options.workers == 0 || options.workers > 64) {
    return InvalidArgument("data-plane client workers must be 1..64, not " + std::to_string(options.workers));
  }
  if (options.local_direct) AllowLocalDirect();
  // Each worker gets its share of the per-target window, so the client's bound stays the same.
  RpcClientOptions per = options;
  auto share = [&](auto total) { return total == 0 ? total : std::max<decltype(total)>(1, (total + options.workers - 1) / options.workers); };
  per.max_inflight_ops = share(options.max_inflight_ops);
  per.max_inflight_bytes = share(options.max_inflight_bytes);
  // Without per-worker devices the workers share one context (mt_workers_shared): one set of
  // transport resources and memory registrations instead of one per worker.
  const bool shared = options.net_devices.empty() && options.workers > 1;
  auto registry = std::make_shared<Registry>();
  std::vector<std::unique_ptr<Impl>> impls;
  std::vector<size_t> slots;  // impls[k] is worker slots[k]: its rail
  std::vector<std::string> failures;
  for (unsigned i = 0; i < options.workers; ++i) {
    std::string devices = options.net_devices.empty() ? "" : options.net_devices[i % options.net_devices.size()];
    UcxWorker::Options wo{.name = "ps-ucx-client", .net_devices = devices, .shared_context = shared,
                          .context = shared && i > 0 ? impls[0]->context() : nullptr};
    auto impl = std::make_unique<Impl>(per, std::move(wo), registry.get());
    Status s = impl->Init();
    if (!s.ok()) {
      const std::string which = "data-plane worker " + std::to_string(i) + " on network devices '" + devices + "'";
      if (devices.empty() || !NetworkDevicesExist(devices)) {
        while (!impls.empty()) impls.pop_back();  // worker 0 last
        return devices.empty() ? s
                               : s.WithContext(which + " (no such network device on this host: fix --net-devices)");
      }
      // The devices exist but UCX cannot use them now (a link down): start without this worker.
      failures.push_back(which + ": " + s.message());
      continue;
    }
    impls.push_back(std::move(impl));
    slots.push_back(i);
  }
  if (impls.empty()) {
    std::string all;
    for (const std::string& f : failures) all += (all.empty() ? "" : "; ") + f;
    return Unavailable("no data-plane worker could start (" + all + "); bring a link of --net-devices up");
  }
  for (const std::string& f : failures) {
    PS_LOG_WARN("{}; starting without it, its calls go to the other workers", f);
  }
  return std::unique_ptr<RpcClient>(new RpcClient(std::move(impls), std::move(slots), std::move(registry),
                                                  options.rail_retry_after));
}

RpcClient::RpcClient(std::vector<std::unique_ptr<Impl>> impls, std::vector<size_t> slots,
                     std::shared_ptr<Registry> registry, std::chrono::milliseconds rail_retry_after)
    : impls_(std::move(impls)),
      slots_(std::move(slots)),
      registry_(std::move(registry)),
      calls_(new std::atomic<uint64_t>[impls_.size()]()),
      rail_retry_after_(rail_retry_after) {}
RpcClient::~RpcClient() {
  while (!impls_.empty()) impls_.pop_back();  // worker 0, which may own the shared context, last
}

void RpcClient::Call(const std::string& address, uint16_t opcode,
                     std::span<const std::byte> header, std::span<const std::byte> payload,
                     std::function<void(RpcReply)> done, std::shared_ptr<ReplyDestination> into) {
  size_t i = next_worker_.fetch_add(1, std::memory_order_relaxed) % impls_.size();
  if (address.find(',') != std::string::npos) {  // a multi-rail server: this worker's rail
    std::string rail;
    std::tie(i, rail) = PickRail(address, i);
    calls_[i].fetch_add(1, std::memory_order_relaxed);
    auto observe = [this, rail, done = std::move(done)](RpcReply reply) mutable {
      const StatusCode code = reply.status.code();
      if (!reply.from_peer && (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded)) {
        MarkRailDown(rail);
      }
      done(std::move(reply));
    };
    impls_[i]->Call(rail, opcode, header, payload, std::move(observe), std::move(into));
    return;
  }
  calls_[i].fetch_add(1, std::memory_order_relaxed);
  impls_[i]->Call(address, opcode, header, payload, std::move(done), std::move(into));
}

std::pair<size_t, std::string> RpcClient::PickRail(const std::string& address, size_t first) {
  std::string own(RailFor(address, slots_[first]));
  if (!any_rail_down_.load(std::memory_order_relaxed)) return {first, std::move(own)};
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(rails_mu_);
  std::erase_if(rails_down_, [&](const auto& r) { return r.second <= now; });  // the next call retries it
  if (rails_down_.empty()) any_rail_down_.store(false, std::memory_order_relaxed);
  if (!rails_down_.contains(own)) return {first, std::move(own)};
  // Another worker whose own rail works (it may be pinned to that rail's network devices).
  for (size_t k = 1; k < impls_.size(); ++k) {
    const size_t j = (first + k) % impls_.size();
    std::string rail(RailFor(address, slots_[j]));
    if (!rails_down_.contains(rail)) return {j, std::move(rail)};
  }
  // No worker's own rail works (fewer workers than rails): a rail no worker calls by default.
  const size_t rails = static_cast<size_t>(std::count(address.begin(), address.end(), ',')) + 1;
  for (size_t r = 0; r < rails; ++r) {
    std::string rail(RailFor(address, r));
    if (!rails_down_.contains(rail)) return {first, std::move(rail)};
  }
  return {first, std::move(own)};  // every rail down: try it anyway
}

void RpcClient::MarkRailDown(const std::string& rail) {
  std::lock_guard lock(rails_mu_);
  const bool added = rails_down_.insert_or_assign(rail, std::chrono::steady_clock::now() + rail_retry_after_).second;
  if (added) {
    PS_LOG_WARN("data plane: rail {} failed; calls go to the other rails for {} ms", rail,
                rail_retry_after_.count());
  }
  any_rail_down_.store(true, std::memory_order_relaxed);
}

std::vector<std::string> RpcClient::RailsDown() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> out;
  std::lock_guard lock(rails_mu_);
  for (const auto& [rail, until] : rails_down_) {
    if (until > now) out.push_back(rail);
  }
  return out;
}

Result<std::shared_ptr<RpcClient::Registration>> RpcClient::Register(void* data, size_t size) {
  if (data == nullptr || size == 0) return InvalidArgument("cannot register an empty memory range");
  Registry::Region region;
  region.begin = reinterpret_cast<uintptr_t>(data);
  region.end = region.begin + size;
  auto unmap = [&] {
    for (auto [c, h] : region.memh) ucp_mem_unmap(c, h);
  };
  for (const auto& impl : impls_) {
    ucp_context_h ctx = impl->context();
    bool seen = false;
    for (auto [c, h] : region.memh) seen |= c == ctx;
    if (seen) continue;
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = data;
    mp.length = size;
    ucp_mem_h memh = nullptr;
    ucs_status_t st = ucp_mem_map(ctx, &mp, &memh);
    if (st != UCS_OK) {
      unmap();
      return ResourceExhausted("cannot register " + std::to_string(size) + " bytes with UCX: " +
                               ucs_status_string(st) + "; check the locked-memory limit (ulimit -l)");
    }
    region.memh.emplace_back(ctx, memh);
  }
  std::unique_lock lock(registry_->mu);
  auto next = registry_->regions.lower_bound(region.begin);
  const bool overlaps_next = next != registry_->regions.end() && next->second->begin < region.end;
  const bool overlaps_prev = next != registry_->regions.begin() && std::prev(next)->second->end > region.begin;
  if (overlaps_next || overlaps_prev) {
    lock.unlock();
    unmap();
    return InvalidArgument("memory range overlaps one already registered; unregister that one first");
  }
  auto reg = std::make_shared<Registration>(registry_, std::move(region));
  registry_->regions[reg->region().begin] = &reg->region();
  return reg;
}

RpcReply RpcClient::CallSync(const std::string& address, uint16_t opcode,
                             std::span<const std::byte> header,
                             std::span<const std::byte> payload) {
  for (const auto& impl : impls_) {
    if (impl->OnProgressThread()) {
      return ErrorReply(FailedPrecondition(
          "RpcClient::CallSync called on the transport thread; use Call() from callbacks"));
    }
  }
  return Await<RpcReply>([&](auto done) { Call(address, opcode, header, payload, std::move(done)); });
}

std::string RpcClient::TransportName(const std::string& address) {
  std::string names;  // each worker's, distinct ones joined with '+'
  for (size_t i = 0; i < impls_.size(); ++i) {
    std::string n = impls_[i]->TransportName(std::string(RailFor(address, slots_[i])));
    if (n.empty() || ("+" + names + "+").find("+" + n + "+") != std::string::npos) continue;
    names += names.empty() ? n : "+" + n;
  }
  return names;
}

std::vector<uint64_t> RpcClient::CallsPerWorker() const {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < impls_.size(); ++i) out.push_back(calls_[i].load(std::memory_order_relaxed));
  return out;
}

}  // namespace penstock
