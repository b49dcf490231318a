#include "mgmt/mgmt_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "mgmt/mgmt_service.h"
#include "mgmt/rocksdb_meta_store.h"

namespace penstock {

using mgmt::ClusterState;
using mgmt::ClusterStateOptions;
using mgmt::EtcdMetaStore;
using mgmt::MgmtService;
using mgmt::RocksDbMetaStore;
using mgmt::SystemNowMs;

namespace {

// Splits "host:port"; false when malformed.
bool SplitHostPort(const std::string& a, std::string* host, uint16_t* port) {
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  std::string p = a.substr(colon + 1);
  if (p.size() > 5 || !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  int n = std::stoi(p);
  if (n > 65535) return false;
  *host = a.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = static_cast<uint16_t>(n);
  return true;
}

}  // namespace

MgmtServer::MgmtServer(const MgmtServerOptions& options) : options_(options) {}

Result<std::unique_ptr<MgmtServer>> MgmtServer::Start(const MgmtServerOptions& options) {
  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(options.listen, &host, &port)) {
    return InvalidArgument("mgmt listen address '" + options.listen +
                           "' is not host:port; fix --listen (e.g. 127.0.0.1:7000)");
  }
  if (options.heartbeat_timeout_ms <= 0) {
    return InvalidArgument("heartbeat timeout " + std::to_string(options.heartbeat_timeout_ms) +
                           " ms must be positive; fix --heartbeat-timeout-ms");
  }
  RouteGrpcLogsToSpdlog();
  PS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds, MgmtServerCredentials(options.tls));

  std::unique_ptr<MgmtServer> s(new MgmtServer(options));
  PS_RETURN_IF_ERROR(s->OpenStore());
  PS_RETURN_IF_ERROR(s->LoadState());
  s->InstallLeadership();
  PS_RETURN_IF_ERROR(s->Serve(creds, host));
  s->StartElection();
  if (Status st = s->ServeMetrics(); !st.ok()) {
    s->Shutdown();
    return st;
  }
  s->RegisterMetrics();
  s->liveness_ = std::thread([raw = s.get()] { raw->RunLivenessLoop(); });
  PS_LOG_INFO("mgmt serving on {} ({}, meta {}, data dir {}, heartbeat timeout {} ms, metrics port {})",
              s->address_,
              !options.tls.enabled() ? "plaintext"
              : options.tls.ca.empty() ? "TLS"
                                       : "TLS, client certificates required",
              options.meta.empty() ? "rocksdb" : options.meta, options.data_dir,
              options.heartbeat_timeout_ms, s->metrics_port());
  return s;
}

Status MgmtServer::LoadState() {
  const MgmtServerOptions& options = options_;
  ClusterStateOptions state_options;
  state_options.heartbeat_timeout_ms = options.heartbeat_timeout_ms;
  state_options.orphan_grace_ms = options.orphan_grace_ms;
  if (options.lost_timeout_ms < 0) {
    return InvalidArgument("lost timeout " + std::to_string(options.lost_timeout_ms) +
                           " ms must not be negative; fix --lost-timeout-ms (0: never automatically)");
  }
  state_options.lost_timeout_ms = options.lost_timeout_ms;
  PS_ASSIGN_OR_RETURN(state_, ClusterState::Load(store_.get(), state_options));
  if (options.auth && options.admin_key.empty()) {
    return InvalidArgument("--auth needs an admin key to manage tenants; set PENSTOCK_ADMIN_KEY (or --admin-key)");
  }
  if (options.token_ttl_ms <= 0) {
    return InvalidArgument("token TTL " + std::to_string(options.token_ttl_ms) + " ms must be positive");
  }
  mgmt::TenantRegistryOptions tenant_options;
  tenant_options.auth_enabled = options.auth;
  tenant_options.admin_key = options.admin_key;
  PS_ASSIGN_OR_RETURN(tenants_, mgmt::TenantRegistry::Load(store_.get(), tenant_options));
  service_ = std::make_unique<MgmtService>(state_.get(), &metrics_, tenants_.get(), options.token_ttl_ms);
  return OkStatus();
}

void MgmtServer::InstallLeadership() {
  if (etcd_store_ == nullptr) return;
  // Over etcd every RPC but a few is for the leader only: the hooks go in before the server
  // serves, and answer "not the leader" until this instance's election says otherwise.
  mgmt::Leadership l;
  l.meta = options_.meta;
  l.is_leader = [this] {
    mgmt::LeaderElection* e = election_ptr_.load();
    return e != nullptr && e->is_leader();
  };
  l.leader_address = [this] {
    mgmt::LeaderElection* e = election_ptr_.load();
    return e != nullptr ? e->leader_address() : std::string();
  };
  service_->set_leadership(std::move(l));
}

Status MgmtServer::Serve(const std::shared_ptr<grpc::ServerCredentials>& creds, const std::string& host) {
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which lets a second mgmt silently share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int selected_port = 0;
  builder.AddListeningPort(options_.listen, creds, &selected_port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || selected_port == 0) {
    if (server_) server_->Shutdown();
    server_.reset();
    return Unavailable("mgmt port " + options_.listen +
                       " is in use; choose another with --listen");
  }
  const bool bracket = host.find(':') != std::string::npos;
  address_ = (bracket ? "[" + host + "]" : host) + ":" + std::to_string(selected_port);
  service_->set_address(address_);
  return OkStatus();
}

Status MgmtServer::ServeMetrics() {
  if (options_.metrics_listen.empty()) return OkStatus();
  std::string mhost;
  uint16_t mport = 0;
  if (!SplitHostPort(options_.metrics_listen, &mhost, &mport)) {
    return InvalidArgument("mgmt metrics address '" + options_.metrics_listen +
                           "' is not host:port; fix --metrics-listen");
  }
  PS_ASSIGN_OR_RETURN(http_, HttpServer::Start(mhost, mport, &metrics_, "--metrics-listen"));
  const bool bracket = mhost.find(':') != std::string::npos;
  service_->set_metrics_address((bracket ? "[" + mhost + "]" : mhost) + ":" + std::to_string(http_->port()));
  return OkStatus();
}

Status MgmtServer::OpenStore() {
  const std::string& meta = options_.meta;
  if (meta.empty() || meta == "rocksdb") {
    if (options_.data_dir.empty()) {
      return InvalidArgument("mgmt needs a data directory for its metadata; pass --data-dir");
    }
    PS_ASSIGN_OR_RETURN(store_, RocksDbMetaStore::Open(options_.data_dir));
    return OkStatus();
  }
  if (meta.rfind("etcd://", 0) != 0) {
    return InvalidArgument("metadata store '" + meta +
                           "' is neither 'rocksdb' nor 'etcd://HOST:PORT[,HOST:PORT...]'; fix --meta");
  }
  if (options_.cluster_name.empty() || options_.cluster_name.find('/') != std::string::npos) {
    return InvalidArgument("cluster name '" + options_.cluster_name +
                           "' must be non-empty and contain no '/'");
  }
  if (options_.lease_ttl_s < 1) {
    return InvalidArgument("leader lease TTL " + std::to_string(options_.lease_ttl_s) +
                           " s must be at least 1");
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<EtcdMetaStore> etcd,
                      EtcdMetaStore::Open(meta, "/penstock/" + options_.cluster_name + "/"));
  etcd_store_ = etcd.get();
  store_ = std::move(etcd);
  return OkStatus();
}

void MgmtServer::StartElection() {
  if (etcd_store_ == nullptr) return;
  mgmt::LeaderElectionOptions eo;
  eo.key = etcd_store_->prefix() + "leader";
  eo.address = options_.advertise_address.empty() ? address_ : options_.advertise_address;
  eo.ttl_s = options_.lease_ttl_s;
  eo.on_elected = [this, key = eo.key](int64_t term) {
    // Fence first: from here on only this term's writes land; then take the state over.
    etcd_store_->SetFence(key, term);
    PS_RETURN_IF_ERROR(state_->Reload());
    return tenants_->Reload();
  };
  election_ = std::make_unique<mgmt::LeaderElection>(&etcd_store_->client(), std::move(eo));
  election_ptr_.store(election_.get());  // the service's hooks (installed before serving) see it
  election_->Start();
}

bool MgmtServer::is_leader() const { return !election_ || election_->is_leader(); }

std::string MgmtServer::leader_address() const {
  return election_ ? election_->leader_address() : address_;
}

MgmtServer::~MgmtServer() { Shutdown(); }

uint16_t MgmtServer::metrics_port() const { return http_ ? http_->port() : 0; }

void MgmtServer::RegisterMetrics() {
  ClusterState* st = state_.get();
  metrics_.AddCallbackGauge("penstock_mgmt_targets_up", "targets in state UP", {},
                            [st] { return st->Summary().targets_up; });
  metrics_.AddCallbackGauge("penstock_mgmt_targets_down", "targets in state DOWN", {},
                            [st] { return st->Summary().targets_down; });
  metrics_.AddCallbackGauge("penstock_mgmt_map_epoch", "current cluster map epoch", {},
                            [st] { return static_cast<double>(st->Summary().epoch); });
  metrics_.AddCallbackGauge("penstock_mgmt_containers", "number of containers", {},
                            [st] { return st->Summary().containers; });
  metrics_.AddCallbackGauge("penstock_mgmt_is_leader",
                            "1 while this mgmt is the leader and serves, else 0", {},
                            [this] { return is_leader() ? 1.0 : 0.0; });
}

void MgmtServer::RunLivenessLoop() {
  const auto period = std::chrono::milliseconds(
      std::clamp(options_.heartbeat_timeout_ms / 5, 20, 1000));
  Counter& marked = metrics_.GetCounter("penstock_mgmt_targets_marked_down_total",
                                        "targets marked DOWN for missing heartbeats");
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    if (!is_leader()) {  // followers do not judge liveness; the leader does
      lock.lock();
      continue;
    }
    Result<int> n = state_->CheckLiveness(SystemNowMs());
    if (!n.ok()) {
      PS_LOG_ERROR("mgmt liveness check failed: {}", n.status().ToString());
    } else if (*n > 0) {
      marked.Inc(static_cast<uint64_t>(*n));
    }
    lock.lock();
  }
}

void MgmtServer::set_repair_status(std::function<v1::RepairStatus()> fn) {
  service_->set_repair_status(std::move(fn));
}

void MgmtServer::set_loss_assessor(std::function<Result<v1::LossReport>(uint32_t target)> fn) {
  service_->set_loss_assessor(std::move(fn));
}

void MgmtServer::Wait() {
  if (server_) server_->Wait();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stopped_; });
}

void MgmtServer::Shutdown() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {
      // Another caller is stopping the server; return once it has.
      cv_.wait(lock, [this] { return stopped_; });
      return;
    }
    stopping_ = true;
  }
  cv_.notify_all();
  if (service_) service_->Stop();
  if (election_) election_->Stop(options_.resign_on_shutdown);
  if (liveness_.joinable()) liveness_.join();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  if (http_) http_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (!address_.empty()) PS_LOG_INFO("mgmt on {} stopped", address_);
}

}  // namespace penstock
