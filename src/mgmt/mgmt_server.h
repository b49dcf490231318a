// mgmt_server.h — the `penstock mgmt` daemon as a library: MetaStore + ClusterState + gRPC
// service + failure detector + /metrics endpoint, started and stopped as one unit.
//
// Start() opens the MetaStore (embedded RocksDB in options.data_dir, or etcd, see `meta`), loads
// the cluster state, serves the
// penstock.v1.Mgmt gRPC service (TLS when options.tls says so, see tls.h) on options.listen, runs a
// liveness thread that marks silent targets DOWN, and serves Prometheus text on
// options.metrics_listen. The `penstock mgmt` process runs it inside MgmtDaemon
// (mgmt_daemon.h), beside the repair service; tests and in-process tools use it alone, as
// Start() + Wait() + Shutdown() from another thread.
//
// HA (meta = "etcd://..."): several MgmtServers share one etcd; a LeaderElection
// (leader_election.h) picks one. Only the leader serves (followers answer UNAVAILABLE naming
// it, see mgmt_service.h) and runs the liveness check. A newly elected leader first fences the
// store on its term (etcd_meta_store.h: a stale leader's writes fail) and reloads the whole
// ClusterState from etcd (with the restart grace period for UP targets), then serves. The
// epoch lives in etcd and is only ever incremented, so it never goes back across leaders.
//
// Thread safety: address(), metrics_port() and state() may be called from any thread;
// Shutdown() may be called from any thread, more than once, and unblocks Wait(). The
// destructor calls Shutdown().
// Namespace: penstock (the component's public entry point); its parts live in penstock::mgmt.
#pragma once

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/http_server.h"
#include "common/metrics.h"
#include "mgmt/cluster_state.h"
#include "mgmt/etcd_meta_store.h"
#include "mgmt/leader_election.h"
#include "mgmt/meta_store.h"
#include "mgmt/tenant_registry.h"
#include "mgmt_client/tls.h"
#include "penstock/status.h"

namespace grpc {
class Server;
class ServerCredentials;
}

namespace penstock {

namespace mgmt {
class MgmtService;
}  // namespace mgmt

struct MgmtServerOptions {
  // gRPC listen address "host:port"; port 0 picks a free one (see address()).
  std::string listen = "127.0.0.1:0";
  // Directory of the RocksDB MetaStore; required with meta "" / "rocksdb", unused with etcd.
  std::string data_dir;
  // Metadata store: "" or "rocksdb" (embedded, in data_dir, one mgmt), or
  // "etcd://HOST:PORT[,HOST:PORT...]" (shared; several mgmt instances, one leader).
  std::string meta;
  // etcd only: keys live under "/penstock/<cluster_name>/".
  std::string cluster_name = "default";
  // etcd only: the address other parties reach this instance at (the leader hint); empty means
  // the bound listen address.
  std::string advertise_address;
  // etcd only: TTL of the leader's lease, s; a crashed leader is replaced after about this long.
  int lease_ttl_s = 3;
  // etcd only: on Shutdown, give the leadership back at once (false models a crash in tests:
  // the lease is left to expire).
  bool resign_on_shutdown = true;
  // A target silent for longer than this is marked DOWN.
  int heartbeat_timeout_ms = 5000;
  // A target silent for longer than this is declared LOST and its shards rebuilt; 0: only by
  // an operator (`penstock out`).
  int64_t lost_timeout_ms = 0;
  // How long repair leaves stripes no head names before deleting them (ClusterMap.orphan_grace_ms);
  // 0: kOrphanGrace (object_head.h).
  int64_t orphan_grace_ms = 0;
  // /metrics listen address "host:port"; port 0 picks a free one; empty disables it.
  std::string metrics_listen = "127.0.0.1:0";
  // Security (tenant_registry.h): require an API key on container and tenant RPCs, and a
  // capability token on every shard request at the targets.
  bool auth = false;
  // The admin API key (acts for the default tenant, manages tenants and keys); empty: none.
  std::string admin_key;
  // Lifetime of the capability tokens GetCapability issues.
  int64_t token_ttl_ms = 5 * 60 * 1000;
  // TLS (tls.h): serve with tls.cert/tls.key; with tls.ca, require client certificates from
  // that CA. All empty: plaintext.
  TlsOptions tls;
};

class MgmtServer {
 public:
  // Errors: kInvalidArgument (missing data dir with RocksDB, malformed address or --meta, bad
  // timeout, TLS files missing or not PEM); kUnavailable "etcd at H:P is unreachable (...); check --meta";
  // kUnavailable "mgmt port H:P is in use; choose another with --listen", or the data dir is
  // in use by another mgmt, or the metrics port is in use; MetaStore errors.
  static Result<std::unique_ptr<MgmtServer>> Start(const MgmtServerOptions& options);
  ~MgmtServer();
  MgmtServer(const MgmtServer&) = delete;
  MgmtServer& operator=(const MgmtServer&) = delete;

  // The bound gRPC address, "host:port" with the real port.
  std::string address() const { return address_; }
  // The bound /metrics port, 0 when disabled.
  uint16_t metrics_port() const;
  // The state machine (for in-process tools and tests).
  mgmt::ClusterState* state() const { return state_.get(); }
  // Tenants and cluster keys (for in-process tools and tests).
  mgmt::TenantRegistry* tenants() const { return tenants_.get(); }
  // Metrics of this daemon (for services started beside it, such as repair).
  MetricsRegistry* metrics() { return &metrics_; }
  // Where GetStatus takes the repair service's progress from (set once, before clients ask).
  void set_repair_status(std::function<v1::RepairStatus()> fn);
  // What AssessTargetLoss and MarkTargetLost ask what declaring a target lost would lose.
  void set_loss_assessor(std::function<Result<v1::LossReport>(uint32_t target)> fn);
  // Whether this instance serves (always true with RocksDB).
  bool is_leader() const;
  // The current leader's address as far as this instance knows ("" when none).
  std::string leader_address() const;

  // Blocks until Shutdown() has been called and the server has stopped.
  void Wait();
  // Stops serving (in-flight RPCs get a short grace period), the liveness thread and /metrics.
  void Shutdown();

 private:
  explicit MgmtServer(const MgmtServerOptions& options);
  void RunLivenessLoop();
  void RegisterMetrics();
  // Opens the store named by options_.meta (and, for etcd, prepares the election).
  Status OpenStore();
  // Loads the cluster state and the tenants from the store, and makes the gRPC service.
  Status LoadState();
  // etcd only: the service's leadership hooks, before it serves (see election_ptr_).
  void InstallLeadership();
  // Serves the service on options_.listen; sets address_.
  Status Serve(const std::shared_ptr<grpc::ServerCredentials>& creds, const std::string& host);
  // Serves /metrics on options_.metrics_listen (unless empty).
  Status ServeMetrics();
  // etcd only: starts the election once address_ is known.
  void StartElection();

  const MgmtServerOptions options_;
  std::unique_ptr<mgmt::MetaStore> store_;
  mgmt::EtcdMetaStore* etcd_store_ = nullptr;  // store_ when it is etcd
  std::unique_ptr<mgmt::LeaderElection> election_;
  // election_ once it exists: the service's leadership hooks read it, and are installed before
  // the gRPC server serves (not leader until the election says so).
  std::atomic<mgmt::LeaderElection*> election_ptr_{nullptr};
  std::unique_ptr<mgmt::ClusterState> state_;
  std::unique_ptr<mgmt::TenantRegistry> tenants_;
  MetricsRegistry metrics_;
  std::unique_ptr<mgmt::MgmtService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::string address_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  bool stopped_ = false;   // guarded by mu_
  std::thread liveness_;
};

}  // namespace penstock
