// mgmt_service.h — the gRPC service penstock.v1.Mgmt over a ClusterState.
//
// A thin adapter: unpacks requests, calls ClusterState, converts penstock::Status to
// grpc::Status (the codes are numerically equal) and counts RPCs by method and code in
// `penstock_mgmt_rpc_total`. Holds no state of its own besides the advertised address and
// the leadership hooks.
//
// Leadership (HA over etcd): when set_leadership() gave an is_leader hook, every RPC but
// GetStatus is answered only while it returns true; otherwise UNAVAILABLE
// "not the leader; leader is H:P" (MgmtClient follows the hint). A follower's GetStatus
// re-reads the shared store for its counts. WatchClusterMap streams until the client cancels,
// leadership is lost or Stop() is called (then UNAVAILABLE: reconnect to the leader).
//
// Thread safety: gRPC calls the handlers from its own thread pool; all of them are safe to run
// concurrently. Ownership: `state` and `metrics` are borrowed and must outlive the service.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "common/metrics.h"
#include "mgmt/cluster_state.h"
#include "mgmt/tenant_registry.h"
#include "penstock/mgmt.grpc.pb.h"
#include "penstock/status.h"

namespace penstock::mgmt {

// penstock::Status <-> grpc::Status, code and message unchanged.
grpc::Status ToGrpcStatus(const Status& s);
Status FromGrpcStatus(const grpc::Status& s);

// How the service learns whether its instance leads. Hooks left empty mean "always leader"
// (the embedded RocksDB store: one mgmt).
struct Leadership {
  std::function<bool()> is_leader;
  std::function<std::string()> leader_address;
  // Reported in MgmtStatus.meta ("rocksdb" or "etcd://...").
  std::string meta = "rocksdb";
};

class MgmtService final : public v1::Mgmt::Service {
 public:
  // `tenants` is borrowed. Container RPCs and GetCapability act for the caller named by the
  // API key in the metadata (`authorization: Bearer KEY` or `x-penstock-api-key: KEY`).
  MgmtService(ClusterState* state, MetricsRegistry* metrics, TenantRegistry* tenants,
              int64_t token_ttl_ms);

  // The "host:port" reported by GetStatus; set once the server has bound its port.
  void set_address(std::string address);
  // The "host:port" of /metrics reported by GetStatus; set once it is served.
  void set_metrics_address(std::string address);
  // Set before serving.
  void set_leadership(Leadership leadership) { leadership_ = std::move(leadership); }
  // Source of MgmtStatus.repair (the repair service beside this mgmt).
  void set_repair_status(std::function<v1::RepairStatus()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    repair_status_ = std::move(fn);
  }
  // What declaring a target lost would lose (the repair service beside this mgmt assesses it);
  // unset: AssessTargetLoss answers UNAVAILABLE and MarkTargetLost needs force_data_loss.
  void set_loss_assessor(std::function<Result<v1::LossReport>(uint32_t target)> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    assess_loss_ = std::move(fn);
  }
  // Ends open WatchClusterMap streams (UNAVAILABLE); call before shutting the server down.
  void Stop() { stopping_ = true; }

  grpc::Status RegisterTarget(grpc::ServerContext* ctx, const v1::RegisterTargetRequest* req,
                              v1::RegisterTargetResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::Status GetClusterMap(grpc::ServerContext* ctx, const v1::GetClusterMapRequest* req,
                             v1::ClusterMap* resp) override;
  grpc::Status CreateContainer(grpc::ServerContext* ctx, const v1::CreateContainerRequest* req,
                               v1::Container* resp) override;
  grpc::Status GetContainer(grpc::ServerContext* ctx, const v1::GetContainerRequest* req,
                            v1::Container* resp) override;
  grpc::Status ListContainers(grpc::ServerContext* ctx, const v1::ListContainersRequest* req,
                              v1::ListContainersResponse* resp) override;
  grpc::Status DeleteContainer(grpc::ServerContext* ctx, const v1::DeleteContainerRequest* req,
                               v1::DeleteContainerResponse* resp) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::GetStatusRequest* req,
                         v1::MgmtStatus* resp) override;
  grpc::Status WatchClusterMap(grpc::ServerContext* ctx, const v1::WatchClusterMapRequest* req,
                               grpc::ServerWriter<v1::ClusterMap>* writer) override;
  grpc::Status MarkTargetLost(grpc::ServerContext* ctx, const v1::MarkTargetLostRequest* req,
                              v1::MarkTargetLostResponse* resp) override;
  grpc::Status AssessTargetLoss(grpc::ServerContext* ctx, const v1::AssessTargetLossRequest* req,
                                v1::LossReport* resp) override;
  grpc::Status ListLostObjects(grpc::ServerContext* ctx, const v1::ListLostObjectsRequest* req,
                               v1::ListLostObjectsResponse* resp) override;
  grpc::Status ReportDegradedWrite(grpc::ServerContext* ctx, const v1::ReportDegradedWriteRequest* req,
                                   v1::ReportDegradedWriteResponse* resp) override;
  grpc::Status CreateTenant(grpc::ServerContext* ctx, const v1::CreateTenantRequest* req,
                            v1::CreateTenantResponse* resp) override;
  grpc::Status ListTenants(grpc::ServerContext* ctx, const v1::ListTenantsRequest* req,
                           v1::ListTenantsResponse* resp) override;
  grpc::Status DeleteTenant(grpc::ServerContext* ctx, const v1::DeleteTenantRequest* req,
                            v1::DeleteTenantResponse* resp) override;
  grpc::Status GetCapability(grpc::ServerContext* ctx, const v1::GetCapabilityRequest* req,
                             v1::Capability* resp) override;
  grpc::Status RotateClusterKey(grpc::ServerContext* ctx, const v1::RotateClusterKeyRequest* req,
                                v1::RotateClusterKeyResponse* resp) override;

 private:
  bool IsLeader() const { return !leadership_.is_leader || leadership_.is_leader(); }
  // OK on the leader; otherwise UNAVAILABLE naming the leader.
  Status CheckLeader() const;
  // Counts the call and converts its status.
  grpc::Status Done(const char* method, const Status& s);

  // The caller named by the request's API key (see TenantRegistry::Authenticate).
  Result<Caller> Authenticate(grpc::ServerContext* ctx) const;
  // Authenticate + an admin check (kPermissionDenied for tenants).
  Result<Caller> AuthenticateAdmin(grpc::ServerContext* ctx) const;
  // RegisterTarget and Heartbeat: the admin key (none needed without --auth).
  Status AuthenticateTarget(grpc::ServerContext* ctx) const;
  // The container `name` if `caller` may use it (kPermissionDenied for another tenant's).
  Result<v1::Container> OwnedContainer(const Caller& caller, const std::string& name) const;
  Result<v1::Container> OwnedContainerById(const Caller& caller, uint64_t id) const;
  // What declaring `target` lost would lose (mgmt_service_loss.cc).
  Result<v1::LossReport> AssessLoss(uint32_t target);

  ClusterState* const state_;
  MetricsRegistry* const metrics_;
  TenantRegistry* const tenants_;
  const int64_t token_ttl_ms_;
  Leadership leadership_;  // set before serving, then read-only
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::string address_;  // guarded by mu_
  std::string metrics_address_;  // guarded by mu_
  std::function<v1::RepairStatus()> repair_status_;  // guarded by mu_
  std::function<Result<v1::LossReport>(uint32_t)> assess_loss_;  // guarded by mu_
};

}  // namespace penstock::mgmt
