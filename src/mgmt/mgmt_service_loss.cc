// mgmt_service_loss.cc — the RPCs of declaring a target lost without losing data silently:
// AssessTargetLoss (what it would lose: the repair service beside this mgmt lists what the
// other targets hold), MarkTargetLost (refuses when that is not nothing, unless
// force_data_loss: then the lost objects are recorded first) and ListLostObjects (the records,
// read by `status`, `ls` and reads of lost objects).
#include <cstdio>

#include "common/log.h"
#include "mgmt/mgmt_service.h"

namespace penstock::mgmt {

namespace {

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// "3 objects (12.0 MiB) in 'a' (none), 'b' (rep:2): objects whose head only target 2 held".
std::string DescribeLoss(const v1::LossReport& loss) {
  std::string out;
  for (const v1::ContainerLoss& c : loss.containers()) {
    if (!out.empty()) out += "; ";
    out += "'" + c.container() + "' (" + c.redundancy() + "): ";
    if (c.objects() > 0) out += std::to_string(c.objects()) + " objects (" + Mib(c.bytes()) + ")";
    if (c.objects() > 0 && c.unlisted()) out += " and ";
    if (c.unlisted()) {
      out += "the objects whose only head copy target " + std::to_string(loss.target_id()) +
             " holds (it is down, so they cannot be counted)";
    }
  }
  return out;
}

}  // namespace

Result<v1::LossReport> MgmtService::AssessLoss(uint32_t target) {
  std::function<Result<v1::LossReport>(uint32_t)> assess;
  {
    std::lock_guard<std::mutex> lock(mu_);
    assess = assess_loss_;
  }
  if (!assess) {
    return Unavailable("this mgmt runs no repair service, so it cannot tell what declaring target " +
                       std::to_string(target) + " lost would lose; use --force-data-loss to declare it anyway");
  }
  return assess(target);
}

grpc::Status MgmtService::AssessTargetLoss(grpc::ServerContext* ctx, const v1::AssessTargetLossRequest* req,
                                           v1::LossReport* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("AssessTargetLoss", g);
  if (auto c = AuthenticateAdmin(ctx); !c.ok()) return Done("AssessTargetLoss", c.status());
  auto r = AssessLoss(req->target_id());
  if (r.ok()) *resp = std::move(r).value();
  return Done("AssessTargetLoss", r.status());
}

grpc::Status MgmtService::MarkTargetLost(grpc::ServerContext* ctx, const v1::MarkTargetLostRequest* req,
                                         v1::MarkTargetLostResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("MarkTargetLost", g);
  if (auto c = AuthenticateAdmin(ctx); !c.ok()) return Done("MarkTargetLost", c.status());
  const uint32_t id = req->target_id();
  auto loss = AssessLoss(id);
  if (!loss.ok() && !req->force_data_loss()) return Done("MarkTargetLost", loss.status());
  if (loss.ok() && !loss->containers().empty()) {
    if (!req->force_data_loss()) {
      return Done("MarkTargetLost",
                  FailedPrecondition("declaring target " + std::to_string(id) + " lost would lose data: " +
                                     DescribeLoss(*loss) + ". Bring target " + std::to_string(id) +
                                     " back if you can; to declare it lost anyway, pass --force-data-loss "
                                     "(those objects are then reported lost)"));
    }
    // Recorded before the target is declared lost: no moment without the record.
    if (Status s = state_->RecordLostObjects(*loss, SystemNowMs()); !s.ok()) return Done("MarkTargetLost", s);
    PS_LOG_ERROR("target {} declared lost with --force-data-loss: lost {}", id, DescribeLoss(*loss));
    *resp->mutable_loss() = *loss;
  }
  auto epoch = state_->MarkTargetLost(id);
  if (epoch.ok()) resp->set_epoch(*epoch);
  return Done("MarkTargetLost", epoch.status());
}

grpc::Status MgmtService::ListLostObjects(grpc::ServerContext* ctx, const v1::ListLostObjectsRequest* req,
                                          v1::ListLostObjectsResponse* resp) {
  if (Status g = CheckLeader(); !g.ok()) return Done("ListLostObjects", g);
  Result<Caller> caller = Authenticate(ctx);
  if (!caller.ok()) return Done("ListLostObjects", caller.status());
  uint64_t container_id = 0;
  if (!req->container().empty()) {
    auto c = OwnedContainer(*caller, req->container());
    if (!c.ok()) return Done("ListLostObjects", c.status());
    container_id = c->id();
  }
  auto r = state_->ListLostObjects(container_id, container_id == 0 ? "" : req->name(), 0);
  if (!r.ok()) return Done("ListLostObjects", r.status());
  for (v1::LostObject& o : *r->mutable_objects()) {
    auto c = state_->GetContainerById(o.container_id());
    // Another tenant's, or a container deleted since: not the caller's business.
    if (!caller->admin && (!c.ok() || c->tenant_id() != caller->tenant)) continue;
    resp->set_total(resp->total() + 1);
    if (req->limit() == 0 || static_cast<uint32_t>(resp->objects_size()) < req->limit()) {
      *resp->add_objects() = std::move(o);
    }
  }
  return Done("ListLostObjects", OkStatus());
}

}  // namespace penstock::mgmt
