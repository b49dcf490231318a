// rpc_server.cc — RpcServer: starting and stopping, its rails (a listener each) and lanes (a
// worker each), and the connections the listeners hand to the lanes. What arrives on a
// connection is handled in rpc_server_request.cc, what goes back in rpc_server_reply.cc.
#include "transport/rpc_server.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "transport/rpc_server_impl.h"

namespace penstock {

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

RpcServer::Impl::Impl(const RpcServerOptions& options, RpcHandler handler)
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

Status RpcServer::Impl::Start() {
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

void RpcServer::Impl::Stop() {
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

RpcServer::Impl::~Impl() {
  Stop();
  for (auto& rail : rails_) {
    if (rail->listener != nullptr) ucp_listener_destroy(rail->listener);  // never started
  }
  while (!lanes_.empty()) lanes_.pop_back();  // a rail's first worker, which owns its context, last
}

std::vector<uint64_t> RpcServer::Impl::ConnectionsPerWorker() const {
  std::vector<uint64_t> out;
  for (const auto& lane : lanes_) out.push_back(lane->accepted.load());
  return out;
}

Status RpcServer::Impl::StartRail(const RpcRail& spec) {
  PS_ASSIGN_OR_RETURN(SocketAddress addr, ResolveSocketAddress(spec.host, options_.port));
  Rail* rail = rails_.emplace_back(std::make_unique<Rail>()).get();  // lives as long as the server
  rail->impl = this;
  for (unsigned i = 0; i < options_.workers; ++i) PS_RETURN_IF_ERROR(AddLane(rail, spec, i));
  return Listen(rail, spec, addr);
}

// Worker `i` of `rail`: the first creates the rail's context, the others share it.
Status RpcServer::Impl::AddLane(Rail* rail, const RpcRail& spec, unsigned i) {
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
  return OkStatus();
}

// The rail's listener, on its first worker, at `addr` (port 0: a free one, then read back).
Status RpcServer::Impl::Listen(Rail* rail, const RpcRail& spec, SocketAddress addr) {
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = addr.get();
  lp.sockaddr.addrlen = addr.length;
  lp.conn_handler.cb = &Impl::OnConnection;
  lp.conn_handler.arg = rail;
  ucs_status_t st = ucp_listener_create(rail->lanes[0]->worker->worker(), &lp, &rail->listener);
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
  st = ucp_listener_query(rail->listener, &la);
  if (st != UCS_OK) return UcxStatus(st, "listener query");
  std::memcpy(&addr.storage, &la.sockaddr, sizeof la.sockaddr);
  if (port_ == 0) port_ = addr.port();
  rail->address = spec.host + ":" + std::to_string(addr.port());
  rail->port = addr.port();
  return OkStatus();
}

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
void RpcServer::Impl::OnConnection(ucp_conn_request_h request, void* arg) {
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
void RpcServer::Impl::Accept(Lane* lane, ucp_conn_request_h request) {
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

// The lane's thread: a client connection died; its deferred receives are released.
void RpcServer::Impl::OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
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

}  // namespace penstock
