// cluster_state.cc — ClusterState's loading from the MetaStore, the epoch and its commits, and
// the read-only views (cluster map, summary). The changes live beside it, by concept:
// cluster_state_targets.cc (registration, heartbeats), cluster_state_liveness.cc (DOWN and
// LOST), cluster_state_recovery.cc (recovering flags, settled placement) and
// cluster_state_containers.cc (the container catalogue).
#include "mgmt/cluster_state.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <utility>

#include "common/log.h"
#include "mgmt/cluster_state_keys.h"
#include "mgmt_client/redundancy_proto.h"
#include "protocol/object_head.h"
#include "protocol/shard_protocol.h"

namespace penstock::mgmt {
namespace {

// Everything LoadLocked reads, before it replaces the in-memory state.
struct LoadedState {
  uint64_t epoch = 0;
  uint32_t next_target_id = 1;
  uint64_t next_container_id = 1;
  uint64_t orphan_grace_ms = 0;
  uint64_t settled_placement_epoch = 0;
  std::map<uint32_t, v1::Target> targets;
  std::map<std::string, uint32_t> target_by_uuid;
  std::map<std::string, v1::Container> containers;
  std::set<uint64_t> deleted_containers;
};

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

Status Unparsable(const std::string& key) {
  return DataLoss("mgmt metadata record '" + key + "' cannot be parsed; restore the mgmt data dir from a backup");
}

// The cluster's orphan grace period: the one recorded when it was made, or for a new cluster
// `asked_ms` (0: kOrphanGrace), recorded now.
Result<uint64_t> LoadOrphanGrace(MetaStore* store, int64_t asked_ms) {
  const uint64_t wanted_grace = static_cast<uint64_t>(asked_ms > 0 ? asked_ms : kOrphanGrace.count());
  PS_ASSIGN_OR_RETURN(uint64_t orphan_grace, LoadCounter(store, kOrphanGraceKey, 0));
  if (orphan_grace == 0) {
    PS_RETURN_IF_ERROR(store->Put(kOrphanGraceKey, std::to_string(wanted_grace)));
    orphan_grace = wanted_grace;
  } else if (asked_ms > 0 && orphan_grace != wanted_grace) {
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
  return orphan_grace;
}

// The target records, with the grace period (see cluster_state.h) counted from `now`.
Status LoadTargets(MetaStore* store, const ClusterStateOptions& options, int64_t now, LoadedState* l) {
  PS_ASSIGN_OR_RETURN(auto target_rows, store->Scan(kTargetPrefix));
  for (const auto& [key, value] : target_rows) {
    v1::Target t;
    if (!t.ParseFromString(value)) return Unparsable(key);
    // Grace period: a target UP before the restart has one timeout to heartbeat again. Silence
    // counts only while mgmt watches: a DOWN one (its last heartbeat is the stored one, from
    // before mgmt went away) gets at least one heartbeat timeout before it can be declared LOST,
    // which cannot be undone.
    if (t.state() == v1::TARGET_STATE_UP) t.set_last_heartbeat_ms(now);
    if (t.state() == v1::TARGET_STATE_DOWN && options.lost_timeout_ms > 0) {
      t.set_last_heartbeat_ms(std::max<int64_t>(
          t.last_heartbeat_ms(), now - options.lost_timeout_ms + options.heartbeat_timeout_ms));
    }
    l->target_by_uuid[t.uuid()] = t.id();
    if (t.id() >= l->next_target_id) l->next_target_id = t.id() + 1;
    l->targets[t.id()] = std::move(t);
  }
  return OkStatus();
}

Status LoadContainers(MetaStore* store, LoadedState* l) {
  PS_ASSIGN_OR_RETURN(auto container_rows, store->Scan(kContainerPrefix));
  for (const auto& [key, value] : container_rows) {
    v1::Container c;
    if (!c.ParseFromString(value)) return Unparsable(key);
    if (!c.has_scheme()) {  // stored by a mgmt older than the typed scheme: read its text once
      PS_ASSIGN_OR_RETURN(Redundancy r, ContainerRedundancy(c));
      if (r.min_durable == 0) r.min_durable = r.DefaultQuorum();
      *c.mutable_scheme() = RedundancyToProto(r);
    }
    if (c.id() >= l->next_container_id) l->next_container_id = c.id() + 1;
    l->containers[c.name()] = std::move(c);
  }
  return OkStatus();
}

// The ids of deleted containers (retired: never given out again).
Status LoadDeletedContainers(MetaStore* store, LoadedState* l) {
  PS_ASSIGN_OR_RETURN(auto deleted_rows, store->Scan(kDeletedContainerPrefix));
  for (const auto& [key, value] : deleted_rows) {
    const std::string digits = key.substr(std::string(kDeletedContainerPrefix).size());
    char* end = nullptr;
    const unsigned long long id = std::strtoull(digits.c_str(), &end, 10);
    if (digits.empty() || end == nullptr || *end != '\0' || id == 0) {
      return DataLoss("mgmt metadata record '" + key + "' is malformed; restore the mgmt data dir from a backup");
    }
    l->deleted_containers.insert(id);
    if (id >= l->next_container_id) l->next_container_id = id + 1;
  }
  return OkStatus();
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
  LoadedState l;
  PS_ASSIGN_OR_RETURN(l.epoch, LoadCounter(store_, kEpochKey, 0));
  PS_ASSIGN_OR_RETURN(uint64_t next_target, LoadCounter(store_, kNextTargetIdKey, 1));
  l.next_target_id = static_cast<uint32_t>(next_target);
  PS_ASSIGN_OR_RETURN(l.next_container_id, LoadCounter(store_, kNextContainerIdKey, 1));
  PS_ASSIGN_OR_RETURN(l.settled_placement_epoch, LoadCounter(store_, kSettledPlacementKey, 0));
  PS_ASSIGN_OR_RETURN(l.orphan_grace_ms, LoadOrphanGrace(store_, options_.orphan_grace_ms));
  PS_RETURN_IF_ERROR(LoadTargets(store_, options_, options_.now_ms(), &l));
  PS_RETURN_IF_ERROR(LoadContainers(store_, &l));
  PS_RETURN_IF_ERROR(LoadDeletedContainers(store_, &l));
  epoch_ = l.epoch;
  next_target_id_ = l.next_target_id;
  next_container_id_ = l.next_container_id;
  orphan_grace_ms_ = l.orphan_grace_ms;
  settled_placement_epoch_ = l.settled_placement_epoch;
  targets_ = std::move(l.targets);
  target_by_uuid_ = std::move(l.target_by_uuid);
  containers_ = std::move(l.containers);
  deleted_containers_ = std::move(l.deleted_containers);
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

Result<uint64_t> ClusterState::CommitTargetsLocked(const std::map<uint32_t, v1::Target>& next) {
  WriteBatch batch;
  for (const auto& [id, t] : next) batch.Put(TargetKey(id), t.SerializeAsString());
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
  ++epoch_;
  for (const auto& [id, t] : next) targets_[id] = t;
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

}  // namespace penstock::mgmt
