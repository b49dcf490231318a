#include "mgmt/cluster_state.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "common/log.h"
#include "mgmt/container_rules.h"
#include "protocol/object_head.h"
#include "protocol/redundancy.h"
#include "protocol/shard_protocol.h"

namespace penstock::mgmt {
namespace {

// MetaStore layout (version 1). Values of records are serialized protobuf messages.
//   mgmt/v1/epoch                  decimal uint64
//   mgmt/v1/next_target_id         decimal uint32
//   mgmt/v1/next_container_id      decimal uint64
//   mgmt/v1/orphan_grace_ms        decimal uint64
//   mgmt/v1/target/<id, 10 digits> v1::Target
//   mgmt/v1/container/<name>       v1::Container
//   mgmt/v1/deleted_container/<id, 20 digits>  the deleted container's name
constexpr const char* kEpochKey = "mgmt/v1/epoch";
constexpr const char* kNextTargetIdKey = "mgmt/v1/next_target_id";
constexpr const char* kNextContainerIdKey = "mgmt/v1/next_container_id";
// The orphan grace period (ClusterMap.orphan_grace_ms), fixed when the cluster is made: every
// mgmt that leads it, and so every client, uses the same one.
constexpr const char* kOrphanGraceKey = "mgmt/v1/orphan_grace_ms";
constexpr const char* kSettledPlacementKey = "mgmt/v1/settled_placement_epoch";
constexpr const char* kTargetPrefix = "mgmt/v1/target/";
constexpr const char* kContainerPrefix = "mgmt/v1/container/";
constexpr const char* kDeletedContainerPrefix = "mgmt/v1/deleted_container/";

std::string TargetKey(uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%010u", id);
  return kTargetPrefix + std::string(buf);
}

std::string ContainerKey(const std::string& name) { return kContainerPrefix + name; }

std::string DeletedContainerKey(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(id));
  return kDeletedContainerPrefix + std::string(buf);
}

Result<uint64_t> LoadCounter(MetaStore* store, const char* key, uint64_t fallback) {
  PS_ASSIGN_OR_RETURN(std::optional<std::string> v, store->Get(key));
  if (!v) return fallback;
  try {
    size_t used = 0;
    uint64_t n = std::stoull(*v, &used);
    if (used == v->size()) return n;
  } catch (const std::exception&) {
  }
  return DataLoss(std::string("mgmt metadata key '") + key + "' holds '" + *v +
                  "', not a number; restore the mgmt data dir from a backup");
}

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

bool SameMapFields(const v1::Target& a, const v1::Target& b) {
  return a.address() == b.address() && a.metrics_address() == b.metrics_address() &&
         a.fault_domain() == b.fault_domain() && a.capacity_bytes() == b.capacity_bytes() &&
         a.state() == b.state() && a.recovering() == b.recovering() &&
         a.recovering_containers_size() == b.recovering_containers_size();
}

}  // namespace

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ClusterState::ClusterState(MetaStore* store, ClusterStateOptions options)
    : store_(store), options_(std::move(options)) {}

Result<std::unique_ptr<ClusterState>> ClusterState::Load(MetaStore* store,
                                                         ClusterStateOptions options) {
  if (!options.now_ms) options.now_ms = SystemNowMs;
  std::unique_ptr<ClusterState> s(new ClusterState(store, std::move(options)));
  std::lock_guard<std::mutex> lock(s->mu_);
  PS_RETURN_IF_ERROR(s->LoadLocked());
  return s;
}

Status ClusterState::LoadLocked() {
  // Everything is read first and replaces the state only when all of it was read: a store that
  // fails half way (a leader taking over, etcd briefly unreachable) leaves the state as it was.
  PS_ASSIGN_OR_RETURN(uint64_t epoch, LoadCounter(store_, kEpochKey, 0));
  PS_ASSIGN_OR_RETURN(uint64_t next_target, LoadCounter(store_, kNextTargetIdKey, 1));
  auto next_target_id = static_cast<uint32_t>(next_target);
  PS_ASSIGN_OR_RETURN(uint64_t next_container_id, LoadCounter(store_, kNextContainerIdKey, 1));
  PS_ASSIGN_OR_RETURN(uint64_t settled_placement, LoadCounter(store_, kSettledPlacementKey, 0));
  const uint64_t wanted_grace =
      static_cast<uint64_t>(options_.orphan_grace_ms > 0 ? options_.orphan_grace_ms : kOrphanGrace.count());
  PS_ASSIGN_OR_RETURN(uint64_t orphan_grace, LoadCounter(store_, kOrphanGraceKey, 0));
  if (orphan_grace == 0) {
    PS_RETURN_IF_ERROR(store_->Put(kOrphanGraceKey, std::to_string(wanted_grace)));
    orphan_grace = wanted_grace;
  } else if (options_.orphan_grace_ms > 0 && orphan_grace != wanted_grace) {
    PS_LOG_WARN("orphan grace period: the cluster's is {} ms (fixed when it was made), not the {} ms asked for; "
                "using {} ms", orphan_grace, wanted_grace, orphan_grace);
  }
  if (std::chrono::milliseconds(orphan_grace) < kOrphanGrace) {
    PS_LOG_WARN("orphan grace period {} ms is below the default {} ms: a put whose head write is slow (it may land "
                "up to a client's timeout, at most {} s, and the {} s clock-skew allowance after the put's commit "
                "window) could commit after its stripes were collected; meant for tests",
                orphan_grace, kOrphanGrace.count(),
                std::chrono::duration_cast<std::chrono::seconds>(kMaxRequestLifetime).count(),
                kClockSkewAllowance.count());
  }

  const int64_t now = options_.now_ms();
  std::map<uint32_t, v1::Target> targets;
  std::map<std::string, uint32_t> target_by_uuid;
  PS_ASSIGN_OR_RETURN(auto target_rows, store_->Scan(kTargetPrefix));
  for (const auto& [key, value] : target_rows) {
    v1::Target t;
    if (!t.ParseFromString(value)) {
      return DataLoss("mgmt metadata record '" + key +
                      "' cannot be parsed; restore the mgmt data dir from a backup");
    }
    // Grace period: a target UP before the restart has one timeout to heartbeat again. Silence
    // counts only while mgmt watches: a DOWN one (its last heartbeat is the stored one, from
    // before mgmt went away) gets at least one heartbeat timeout before it can be declared LOST,
    // which cannot be undone.
    if (t.state() == v1::TARGET_STATE_UP) t.set_last_heartbeat_ms(now);
    if (t.state() == v1::TARGET_STATE_DOWN && options_.lost_timeout_ms > 0) {
      t.set_last_heartbeat_ms(std::max<int64_t>(
          t.last_heartbeat_ms(), now - options_.lost_timeout_ms + options_.heartbeat_timeout_ms));
    }
    target_by_uuid[t.uuid()] = t.id();
    if (t.id() >= next_target_id) next_target_id = t.id() + 1;
    targets[t.id()] = std::move(t);
  }
  std::map<std::string, v1::Container> containers;
  PS_ASSIGN_OR_RETURN(auto container_rows, store_->Scan(kContainerPrefix));
  for (const auto& [key, value] : container_rows) {
    v1::Container c;
    if (!c.ParseFromString(value)) {
      return DataLoss("mgmt metadata record '" + key +
                      "' cannot be parsed; restore the mgmt data dir from a backup");
    }
    if (c.id() >= next_container_id) next_container_id = c.id() + 1;
    containers[c.name()] = std::move(c);
  }
  std::set<uint64_t> deleted_containers;
  PS_ASSIGN_OR_RETURN(auto deleted_rows, store_->Scan(kDeletedContainerPrefix));
  for (const auto& [key, value] : deleted_rows) {
    const std::string digits = key.substr(std::string(kDeletedContainerPrefix).size());
    char* end = nullptr;
    const unsigned long long id = std::strtoull(digits.c_str(), &end, 10);
    if (digits.empty() || end == nullptr || *end != '\0' || id == 0) {
      return DataLoss("mgmt metadata record '" + key + "' is malformed; restore the mgmt data dir from a backup");
    }
    deleted_containers.insert(id);
    if (id >= next_container_id) next_container_id = id + 1;
  }
  epoch_ = epoch;
  next_target_id_ = next_target_id;
  next_container_id_ = next_container_id;
  orphan_grace_ms_ = orphan_grace;
  settled_placement_epoch_ = settled_placement;
  targets_ = std::move(targets);
  target_by_uuid_ = std::move(target_by_uuid);
  containers_ = std::move(containers);
  deleted_containers_ = std::move(deleted_containers);
  epoch_cv_.notify_all();
  return OkStatus();
}

Status ClusterState::Reload() {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadLocked();
}

uint64_t ClusterState::WaitForEpochAbove(uint64_t known, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  epoch_cv_.wait_for(lock, timeout, [&] { return epoch_ > known; });
  return epoch_;
}

Status ClusterState::CommitLocked(WriteBatch& batch, uint64_t epoch) {
  // Waiters re-check the epoch once the caller has applied the change and released mu_.
  epoch_cv_.notify_all();
  batch.Put(kEpochKey, std::to_string(epoch));
  return store_->Commit(batch);
}

Result<Registration> ClusterState::RegisterTarget(const v1::RegisterTargetRequest& req) {
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
  if (revived || capacity_changed) {
    v1::Target next = t;
    next.set_state(v1::TARGET_STATE_UP);
    if (revived && !next.recovering()) {  // back from DOWN: it missed writes
      next.set_recovering(true);
      next.set_recovering_since_epoch(epoch_ + 1);
    }
    if (capacity_changed) next.set_capacity_bytes(req.capacity_bytes());
    next.set_used_bytes(req.used_bytes());
    next.set_live_bytes(req.live_bytes());
    if (req.has_dead_bytes()) next.set_dead_bytes(req.dead_bytes());
    next.set_shards(req.shards());
    next.set_corrupt_shard_count(req.corrupt_shard_count());
    *next.mutable_corrupt_shards() = req.corrupt_shards();
    next.set_last_heartbeat_ms(now);
    WriteBatch batch;
    batch.Put(TargetKey(next.id()), next.SerializeAsString());
    PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
    ++epoch_;
    if (revived) PS_LOG_INFO("target {} is UP again (epoch {})", next.id(), epoch_);
    t = std::move(next);
    return epoch_;
  }
  t.set_used_bytes(req.used_bytes());
  t.set_live_bytes(req.live_bytes());
  if (req.has_dead_bytes()) t.set_dead_bytes(req.dead_bytes());
  t.set_shards(req.shards());
  t.set_corrupt_shard_count(req.corrupt_shard_count());
  *t.mutable_corrupt_shards() = req.corrupt_shards();
  t.set_last_heartbeat_ms(now);
  return epoch_;
}

Result<int> ClusterState::CheckLiveness(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteBatch batch;
  std::vector<uint32_t> down, lost;
  for (const auto& [id, t] : targets_) {
    const int64_t silent = now_ms - t.last_heartbeat_ms();
    if (t.state() == v1::TARGET_STATE_UP && silent > options_.heartbeat_timeout_ms) {
      v1::Target next = t;
      next.set_state(v1::TARGET_STATE_DOWN);
      batch.Put(TargetKey(id), next.SerializeAsString());
      down.push_back(id);
    } else if (t.state() == v1::TARGET_STATE_DOWN && options_.lost_timeout_ms > 0 &&
               silent > options_.lost_timeout_ms) {
      v1::Target next = t;
      next.set_state(v1::TARGET_STATE_LOST);
      next.set_placement_epoch(epoch_ + 1);
      batch.Put(TargetKey(id), next.SerializeAsString());
      lost.push_back(id);
    }
  }
  if (down.empty() && lost.empty()) return 0;
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
  ++epoch_;
  for (uint32_t id : down) {
    v1::Target& t = targets_[id];
    PS_LOG_WARN("target {} ({}) missed heartbeats for {} ms; marked DOWN (epoch {})", id,
                t.address(), now_ms - t.last_heartbeat_ms(), epoch_);
    t.set_state(v1::TARGET_STATE_DOWN);
  }
  for (uint32_t id : lost) {
    v1::Target& t = targets_[id];
    PS_LOG_WARN("target {} ({}) has been down for {} ms; declared LOST, its shards will be rebuilt (epoch {})",
                id, t.address(), now_ms - t.last_heartbeat_ms(), epoch_);
    t.set_state(v1::TARGET_STATE_LOST);
    t.set_placement_epoch(epoch_);
  }
  return static_cast<int>(down.size() + lost.size());
}

Result<uint64_t> ClusterState::CommitTargetsLocked(const std::map<uint32_t, v1::Target>& next) {
  WriteBatch batch;
  for (const auto& [id, t] : next) batch.Put(TargetKey(id), t.SerializeAsString());
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
  ++epoch_;
  for (const auto& [id, t] : next) targets_[id] = t;
  return epoch_;
}

Result<uint64_t> ClusterState::MarkRecovering(uint64_t container_id, const std::vector<uint32_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  if (container_id != 0) {
    bool known = false;
    for (const auto& [name, c] : containers_) known |= c.id() == container_id;
    if (!known) return NotFound("container id " + std::to_string(container_id) + " does not exist");
  }
  std::map<uint32_t, v1::Target> changed;
  const auto now = std::chrono::steady_clock::now();
  for (uint32_t id : ids) {
    auto it = targets_.find(id);
    if (it == targets_.end()) return NotFound("target " + std::to_string(id) + " is not registered");
    if (it->second.state() == v1::TARGET_STATE_LOST) continue;
    // A container's miss is kept for that container only: it never holds back clearing the
    // whole-target flag (its entry below does the container's part), so a tenant reporting in
    // a loop cannot keep a restarted target from serving everyone else's reads.
    if (container_id == 0) {
      missed_at_[id] = now;
    } else {
      missed_in_at_[{id, container_id}] = now;
    }
    // DOWN ones become recovering (for every container) when they return, recovering ones stay
    // so; the container is still recorded (readers never fall back to a target a write in
    // their container is known to have missed).
    const v1::Target& cur = changed.count(id) ? changed.at(id) : it->second;
    if (container_id == 0 && (cur.recovering() || cur.state() != v1::TARGET_STATE_UP)) continue;
    if (container_id != 0) {
      bool listed = false;
      for (const auto& rc : cur.recovering_containers()) listed |= rc.container_id() == container_id;
      if (listed) continue;
    }
    v1::Target next = cur;
    if (container_id == 0) {
      next.set_recovering(true);
      next.set_recovering_since_epoch(epoch_ + 1);
    } else {
      v1::RecoveringContainer* rc = next.add_recovering_containers();
      rc->set_container_id(container_id);
      rc->set_since_epoch(epoch_ + 1);
    }
    changed[id] = std::move(next);
  }
  if (changed.empty()) return epoch_;
  PS_RETURN_IF_ERROR(CommitTargetsLocked(changed).status());
  for (const auto& [id, t] : changed) {
    if (container_id == 0) {
      PS_LOG_WARN("target {} missed a write a client acknowledged degraded; recovering until repaired (epoch {})", id,
                  epoch_);
    } else {
      PS_LOG_WARN("target {} missed a write to container id {} a client acknowledged degraded; no reads of that "
                  "container from it until repaired (epoch {})", id, container_id, epoch_);
    }
  }
  return epoch_;
}

Result<uint64_t> ClusterState::MarkRecovered(const std::vector<uint32_t>& ids, const std::vector<uint64_t>& containers,
                                             uint64_t checked_at_epoch,
                                             std::chrono::steady_clock::time_point pass_started) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<uint64_t> existing;
  for (const auto& [name, c] : containers_) existing.insert(c.id());
  const std::set<uint64_t> checked(containers.begin(), containers.end());
  const std::set<uint32_t> whole(ids.begin(), ids.end());
  std::map<uint32_t, v1::Target> changed;
  for (const auto& [id, t] : targets_) {
    if (t.state() != v1::TARGET_STATE_UP) continue;
    v1::Target next = t;
    if (whole.count(id) && t.recovering() && t.recovering_since_epoch() <= checked_at_epoch) {
      // Not if a write missed it after the pass started (the pass's listing may predate it).
      auto m = missed_at_.find(id);
      if (m == missed_at_.end() || m->second < pass_started) next.set_recovering(false);
    }
    // Per container: checked by this pass, and no write in it missed since the pass started.
    // A container deleted since it was reported has nothing left to check.
    auto* rcs = next.mutable_recovering_containers();
    for (int i = rcs->size() - 1; i >= 0; --i) {
      const v1::RecoveringContainer& rc = rcs->Get(i);
      bool clear = !existing.count(rc.container_id());
      if (!clear && checked.count(rc.container_id()) && rc.since_epoch() <= checked_at_epoch) {
        auto m = missed_in_at_.find({id, rc.container_id()});
        clear = m == missed_in_at_.end() || m->second < pass_started;
      }
      if (clear) rcs->DeleteSubrange(i, 1);
    }
    if (next.recovering() != t.recovering() || rcs->size() != t.recovering_containers_size()) {
      changed[id] = std::move(next);
    }
  }
  if (changed.empty()) return epoch_;
  PS_RETURN_IF_ERROR(CommitTargetsLocked(changed).status());
  for (const auto& [id, t] : changed) {
    if (!t.recovering() && t.recovering_containers_size() == 0) {
      PS_LOG_INFO("target {} checked by repair: serving reads again (epoch {})", id, epoch_);
    } else if (!t.recovering()) {
      PS_LOG_INFO("target {} checked by repair: {} container(s) still wait for a clean pass (epoch {})", id,
                  t.recovering_containers_size(), epoch_);
    }
  }
  return epoch_;
}

Result<uint64_t> ClusterState::MarkTargetLost(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = targets_.find(id);
  if (it == targets_.end()) {
    return NotFound("target " + std::to_string(id) + " is not registered; see `penstock status`");
  }
  if (it->second.state() == v1::TARGET_STATE_LOST) return epoch_;
  v1::Target next = it->second;
  next.set_state(v1::TARGET_STATE_LOST);
  next.set_placement_epoch(epoch_ + 1);
  PS_RETURN_IF_ERROR(CommitTargetsLocked({{id, next}}).status());
  PS_LOG_WARN("target {} ({}) declared LOST by an operator; its shards will be rebuilt (epoch {})", id,
              next.address(), epoch_);
  return epoch_;
}

v1::ClusterMap ClusterState::GetClusterMap() const {
  std::lock_guard<std::mutex> lock(mu_);
  v1::ClusterMap map;
  map.set_epoch(epoch_);
  map.set_placement_epoch(PlacementEpochLocked());
  map.set_orphan_grace_ms(orphan_grace_ms_);
  map.set_settled_placement_epoch(settled_placement_epoch_);
  for (const auto& [id, t] : targets_) *map.add_targets() = t;
  return map;
}

Result<uint64_t> ClusterState::MarkPlacementSettled(uint64_t placement_epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  placement_epoch = std::min(placement_epoch, PlacementEpochLocked());
  if (placement_epoch <= settled_placement_epoch_) return epoch_;
  WriteBatch batch;
  batch.Put(kSettledPlacementKey, std::to_string(placement_epoch));
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
  ++epoch_;
  settled_placement_epoch_ = placement_epoch;
  PS_LOG_INFO("repair moved every shard to the slots of placement epoch {}: readers stop looking where "
              "earlier placements put them (epoch {})", placement_epoch, epoch_);
  return epoch_;
}

uint64_t ClusterState::placement_epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return PlacementEpochLocked();
}

uint64_t ClusterState::PlacementEpochLocked() const {
  uint64_t e = 0;
  for (const auto& [id, t] : targets_) e = std::max(e, t.placement_epoch());
  return e;
}

ClusterSummary ClusterState::Summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  ClusterSummary s;
  s.epoch = epoch_;
  for (const auto& [id, t] : targets_) {
    if (t.state() == v1::TARGET_STATE_UP) {
      ++s.targets_up;
    } else if (t.state() == v1::TARGET_STATE_LOST) {
      ++s.targets_lost;
    } else {
      ++s.targets_down;
    }
  }
  s.containers = static_cast<uint32_t>(containers_.size());
  return s;
}

Result<v1::Container> ClusterState::CreateContainer(const std::string& name,
                                                    const std::string& redundancy,
                                                    uint64_t stripe_unit, uint64_t tenant_id) {
  PS_RETURN_IF_ERROR(ValidateContainerName(name));
  PS_ASSIGN_OR_RETURN(std::string red, NormalizeRedundancy(redundancy));
  PS_ASSIGN_OR_RETURN(uint64_t unit, NormalizeStripeUnit(stripe_unit));

  std::lock_guard<std::mutex> lock(mu_);
  if (containers_.count(name) != 0) {
    return AlreadyExists("container '" + name + "' already exists");
  }
  PS_ASSIGN_OR_RETURN(Redundancy scheme, ParseRedundancy(red));
  uint32_t usable = 0;
  for (const auto& [id, t] : targets_) usable += t.state() != v1::TARGET_STATE_LOST;
  if (scheme.protected_() && scheme.width() > usable) {
    return FailedPrecondition("redundancy " + red + " puts each stripe on " + std::to_string(scheme.width()) +
                              " targets, but the cluster has " + std::to_string(usable) +
                              "; add targets or choose a narrower scheme");
  }
  v1::Container c;
  c.set_id(next_container_id_);
  c.set_name(name);
  c.set_redundancy(red);
  c.set_stripe_unit(unit);
  c.set_created_ms(options_.now_ms());
  c.set_tenant_id(tenant_id);
  WriteBatch batch;
  batch.Put(ContainerKey(name), c.SerializeAsString());
  batch.Put(kNextContainerIdKey, std::to_string(next_container_id_ + 1));
  PS_RETURN_IF_ERROR(store_->Commit(batch));
  ++next_container_id_;
  containers_[name] = c;
  PS_LOG_INFO("container '{}' created (id {}, redundancy {}, stripe unit {})", name, c.id(), red,
              unit);
  return c;
}

Result<v1::Container> ClusterState::GetContainer(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(name);
  if (it == containers_.end()) {
    return NotFound("container '" + name + "' does not exist; create it with `penstock container create " +
                    name + "`");
  }
  return it->second;
}

Result<v1::Container> ClusterState::GetContainerById(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, c] : containers_) {
    if (c.id() == id) return c;
  }
  return NotFound("container id " + std::to_string(id) + " does not exist (deleted?)");
}

bool ClusterState::ContainerIdRetired(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return deleted_containers_.count(id) != 0;
}

std::vector<uint64_t> ClusterState::DeletedContainerIds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {deleted_containers_.begin(), deleted_containers_.end()};
}

std::vector<v1::Container> ClusterState::ListContainers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Container> out;
  out.reserve(containers_.size());
  for (const auto& [name, c] : containers_) out.push_back(c);
  return out;
}

Status ClusterState::DeleteContainer(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(name);
  if (it == containers_.end()) {
    return NotFound("container '" + name + "' does not exist; create it with `penstock container create " +
                    name + "`");
  }
  // The deletion is recorded: repair deletes what targets still hold of this id, and only of
  // ids recorded so (never of a container a mgmt with other metadata does not know).
  WriteBatch batch;
  batch.Delete(ContainerKey(name));
  batch.Put(DeletedContainerKey(it->second.id()), name);
  PS_RETURN_IF_ERROR(store_->Commit(batch));
  deleted_containers_.insert(it->second.id());
  containers_.erase(it);
  PS_LOG_INFO("container '{}' deleted", name);
  return OkStatus();
}

}  // namespace penstock::mgmt
