#include "mgmt/mgmt_daemon.h"

#include <utility>
#include <vector>

#include "common/log.h"
#include "protocol/object_head.h"
#include "repair/repairer.h"

namespace penstock {
namespace {

// What the repair service beside `server` runs with: it dials that server, and reports to it.
RepairOptions RepairOptionsFor(MgmtServer* server, const MgmtDaemonOptions& options) {
  const MgmtServerOptions& o = options.server;
  RepairOptions ro;
  ro.mgmt_address = server->address();
  ro.api_key = o.admin_key;
  ro.tls = o.tls;  // mgmt's certificate doubles as the repair client's (one CA signs both)
  ro.interval = options.repair_interval;
  ro.orphan_grace = o.orphan_grace_ms > 0 ? std::chrono::milliseconds(o.orphan_grace_ms) : kOrphanGrace;
  ro.rate_bytes_per_s = options.repair_rate_bytes_per_s;
  ro.is_leader = [server] { return server->is_leader(); };
  ro.lost_objects = [server](uint64_t container) {
    auto r = server->state()->ListLostObjects(container, "", 0);
    return r.ok() ? std::vector<v1::LostObject>(r->objects().begin(), r->objects().end())
                  : std::vector<v1::LostObject>{};
  };
  ro.forget_lost = [server](const v1::LostObject& o) {
    if (Status s = server->state()->ForgetLostObject(o.container_id(), o.name()); s.ok()) {
      PS_LOG_INFO("object '{}' in '{}', recorded lost, was written again or deleted: record dropped", o.name(),
                  o.container());
    }
  };
  ro.metrics = server->metrics();
  ro.on_clean_pass = [server](const std::vector<uint32_t>& ids, const std::vector<uint64_t>& containers,
                              uint64_t epoch, std::chrono::steady_clock::time_point started) {
    auto r = server->state()->MarkRecovered(ids, containers, epoch, started);
    if (!r.ok()) PS_LOG_WARN("could not clear the recovering flag: {}", r.status().ToString());
  };
  // A target that is up heartbeated within the timeout, so it learned the placement by then.
  ro.settle_after = std::chrono::milliseconds(o.heartbeat_timeout_ms);
  ro.on_placement_settled = [server](uint64_t placement_epoch) {
    auto r = server->state()->MarkPlacementSettled(placement_epoch);
    if (!r.ok()) PS_LOG_WARN("could not record that the data moves are done: {}", r.status().ToString());
  };
  return ro;
}

}  // namespace

Result<std::unique_ptr<MgmtDaemon>> MgmtDaemon::Start(const MgmtDaemonOptions& options) {
  std::unique_ptr<MgmtDaemon> d(new MgmtDaemon());
  PS_ASSIGN_OR_RETURN(d->server_, MgmtServer::Start(options.server));
  MgmtServer* server = d->server_.get();
  auto repair = Repairer::Start(RepairOptionsFor(server, options));
  if (!repair.ok()) {
    server->Shutdown();
    return repair.status().WithContext("starting the repair service");
  }
  d->repair_ = std::move(repair).value();
  Repairer* rep = d->repair_.get();
  server->set_repair_status([rep] { return rep->status(); });
  server->set_loss_assessor([rep](uint32_t target) { return rep->AssessLoss(target); });
  return d;
}

MgmtDaemon::~MgmtDaemon() { Stop(); }

void MgmtDaemon::Wait() { server_->Wait(); }

void MgmtDaemon::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (repair_) {
    server_->set_repair_status({});
    server_->set_loss_assessor({});
    repair_->Stop();
  }
  if (server_) server_->Shutdown();
}

}  // namespace penstock
