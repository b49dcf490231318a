// cluster_state_targets.cc — ClusterState's target registry: registration (new targets get an
// id, known ones come back recovering) and heartbeats (usage figures, a DOWN target coming back).
#include <algorithm>
#include <string>
#include <utility>

#include "common/log.h"
#include "mgmt/cluster_state.h"
#include "mgmt/cluster_state_keys.h"

namespace penstock::mgmt {
namespace {

// "host:port" with a non-empty host and a port in 1..65535.
bool IsHostPort(const std::string& a) {
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  std::string port = a.substr(colon + 1);
  if (port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  int p = std::stoi(port);
  return p >= 1 && p <= 65535;
}

// A data-plane address: "host:port", or one per rail joined by ',' (a multi-rail target).
bool IsDataAddress(const std::string& a) {
  size_t begin = 0;
  for (;;) {
    const size_t end = std::min(a.find(',', begin), a.size());
    if (!IsHostPort(a.substr(begin, end - begin))) return false;
    if (end == a.size()) return true;
    begin = end + 1;
  }
}

// The checks of a registration that need no state: its uuid and addresses.
Status ValidateRegistration(const v1::RegisterTargetRequest& req) {
  if (req.uuid().empty()) {
    return InvalidArgument("target registration has an empty uuid; the target must send the "
                           "uuid stored in its data dir");
  }
  if (!IsDataAddress(req.address())) {
    return InvalidArgument("target " + req.uuid() + " registered data address '" +
                           req.address() + "', which is not host:port (or host:port,host:port,... "
                           "for several rails); check its --listen-host and --rails");
  }
  if (!req.metrics_address().empty() && !IsHostPort(req.metrics_address())) {
    return InvalidArgument("target " + req.uuid() + " registered metrics address '" +
                           req.metrics_address() + "', which is not host:port");
  }
  return OkStatus();
}

bool SameMapFields(const v1::Target& a, const v1::Target& b) {
  return a.address() == b.address() && a.metrics_address() == b.metrics_address() &&
         a.fault_domain() == b.fault_domain() && a.capacity_bytes() == b.capacity_bytes() &&
         a.state() == b.state() && a.recovering() == b.recovering() &&
         a.recovering_containers_size() == b.recovering_containers_size();
}

// The usage figures a heartbeat reports, and its time `now`.
void ApplyUsage(const v1::HeartbeatRequest& req, int64_t now, v1::Target* t) {
  t->set_used_bytes(req.used_bytes());
  t->set_live_bytes(req.live_bytes());
  if (req.has_dead_bytes()) t->set_dead_bytes(req.dead_bytes());
  t->set_shards(req.shards());
  t->set_corrupt_shard_count(req.corrupt_shard_count());
  *t->mutable_corrupt_shards() = req.corrupt_shards();
  t->set_last_heartbeat_ms(now);
}

}  // namespace

Result<Registration> ClusterState::RegisterTarget(const v1::RegisterTargetRequest& req) {
  PS_RETURN_IF_ERROR(ValidateRegistration(req));

  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = options_.now_ms();
  auto known = target_by_uuid_.find(req.uuid());
  const bool is_new = known == target_by_uuid_.end();
  if (!is_new && targets_.at(known->second).state() == v1::TARGET_STATE_LOST) {
    return FailedPrecondition("target " + std::to_string(known->second) + " (uuid " + req.uuid() +
                              ") was declared lost and its data rebuilt elsewhere; to reuse the device, "
                              "empty its data directory and start it as a new target");
  }

  v1::Target t;
  if (!is_new) t = targets_.at(known->second);
  const v1::Target before = t;
  if (is_new) {
    t.set_id(next_target_id_);
    t.set_uuid(req.uuid());
  }
  t.set_address(req.address());
  t.set_metrics_address(req.metrics_address());
  t.set_fault_domain(req.fault_domain());
  t.set_capacity_bytes(req.capacity_bytes());
  t.set_state(v1::TARGET_STATE_UP);
  t.set_last_heartbeat_ms(now);
  // A known target registering again restarted: what it missed meanwhile is stale until repair.
  if (!is_new && !t.recovering()) t.set_recovering(true);

  const bool changed = is_new || !SameMapFields(before, t);
  const uint64_t epoch = changed ? epoch_ + 1 : epoch_;
  if (t.recovering() && !before.recovering()) t.set_recovering_since_epoch(epoch);
  if (is_new || before.fault_domain() != t.fault_domain()) t.set_placement_epoch(epoch);
  // A target that joins before any container exists moves no data: nothing to settle.
  if (is_new) t.set_joined_epoch(containers_.empty() ? 0 : epoch);
  WriteBatch batch;
  batch.Put(TargetKey(t.id()), t.SerializeAsString());
  if (is_new) batch.Put(kNextTargetIdKey, std::to_string(next_target_id_ + 1));
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch));

  if (is_new) {
    ++next_target_id_;
    target_by_uuid_[t.uuid()] = t.id();
    PS_LOG_INFO("target {} registered as id {} at {} (epoch {})", t.uuid(), t.id(), t.address(),
                epoch);
  } else if (changed) {
    PS_LOG_INFO("target {} (id {}) re-registered at {} (epoch {})", t.uuid(), t.id(),
                t.address(), epoch);
  }
  epoch_ = epoch;
  const uint32_t id = t.id();
  targets_[id] = std::move(t);
  return Registration{id, epoch_, PlacementEpochLocked()};
}

Result<uint64_t> ClusterState::Heartbeat(const v1::HeartbeatRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = targets_.find(req.target_id());
  if (it == targets_.end() || it->second.uuid() != req.uuid()) {
    return NotFound("target " + std::to_string(req.target_id()) + " (uuid " + req.uuid() +
                    ") is not registered with this mgmt; the target must register again");
  }
  v1::Target& t = it->second;
  if (t.state() == v1::TARGET_STATE_LOST) {
    return FailedPrecondition("target " + std::to_string(t.id()) + " was declared lost; empty its data "
                              "directory and start it as a new target");
  }
  const int64_t now = options_.now_ms();
  const bool revived = t.state() != v1::TARGET_STATE_UP;
  const bool capacity_changed =
      req.capacity_bytes() != 0 && req.capacity_bytes() != t.capacity_bytes();
  if (!revived && !capacity_changed) {
    // Usage only: kept in memory, no commit (see cluster_state.h, Durability).
    ApplyUsage(req, now, &t);
    return epoch_;
  }
  v1::Target next = t;
  next.set_state(v1::TARGET_STATE_UP);
  if (revived && !next.recovering()) {  // back from DOWN: it missed writes
    next.set_recovering(true);
    next.set_recovering_since_epoch(epoch_ + 1);
  }
  if (capacity_changed) next.set_capacity_bytes(req.capacity_bytes());
  ApplyUsage(req, now, &next);
  WriteBatch batch;
  batch.Put(TargetKey(next.id()), next.SerializeAsString());
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
  ++epoch_;
  if (revived) PS_LOG_INFO("target {} is UP again (epoch {})", next.id(), epoch_);
  t = std::move(next);
  return epoch_;
}

}  // namespace penstock::mgmt
