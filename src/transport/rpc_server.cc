#include "transport/rpc_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>
#include <utility>

#include "common/log.h"
#include "transport/am_message.h"
#include "transport/flow_control.h"
#include "transport/local_direct.h"
#include "transport/socket_address.h"
#include "transport/ucx_worker.h"
#include "transport/wire.h"

namespace penstock {
namespace {

// What a Responder holds: lets it reach the server while it runs, and nothing after Stop().
struct ResponderGate {
  std::mutex mu;
  RpcServer::Impl* impl = nullptr;  // guarded by mu; null once stopped
};

}  // namespace

class RpcServer::Impl {
 public:
  Impl(const RpcServerOptions& options, RpcHandler handler)
      : options_(options), handler_(std::move(handler)), budget_(options.max_incoming_bytes) {
    if (options.metrics != nullptr) {
      auto& m = *options.metrics;
      requests_ = &m.GetCounter("penstock_transport_server_requests_total",
                                "Data-plane requests received");
      rx_bytes_ = &m.GetCounter("penstock_transport_server_bytes_total",
                                "Data-plane payload bytes", {{"direction", "rx"}});
      tx_bytes_ = &m.GetCounter("penstock_transport_server_bytes_total",
                                "Data-plane payload bytes", {{"direction", "tx"}});
      deferred_total_ = &m.GetCounter(
          "penstock_transport_server_deferred_receives_total",
          "Request payloads received later because max_incoming_bytes was in use");
      placed_bytes_ = &m.GetCounter("penstock_transport_server_placed_bytes_total",
                                    "Reply payload bytes written straight into a local client's memory");
      pulled_bytes_ = &m.GetCounter("penstock_transport_server_pulled_bytes_total",
                                    "Request payload bytes copied straight out of a local client's memory");
      placement_fallbacks_ = &m.GetCounter(
          "penstock_transport_server_placement_fallbacks_total",
          "Replies a local client offered memory for, or request payloads it left in its "
          "memory, that went over the transport instead");
      batched_ = &m.GetCounter("penstock_transport_server_batched_replies_total",
                               "Replies sent together with others to the same client, in one message");
    }
  }

  Status Start() {
    std::vector<RpcRail> rails = options_.rails;
    if (rails.empty()) rails.push_back({options_.host, ""});
    if (options_.workers == 0 || options_.workers * rails.size() > 64) {
      return InvalidArgument("data-plane server workers must be 1..64 in all, not " +
                             std::to_string(options_.workers) + " on each of " +
                             std::to_string(rails.size()) + " rail(s)");
    }
    for (const RpcRail& r : rails) PS_RETURN_IF_ERROR(StartRail(r));
    for (const auto& rail : rails_) address_ += (address_.empty() ? "" : ",") + rail->address;
    gate_ = std::make_shared<ResponderGate>();
    gate_->impl = this;
    for (auto& lane : lanes_) {
      lane->worker->Start(nullptr);
      if (!options_.on_worker_start) continue;
      Lane* l = lane.get();
      l->worker->Post([this, l] {  // the first task the thread runs
        l->on_stop = options_.on_worker_start([l](int fd, std::function<bool()> progress) {
          l->worker->AddSource(fd, std::move(progress));
        });
      });
    }
    PS_LOG_INFO("data plane listening on {}{}", address_,
                lanes_.size() > 1 ? " (" + std::to_string(lanes_.size()) + " workers)" : std::string());
    return OkStatus();
  }

  void Stop() {
    if (gate_ != nullptr) {
      std::lock_guard lock(gate_->mu);
      gate_->impl = nullptr;
    }
    // A rail's first worker first: its listener goes, so no connection is handed to the
    // rail's other workers after.
    for (auto& lane : lanes_) {
      Lane* l = lane.get();
      l->worker->Stop([l] {
        if (l->on_stop) std::exchange(l->on_stop, nullptr)();
        if (l->rail->lanes[0] == l && l->rail->listener != nullptr) {
          ucp_listener_destroy(l->rail->listener);
          l->rail->listener = nullptr;
        }
        for (DeferredReceive& d : l->deferred) {
          if (d.desc != nullptr) ucp_am_data_release(l->worker->worker(), d.desc);
        }
        l->deferred.clear();
        l->deferred_count = 0;
        std::vector<ucp_ep_h> eps;
        for (auto& [ep, conn] : l->conns) eps.push_back(ep);
        l->conns.clear();
        l->worker->CloseEndpoints(eps);
      });
    }
  }

  ~Impl() {
    Stop();
    for (auto& rail : rails_) {
      if (rail->listener != nullptr) ucp_listener_destroy(rail->listener);  // never started
    }
    while (!lanes_.empty()) lanes_.pop_back();  // a rail's first worker, which owns its context, last
  }

  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }
  std::vector<uint64_t> ConnectionsPerWorker() const {
    std::vector<uint64_t> out;
    for (const auto& lane : lanes_) out.push_back(lane->accepted.load());
    return out;
  }

 private:
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

  Status StartRail(const RpcRail& spec) {
    PS_ASSIGN_OR_RETURN(SocketAddress addr, ResolveSocketAddress(spec.host, options_.port));
    Rail* rail = rails_.emplace_back(std::make_unique<Rail>()).get();  // lives as long as the server
    rail->impl = this;
    for (unsigned i = 0; i < options_.workers; ++i) {
      auto lane = std::make_unique<Lane>();
      lane->impl = this;
      lane->rail = rail;
      lane->index = lanes_.size();
      UcxWorker::Options wo{.name = "ps-ucx-server", .net_devices = spec.net_devices,
                            .shared_context = options_.workers > 1,
                            .context = i == 0 ? nullptr : rail->lanes[0]->worker->context()};
      auto worker = UcxWorker::Create(wo);
      if (!worker.ok()) {
        return spec.net_devices.empty() ? worker.status()
                                        : worker.status().WithContext("data-plane rail " + spec.host +
                                                                      " on network devices '" +
                                                                      spec.net_devices + "'");
      }
      lane->worker = std::move(worker).value();
      lane->worker->CountBatchedInto(batched_);
      PS_RETURN_IF_ERROR(lane->worker->SetAmHandlers(
          {{wire::AmId::kRequest, &Impl::OnRequest}, {wire::AmId::kBatch, &Impl::OnBatch}}, lane.get()));
      rail->lanes.push_back(lane.get());
      lanes_.push_back(std::move(lane));
    }

    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = addr.get();
    lp.sockaddr.addrlen = addr.length;
    lp.conn_handler.cb = &Impl::OnConnection;
    lp.conn_handler.arg = rail;
    Rail* r = rail;
    ucs_status_t st = ucp_listener_create(r->lanes[0]->worker->worker(), &lp, &r->listener);
    if (st == UCS_ERR_BUSY) {
      return Unavailable("data port " + addr.ToString() +
                         " is in use; choose another with --port (or stop the daemon using it)");
    }
    if (st != UCS_OK) {
      return Unavailable("cannot listen on data address " + addr.ToString() + ": " +
                         ucs_status_string(st) + "; check the host is a local address");
    }
    ucp_listener_attr_t la{};
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    st = ucp_listener_query(r->listener, &la);
    if (st != UCS_OK) return UcxStatus(st, "listener query");
    std::memcpy(&addr.storage, &la.sockaddr, sizeof la.sockaddr);
    if (port_ == 0) port_ = addr.port();
    r->address = spec.host + ":" + std::to_string(addr.port());
    r->port = addr.port();
    return OkStatus();
  }

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

  // Listener callback (the rail's first worker's thread, inside its ucp_worker_progress): the
  // connection goes to the rail's workers in turn.
  //
  // Another worker's ucp_ep_create moves the connection's socket from the first worker's UCX
  // async context to its own. UCX 1.13 aborts the process (async.c:643, `handler->async ==
  // async`; fixed upstream by openucx/ucx#9942) if the first worker still holds a "missed"
  // event for that socket, queued while this thread was busy, when the move happens. The first
  // worker handles such events at the end of the ucp_worker_progress call that delivered this
  // request, so the request is handed over only after that call returns: from this thread's
  // own task queue, which it runs between progress calls.
  static void OnConnection(ucp_conn_request_h request, void* arg) {
    auto* rail = static_cast<Rail*>(arg);
    Lane* first = rail->lanes[0];
    Lane* lane = rail->lanes[rail->next_lane++ % rail->lanes.size()];
    if (lane == first) return Accept(lane, request);
    bool queued = first->worker->Post([rail, lane, request] {
      if (!lane->worker->Post([lane, request] { Accept(lane, request); })) {
        ucp_listener_reject(rail->listener, request);  // stopping
      }
    });
    if (!queued) ucp_listener_reject(rail->listener, request);  // stopping
  }

  // The lane's thread.
  static void Accept(Lane* lane, ucp_conn_request_h request) {
    std::optional<SocketAddress> peer;
    ucp_conn_request_attr_t ca{};
    ca.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(request, &ca) == UCS_OK) {
      SocketAddress a;
      std::memcpy(&a.storage, &ca.client_address, sizeof ca.client_address);
      a.length = ca.client_address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      peer = a;
    }
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.conn_request = request;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &Impl::OnEndpointError;
    ep.err_handler.arg = lane;
    ucp_ep_h handle = nullptr;
    ucs_status_t st = ucp_ep_create(lane->worker->worker(), &ep, &handle);
    if (st != UCS_OK) {
      PS_LOG_WARN("data plane {}: cannot accept a connection: {}", lane->impl->address_,
                  ucs_status_string(st));
      return;
    }
    Conn& conn = lane->conns[handle];
    conn.id = ++lane->impl->next_conn_id_;
    conn.peer = peer;
    lane->accepted++;
  }

  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* lane = static_cast<Lane*>(arg);
    if (lane->conns.erase(ep) == 0) return;
    std::erase_if(lane->deferred, [lane, ep](const DeferredReceive& d) {
      if (d.ep != ep) return false;
      if (d.desc != nullptr) ucp_am_data_release(lane->worker->worker(), d.desc);  // tells the sender
      return true;
    });
    {
      std::lock_guard lock(lane->impl->budget_mu_);
      lane->deferred_count = lane->deferred.size();
    }
    (void)status;
    PS_LOG_DEBUG("data plane {}: client connection closed: {}", lane->impl->address_,
                 ucs_status_string(status));
    lane->worker->CloseEndpointAsync(ep, nullptr);
  }

  // Several requests in one message (wire.h, batches): each as if it had come alone. A batch
  // that does not parse is answered kInvalidArgument (to request id 0: which calls it held is
  // unknown; they time out at the client).
  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param) {
    auto* lane = static_cast<Lane*>(arg);
    return ReceiveBatch(
        lane->worker->worker(), header, header_length, data, length, param, &Impl::OnRequest, lane,
        [lane](const Status& bad, ucp_ep_h ep) {
          auto conn = lane->conns.find(ep);
          if (ep == nullptr || conn == lane->conns.end()) return;
          lane->impl->SendReply(lane, ep, conn->second.id, 0, 0, RpcReply{bad, {}, AlignedBuffer()});
        });
  }

  static ucs_status_t OnRequest(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param) {
    auto* lane = static_cast<Lane*>(arg);
    Impl* self = lane->impl;
    ucp_ep_h ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
    auto conn = lane->conns.find(ep);
    if (ep == nullptr || conn == lane->conns.end()) {
      PS_LOG_WARN("data plane {}: dropping a request with no reply endpoint", self->address_);
      return UCS_OK;
    }
    uint64_t conn_id = conn->second.id;
    auto bytes = AmHeaderBytes(header, header_length);
    Result<wire::DecodedMessage> msg = wire::DecodeMessage(bytes, length);
    if (msg.ok() && msg->kind != wire::MessageKind::kRequest) {
      msg = InvalidArgument("malformed data-plane request: the message is a reply");
    }
    if (!msg.ok()) {
      self->SendReply(lane, ep, conn_id, wire::PeekRequestId(bytes), 0,
                      RpcReply{msg.status(), {}, AlignedBuffer()});
      return UCS_OK;  // a rendezvous payload is dropped by UCX
    }
    auto request = std::make_shared<RpcRequest>();
    request->opcode = msg->opcode;
    request->header.assign(msg->op_header.begin(), msg->op_header.end());
    DeferredReceive rx{ep, conn_id, msg->request_id, request, data, length, nullptr, nullptr};
    bool allowed = false;
    if (msg->placement) {
      Conn& c = conn->second;
      if (self->options_.local_direct && c.placement_pid != msg->placement->pid) {
        // Checked once per connection and process, not per request.
        c.placement_pid = msg->placement->pid;
        const std::string who = "the client (pid " + std::to_string(c.placement_pid) + ")";
        if (!SameUser(c.placement_pid)) {
          c.placement_refusal = who + " runs as another user";
        } else if (!c.peer || !OwnsConnection(c.placement_pid, *c.peer, lane->rail->port)) {
          c.placement_refusal = who + " does not hold the connection its requests came on";
        } else {
          c.placement_refusal.clear();
        }
        c.placement_allowed = c.placement_refusal.empty();
      }
      allowed = self->options_.local_direct && c.placement_allowed;
      if (!self->options_.local_direct) {
        self->NoteFallback(FailedPrecondition("direct copies with local clients are off"));
      } else if (!allowed) {
        self->NoteFallback(PermissionDenied(c.placement_refusal));
      }
    }
    // A payload's length is the client's word: nothing is allocated for more than the limit.
    if (msg->payload_len > self->options_.max_payload_bytes) {
      self->SendReply(lane, ep, conn_id, msg->request_id, msg->opcode,
                      RpcReply{InvalidArgument("request payload of " + std::to_string(msg->payload_len) +
                                               " bytes is over this server's limit of " +
                                               std::to_string(self->options_.max_payload_bytes) +
                                               "; split it"),
                               {}, AlignedBuffer()});
      return UCS_OK;  // a rendezvous payload is dropped by UCX
    }
    if (msg->payload_source) {
      if (!allowed) {
        const std::string why = self->options_.local_direct ? conn->second.placement_refusal : "turned off";
        self->SendReply(lane, ep, conn_id, msg->request_id, msg->opcode,
                        RpcReply{FailedPrecondition("this target does not copy from the client's memory (" + why +
                                                    "); send the payload"),
                                 {}, AlignedBuffer()},
                        wire::kPullRefused);
        return UCS_OK;
      }
      rx.source = std::make_shared<const wire::Placement>(std::move(*msg->placement));
      rx.desc = nullptr;
      rx.length = msg->payload_len;
      if (self->AdmitOrDefer(lane, rx)) self->StartReceive(lane, std::move(rx), 0);
      return UCS_OK;  // deferred: no UCX descriptor is kept
    }
    if (msg->placement && allowed) {
      rx.placement = std::make_shared<const wire::Placement>(std::move(*msg->placement));
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      // Over budget: keep UCX's descriptor and fetch the payload once memory is returned.
      if (!self->AdmitOrDefer(lane, rx)) return UCS_INPROGRESS;
    } else {
      std::lock_guard lock(self->budget_mu_);
      self->budget_.ForceReserve(length);
    }
    self->StartReceive(lane, std::move(rx), param->recv_attr);
    return UCS_OK;
  }

  // The lane's thread. Reserves budget for a request whose payload is not in memory yet
  // (rendezvous, or a payload source) and says true, or, when it does not fit or earlier ones
  // wait, queues it behind them (AdmitDeferred starts it once budget returns) and says false.
  // The count other threads read goes up under the budget's lock, in the step that found the
  // budget short: a ReturnBudget after that step sees it and wakes this lane (AdmitDeferred,
  // posted, runs after this callback has queued the request). Counted after the lock, a
  // release that came between the two found no one waiting, and with no later release the
  // request would wait for good.
  bool AdmitOrDefer(Lane* lane, DeferredReceive& rx) {
    {
      std::lock_guard lock(budget_mu_);
      if (lane->deferred.empty() && budget_.TryReserve(rx.length)) return true;
      lane->deferred_count = lane->deferred.size() + 1;
    }
    lane->deferred.push_back(std::move(rx));
    if (deferred_total_ != nullptr) deferred_total_->Inc();
    return false;
  }

  // Holds `bytes` of the budget for one request until Release() or destruction (so a Responder
  // that is dropped without being called still returns them). Thread-safe.
  class BudgetTicket {
   public:
    BudgetTicket(std::shared_ptr<ResponderGate> gate, uint64_t bytes)
        : gate_(std::move(gate)), bytes_(bytes) {}
    ~BudgetTicket() { Release(); }
    void Release() {
      uint64_t bytes = bytes_.exchange(0);
      if (bytes == 0) return;
      std::lock_guard lock(gate_->mu);
      Impl* impl = gate_->impl;
      if (impl != nullptr) impl->ReturnBudget(bytes);
    }

   private:
    std::shared_ptr<ResponderGate> gate_;
    std::atomic<uint64_t> bytes_;
  };

  // The lane's thread. Receives the payload of an admitted request (its bytes are already
  // reserved), then runs the handler.
  void StartReceive(Lane* lane, DeferredReceive rx, uint64_t recv_attr) {
    if (requests_ != nullptr) {
      requests_->Inc();
      rx_bytes_->Inc(rx.length);
    }
    auto ticket = std::make_shared<BudgetTicket>(gate_, rx.length);
    if (rx.source != nullptr) return Pull(lane, std::move(rx), std::move(ticket));
    ucp_am_recv_param_t param{};
    param.recv_attr = recv_attr;
    ucp_ep_h ep = rx.ep;
    uint64_t conn_id = rx.conn_id, request_id = rx.request_id;
    auto request = rx.request;
    const size_t index = lane->index;
    ReceivePayload(
        lane->worker->worker(), rx.desc, rx.length, &param,
        [this, index, ep, conn_id, request_id, request, ticket,
         placement = std::move(rx.placement)](Result<AlignedBuffer> payload) {
          if (!payload.ok()) {
            PS_LOG_WARN("data plane {}: request {}: {}", address_, request_id,
                        payload.status().message());
            return;  // the connection is failing; the client sees kUnavailable
          }
          request->payload = std::move(payload).value();
          handler_(std::move(*request), MakeResponder(gate_, index, ep, conn_id, request_id,
                                                      request->opcode, ticket, placement));
        });
  }

  // The lane's thread. Copies the payload of a kPayloadSource request out of the client's
  // memory (the kernel's copy, in place of the socket's), then runs the handler; when it
  // cannot, answers kPullRefused without running the request, and the client sends the payload.
  void Pull(Lane* lane, DeferredReceive rx, std::shared_ptr<BudgetTicket> ticket) {
    AlignedBuffer payload;
    Status s;
    try {
      payload = AlignedBuffer(rx.length);
      s = PullPayload(*rx.source, payload.span());
    } catch (const std::bad_alloc&) {
      s = ResourceExhausted("no memory for a " + std::to_string(rx.length) + "-byte payload");
    }
    if (!s.ok()) {
      NoteFallback(s);
      SendReply(lane, rx.ep, rx.conn_id, rx.request_id, rx.request->opcode,
                RpcReply{FailedPrecondition("cannot copy the payload from the client: " + s.message()),
                         {}, AlignedBuffer()},
                wire::kPullRefused);
      return;  // `ticket` returns the budget
    }
    if (pulled_bytes_ != nullptr) pulled_bytes_->Inc(rx.length);
    rx.request->payload = std::move(payload);
    handler_(std::move(*rx.request), MakeResponder(gate_, lane->index, rx.ep, rx.conn_id, rx.request_id,
                                                   rx.request->opcode, std::move(ticket), nullptr));
  }

  // Any thread (under the gate): returns budget, then lets every worker with requests waiting
  // for it take what now fits.
  void ReturnBudget(uint64_t bytes) {
    std::vector<Lane*> waiting;
    {
      std::lock_guard lock(budget_mu_);
      budget_.Release(bytes);
      for (auto& lane : lanes_) {
        if (lane->deferred_count.load() != 0) waiting.push_back(lane.get());
      }
    }
    for (Lane* l : waiting) l->worker->Post([this, l] { AdmitDeferred(l); });
  }

  // The lane's thread.
  void AdmitDeferred(Lane* lane) {
    while (!lane->deferred.empty()) {
      {
        std::lock_guard lock(budget_mu_);  // see AdmitOrDefer
        if (!budget_.TryReserve(lane->deferred.front().length)) return;
        lane->deferred_count = lane->deferred.size() - 1;
      }
      DeferredReceive rx = std::move(lane->deferred.front());
      lane->deferred.pop_front();
      StartReceive(lane, std::move(rx), UCP_AM_RECV_ATTR_FLAG_RNDV);
    }
  }

  // The Responder writes a payload into the memory the client lent (`placement`, may be null)
  // on the calling thread, before the reply goes to the lane: the copy runs beside the
  // transport, not on it.
  static Responder MakeResponder(std::shared_ptr<ResponderGate> gate, size_t lane_index, ucp_ep_h ep,
                                 uint64_t conn_id, uint64_t request_id, uint16_t opcode,
                                 std::shared_ptr<BudgetTicket> ticket,
                                 std::shared_ptr<const wire::Placement> placement) {
    auto once = std::make_shared<std::atomic<bool>>(false);
    return [gate, lane_index, ep, conn_id, request_id, opcode, once, ticket,
            placement](RpcReply reply) {
      if (once->exchange(true)) return;
      std::optional<Status> placed;  // set when tried
      if (placement != nullptr && reply.status.ok() && !reply.payload.empty()) {
        placed = PlaceReply(*placement, reply.payload.span());
        if (placed->ok()) {
          reply.placed = reply.payload.size();
          reply.payload = AlignedBuffer();
        }
      }
      auto boxed = std::make_shared<RpcReply>(std::move(reply));
      {
        std::lock_guard lock(gate->mu);
        if (gate->impl == nullptr) return;
        Impl* impl = gate->impl;
        if (placed) impl->CountPlacement(*placed, boxed->placed);
        Lane* lane = impl->lanes_[lane_index].get();
        lane->worker->Post([impl, lane, ep, conn_id, request_id, opcode, boxed] {
          impl->SendReply(lane, ep, conn_id, request_id, opcode, std::move(*boxed));
        });
      }
      ticket->Release();
    };
  }

  // Any thread, under the gate. The first refusal of each kind is logged, so an operator
  // learns why replies are not placed (a ptrace policy, say) without a line per reply.
  void CountPlacement(const Status& placed, uint64_t bytes) {
    if (!placed.ok()) return NoteFallback(placed);
    if (placed_bytes_ != nullptr) placed_bytes_->Inc(bytes);
  }
  void NoteFallback(const Status& why) {
    if (placement_fallbacks_ != nullptr) placement_fallbacks_->Inc();
    const auto code = static_cast<size_t>(why.code());
    if (code < placement_logged_.size() && !placement_logged_[code].exchange(true)) {
      PS_LOG_INFO("data plane {}: data goes over the transport instead of straight to or from a "
                  "local client's memory: {}", address_, why.message());
    }
  }

  // The lane's thread.
  // `flags`: kPullRefused, or 0 (kPlaced is set here when the reply was placed).
  void SendReply(Lane* lane, ucp_ep_h ep, uint64_t conn_id, uint64_t request_id, uint16_t opcode,
                 RpcReply reply, uint32_t flags = 0) {
    auto conn = lane->conns.find(ep);
    if (conn == lane->conns.end() || conn->second.id != conn_id) return;  // client gone
    const bool placed = reply.placed > 0;
    auto header = wire::EncodeReply(request_id, opcode, reply.status, reply.header,
                                    placed ? reply.placed : reply.payload.size(),
                                    placed ? uint32_t{wire::kPlaced} : flags);
    if (!header.ok()) {
      Status err = Internal("handler for opcode " + std::to_string(opcode) +
                            " built a bad reply: " + header.status().message());
      header = wire::EncodeReply(request_id, opcode, err, {}, 0);
      reply.payload = AlignedBuffer();
    }
    if (tx_bytes_ != nullptr) tx_bytes_->Inc(reply.payload.size());
    auto out = std::make_unique<OutgoingMessage>();
    out->am_header = std::move(header).value();
    out->owned_payload = std::move(reply.payload);
    out->payload = out->owned_payload.span();
    out->on_complete = [this, request_id](ucs_status_t st) {
      if (st != UCS_OK && st != UCS_ERR_CANCELED) {
        PS_LOG_DEBUG("data plane {}: reply to request {} not sent: {}", address_, request_id,
                     ucs_status_string(st));
      }
    };
    if (!conn->second.batch) conn->second.batch = BatchesPay(ep);
    if (*conn->second.batch) return lane->worker->Send(ep, wire::AmId::kReply, std::move(out), 0);
    SendMessage(ep, wire::AmId::kReply, std::move(out), 0);
  }

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

Result<std::vector<RpcRail>> ParseRails(const std::string& spec) {
  std::vector<RpcRail> rails;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t end = std::min(spec.find(';', begin), spec.size());
    const std::string piece = spec.substr(begin, end - begin);
    const size_t at = piece.find('@');
    RpcRail rail{piece.substr(0, at), at == std::string::npos ? "" : piece.substr(at + 1)};
    if (rail.host.empty() || (at != std::string::npos && rail.net_devices.empty()) ||
        rail.host.find_first_of(", ") != std::string::npos) {
      return InvalidArgument("rails '" + spec + "': '" + piece + "' is not HOST[@DEVICES]; write "
                             "one per network, separated by ';', e.g. 10.0.1.2@eth1;10.0.2.2@eth2");
    }
    rails.push_back(std::move(rail));
    begin = end + 1;
  }
  return rails;
}

Result<std::unique_ptr<RpcServer>> RpcServer::Start(const RpcServerOptions& options,
                                                    RpcHandler handler) {
  auto impl = std::make_shared<Impl>(options, std::move(handler));
  PS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<RpcServer>(new RpcServer(std::move(impl)));
}

RpcServer::RpcServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
RpcServer::~RpcServer() { impl_->Stop(); }
uint16_t RpcServer::port() const { return impl_->port(); }
std::string RpcServer::address() const { return impl_->address(); }
void RpcServer::Stop() { impl_->Stop(); }
std::vector<uint64_t> RpcServer::ConnectionsPerWorker() const { return impl_->ConnectionsPerWorker(); }

}  // namespace penstock
