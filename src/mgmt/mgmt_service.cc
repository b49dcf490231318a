#include "mgmt/mgmt_service.h"

#include <chrono>

#include "common/log.h"
#include "mgmt_client/redundancy_proto.h"
#include "protocol/capability.h"

#ifndef PENSTOCK_VERSION
#define PENSTOCK_VERSION "unknown"
#endif

namespace penstock::mgmt {

grpc::Status ToGrpcStatus(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return OkStatus();
  return Status(static_cast<StatusCode>(s.error_code()), s.error_message());
}

MgmtService::MgmtService(ClusterState* state, MetricsRegistry* metrics, TenantRegistry* tenants,
                         int64_t token_ttl_ms)
    : state_(state), metrics_(metrics), tenants_(tenants), token_ttl_ms_(token_ttl_ms) {}

Result<Caller> MgmtService::Authenticate(grpc::ServerContext* ctx) const {
  std::string key;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("x-penstock-api-key"); it != md.end()) {
    key.assign(it->second.data(), it->second.size());
  } else if (auto it = md.find("authorization"); it != md.end()) {
    std::string v(it->second.data(), it->second.size());
    if (v.rfind("Bearer ", 0) != 0) {
      return Unauthenticated("authorization metadata must be 'Bearer <api key>'");
    }
    key = v.substr(7);
  }
  return tenants_->Authenticate(key);
}

Result<Caller> MgmtService::AuthenticateAdmin(grpc::ServerContext* ctx) const {
  PS_ASSIGN_OR_RETURN(Caller c, Authenticate(ctx));
  if (!c.admin) return PermissionDenied("only the admin key may manage tenants and cluster keys");
  return c;
}

Result<v1::Container> MgmtService::OwnedContainerById(const Caller& caller, uint64_t id) const {
  PS_ASSIGN_OR_RETURN(v1::Container c, state_->GetContainerById(id));
  if (!caller.admin && c.tenant_id() != caller.tenant) {
    return PermissionDenied("container '" + c.name() + "' belongs to another tenant");
  }
  return c;
}

Result<v1::Container> MgmtService::OwnedContainer(const Caller& caller, const std::string& name) const {
  PS_ASSIGN_OR_RETURN(v1::Container c, state_->GetContainer(name));
  if (!caller.admin && c.tenant_id() != caller.tenant) {
    return PermissionDenied("container '" + name + "' belongs to another tenant");
  }
  return c;
}

void MgmtService::set_address(std::string address) {
  std::lock_guard<std::mutex> lock(mu_);
  address_ = std::move(address);
}

void MgmtService::set_metrics_address(std::string address) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_address_ = std::move(address);
}

Status MgmtService::CheckLeader() const {
  if (IsLeader()) return OkStatus();
  std::string leader = leadership_.leader_address ? leadership_.leader_address() : "";
  if (leader.empty()) {
    return Unavailable("not the leader; no mgmt leader is elected yet (etcd lease expiring?); retry");
  }
  return Unavailable("not the leader; leader is " + leader);
}

grpc::Status MgmtService::Done(const char* method, const Status& s) {
  metrics_
      ->GetCounter("penstock_mgmt_rpc_total", "mgmt RPCs served, by method and result code",
                   {{"method", method}, {"code", std::string(StatusCodeName(s.code()))}})
      .Inc();
  if (!s.ok() && s.code() != StatusCode::kNotFound && s.code() != StatusCode::kAlreadyExists &&
      s.code() != StatusCode::kInvalidArgument && s.code() != StatusCode::kCancelled &&
      s.message().rfind("not the leader", 0) != 0) {
    PS_LOG_WARN("mgmt {} failed: {}", method, s.ToString());
  }
  return ToGrpcStatus(s);
}

Status MgmtService::AuthenticateTarget(grpc::ServerContext* ctx) const {
  // A target receives the cluster keys (it could mint any token): it must hold the admin key.
  auto c = Authenticate(ctx);
  if (c.ok() && c->admin) return OkStatus();
  const std::string m = "a target must present mgmt's admin API key (mgmt runs with --auth; start the target "
                        "with --admin-key-file FILE or PENSTOCK_ADMIN_KEY)";
  if (c.ok()) return PermissionDenied(m + "; the key given is a tenant's");
  return Unauthenticated(m + "; the key given is missing or unknown");
}

grpc::Status MgmtService::RegisterTarget(grpc::ServerContext* ctx,
                                         const v1::RegisterTargetRequest* req,
                                         v1::RegisterTargetResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("RegisterTarget", g);
  if (Status a = AuthenticateTarget(ctx); !a.ok()) return Done("RegisterTarget", a);
  Result<Registration> r = state_->RegisterTarget(*req);
  if (r.ok()) {
    resp->set_target_id(r->target_id);
    resp->set_epoch(r->epoch);
    resp->set_placement_epoch(r->placement_epoch);
    *resp->mutable_key_set() = tenants_->KeySet();
  }
  return Done("RegisterTarget", r.status());
}

grpc::Status MgmtService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                    v1::HeartbeatResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("Heartbeat", g);
  if (Status a = AuthenticateTarget(ctx); !a.ok()) return Done("Heartbeat", a);
  Result<uint64_t> r = state_->Heartbeat(*req);
  if (r.ok()) {
    resp->set_epoch(*r);
    resp->set_placement_epoch(state_->placement_epoch());
    *resp->mutable_key_set() = tenants_->KeySet();
  }
  return Done("Heartbeat", r.status());
}

grpc::Status MgmtService::GetClusterMap(grpc::ServerContext*, const v1::GetClusterMapRequest*,
                                        v1::ClusterMap* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("GetClusterMap", g);
  *resp = state_->GetClusterMap();
  return Done("GetClusterMap", OkStatus());
}

namespace {

// The scheme a create asks for: its typed `scheme`, or the text of a client older than it
// (parsed here, at the edge); none when it gives neither.
Result<std::optional<Redundancy>> RequestedRedundancy(const v1::CreateContainerRequest& req) {
  if (req.has_scheme()) {
    PS_ASSIGN_OR_RETURN(Redundancy r, RedundancyFromProto(req.scheme()));
    return std::optional<Redundancy>(r);
  }
  if (req.redundancy().empty()) return std::optional<Redundancy>();
  PS_ASSIGN_OR_RETURN(Redundancy r, ParseRedundancy(req.redundancy()));
  return std::optional<Redundancy>(r);
}

}  // namespace

grpc::Status MgmtService::CreateContainer(grpc::ServerContext* ctx,
                                          const v1::CreateContainerRequest* req,
                                          v1::Container* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("CreateContainer", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("CreateContainer", caller.status());
  Result<std::optional<Redundancy>> red = RequestedRedundancy(*req);
  if (!red.ok()) return Done("CreateContainer", red.status());
  Result<v1::Container> r =
      state_->CreateContainer(req->name(), *red, req->stripe_unit(), caller->tenant, req->min_durable());
  if (r.ok()) *resp = std::move(r).value();
  return Done("CreateContainer", r.status());
}

grpc::Status MgmtService::GetContainer(grpc::ServerContext* ctx, const v1::GetContainerRequest* req,
                                       v1::Container* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("GetContainer", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("GetContainer", caller.status());
  Result<v1::Container> r = OwnedContainer(*caller, req->name());
  if (r.ok()) *resp = std::move(r).value();
  return Done("GetContainer", r.status());
}

grpc::Status MgmtService::ListContainers(grpc::ServerContext* ctx, const v1::ListContainersRequest*,
                                         v1::ListContainersResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("ListContainers", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("ListContainers", caller.status());
  for (v1::Container& c : state_->ListContainers()) {
    if (caller->admin || c.tenant_id() == caller->tenant) *resp->add_containers() = std::move(c);
  }
  if (caller->admin) {
    for (uint64_t id : state_->DeletedContainerIds()) resp->add_deleted_container_ids(id);
  }
  return Done("ListContainers", OkStatus());
}

grpc::Status MgmtService::DeleteContainer(grpc::ServerContext* ctx,
                                          const v1::DeleteContainerRequest* req,
                                          v1::DeleteContainerResponse*) {
  if (Status g = CheckLeader(); !g.ok()) return Done("DeleteContainer", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("DeleteContainer", caller.status());
  if (auto c = OwnedContainer(*caller, req->name()); !c.ok()) return Done("DeleteContainer", c.status());
  return Done("DeleteContainer", state_->DeleteContainer(req->name()));
}

grpc::Status MgmtService::GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                                    v1::MgmtStatus* resp) {
  const bool leader = IsLeader();
  if (!leader) {
    // A follower's in-memory state is not maintained; read the shared store for the counts.
    if (Status s = state_->Reload(); !s.ok()) return Done("GetStatus", s);
  }
  ClusterSummary s = state_->Summary();
  {
    std::lock_guard<std::mutex> lock(mu_);
    resp->set_address(address_);
    resp->set_metrics_address(metrics_address_);
    resp->set_leader_address(leader ? address_
                                    : (leadership_.leader_address ? leadership_.leader_address() : ""));
  }
  resp->set_is_leader(leader);
  resp->set_meta(leadership_.meta);
  resp->set_epoch(s.epoch);
  resp->set_targets_up(s.targets_up);
  resp->set_targets_down(s.targets_down);
  resp->set_targets_lost(s.targets_lost);
  resp->set_containers(s.containers);
  if (auto lost = state_->LostObjectCount(); lost.ok()) resp->set_lost_objects(*lost);
  {
    std::function<v1::RepairStatus()> repair;
    {
      std::lock_guard<std::mutex> lock(mu_);
      repair = repair_status_;
    }
    if (repair) *resp->mutable_repair() = repair();
  }
  resp->set_version(PENSTOCK_VERSION);
  resp->set_heartbeat_timeout_ms(state_->heartbeat_timeout_ms());
  return Done("GetStatus", OkStatus());
}

grpc::Status MgmtService::WatchClusterMap(grpc::ServerContext* ctx,
                                          const v1::WatchClusterMapRequest* req,
                                          grpc::ServerWriter<v1::ClusterMap>* writer) {
  if (Status g = CheckLeader(); !g.ok()) return Done("WatchClusterMap", g);
  uint64_t known = req->since_epoch();
  bool sent = false;
  while (!ctx->IsCancelled()) {
    if (stopping_) return ToGrpcStatus(Unavailable("mgmt is shutting down; reconnect"));
    if (Status g = CheckLeader(); !g.ok()) return Done("WatchClusterMap", g);
    v1::ClusterMap map = state_->GetClusterMap();
    if (map.epoch() > known || (!sent && known == 0)) {
      if (!writer->Write(map)) break;  // the client went away
      known = map.epoch();
      sent = true;
    }
    state_->WaitForEpochAbove(known, std::chrono::milliseconds(200));
  }
  return Done("WatchClusterMap", Cancelled("watch cancelled by the client"));
}

grpc::Status MgmtService::CreateTenant(grpc::ServerContext* ctx, const v1::CreateTenantRequest* req,
                                       v1::CreateTenantResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("CreateTenant", g);
  if (auto c = AuthenticateAdmin(ctx); !c.ok()) return Done("CreateTenant", c.status());
  auto r = tenants_->CreateTenant(req->name());
  if (r.ok()) *resp = std::move(r).value();
  return Done("CreateTenant", r.status());
}

grpc::Status MgmtService::ListTenants(grpc::ServerContext* ctx, const v1::ListTenantsRequest*,
                                      v1::ListTenantsResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("ListTenants", g);
  if (auto c = AuthenticateAdmin(ctx); !c.ok()) return Done("ListTenants", c.status());
  for (v1::Tenant& t : tenants_->ListTenants()) *resp->add_tenants() = std::move(t);
  return Done("ListTenants", OkStatus());
}

grpc::Status MgmtService::DeleteTenant(grpc::ServerContext* ctx, const v1::DeleteTenantRequest* req,
                                       v1::DeleteTenantResponse*) {
  if (Status g = CheckLeader(); !g.ok()) return Done("DeleteTenant", g);
  if (auto c = AuthenticateAdmin(ctx); !c.ok()) return Done("DeleteTenant", c.status());
  return Done("DeleteTenant", tenants_->DeleteTenant(req->name()).status());
}

grpc::Status MgmtService::GetCapability(grpc::ServerContext* ctx, const v1::GetCapabilityRequest* req,
                                        v1::Capability* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("GetCapability", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("GetCapability", caller.status());
  Result<v1::Container> c = OwnedContainerById(*caller, req->container_id());
  // The admin (repair) also gets tokens for container 0, to list which containers targets
  // hold, and for deleted containers, to delete what is left of them.
  if (!c.ok() && c.status().code() == StatusCode::kNotFound && caller->admin &&
      (req->container_id() == 0 || state_->ContainerIdRetired(req->container_id()))) {
    c = v1::Container();
    c->set_id(req->container_id());
  }
  if (!c.ok()) return Done("GetCapability", c.status());
  uint32_t rights = req->rights() == 0 ? (kRightRead | kRightWrite) : req->rights();
  if (rights & ~uint32_t{kRightRead | kRightWrite | kRightAdmin}) {
    return Done("GetCapability", InvalidArgument("unknown rights bits " + std::to_string(rights)));
  }
  if ((rights & kRightAdmin) && !caller->admin) {
    return Done("GetCapability", PermissionDenied("only the admin key may ask for admin rights"));
  }
  *resp = tenants_->Issue(c->tenant_id(), c->id(), static_cast<uint8_t>(rights), state_->Summary().epoch,
                          token_ttl_ms_);
  return Done("GetCapability", OkStatus());
}

grpc::Status MgmtService::ReportDegradedWrite(grpc::ServerContext* ctx, const v1::ReportDegradedWriteRequest* req,
                                              v1::ReportDegradedWriteResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("ReportDegradedWrite", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("ReportDegradedWrite", caller.status());
  // Only a writer of the container (or the admin) may say its writes missed targets, and the
  // targets become recovering for that container only: a tenant cannot stop others' reads.
  // Container 0 (every container) is the admin's.
  if (req->container_id() == 0 && !caller->admin) {
    return Done("ReportDegradedWrite", PermissionDenied("only the admin may report a missed write for every "
                                                        "container (container_id 0); name the container written"));
  }
  if (req->container_id() != 0) {
    if (auto c = OwnedContainerById(*caller, req->container_id()); !c.ok()) return Done("ReportDegradedWrite", c.status());
  }
  auto epoch = state_->MarkRecovering(req->container_id(), {req->target_ids().begin(), req->target_ids().end()});
  if (epoch.ok()) resp->set_epoch(*epoch);
  return Done("ReportDegradedWrite", epoch.status());
}

grpc::Status MgmtService::RotateClusterKey(grpc::ServerContext* ctx, const v1::RotateClusterKeyRequest*,
                                           v1::RotateClusterKeyResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("RotateClusterKey", g);
  if (auto c = AuthenticateAdmin(ctx); !c.ok()) return Done("RotateClusterKey", c.status());
  auto id = tenants_->RotateKey();
  if (id.ok()) resp->set_current_key_id(*id);
  return Done("RotateClusterKey", id.status());
}

}  // namespace penstock::mgmt
