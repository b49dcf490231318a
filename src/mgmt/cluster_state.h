// cluster_state.h — the mgmt state machine: target registry, map epoch, containers, and
// failure detection from heartbeats. No gRPC here; MgmtService is a thin adapter over it.
// One class, its code split by concept: cluster_state.cc (Load, Reload, epoch commits, the map
// and summary), cluster_state_targets.cc (RegisterTarget, Heartbeat), cluster_state_liveness.cc
// (CheckLiveness, MarkTargetLost), cluster_state_recovery.cc (MarkRecovering, MarkRecovered,
// MarkPlacementSettled), cluster_state_containers.cc (the container catalogue); the MetaStore
// keys they share are in cluster_state_keys.h.
//
// Durability: every change that matters after a restart (a target's identity, addresses and
// UP/DOWN state, the epoch, containers, id counters) is committed to the MetaStore *before*
// it becomes visible in memory, in one atomic WriteBatch; a failed commit leaves the state
// unchanged. Heartbeat usage figures (used/live bytes, shards, last heartbeat time) are kept
// in memory only, to keep heartbeats free of synced writes; they are persisted whenever the
// target's record is written for another reason. On Load, targets recorded UP get a grace
// period of one heartbeat timeout (their last heartbeat is set to "now") before
// CheckLiveness may mark them DOWN.
//
// Epoch: bumped by every change to the cluster map — a new target, a known target whose
// address, metrics address, fault domain, capacity, state or recovering flags changed, and
// UP<->DOWN. A known target that registers again or comes back from DOWN becomes
// `recovering` (it may hold stale shards) until the repair service has checked it; one that a
// client reports missed a degraded write becomes recovering for that write's container only.
// Containers are not part of the cluster map and do not bump it.
//
// Reload (HA): a mgmt that becomes leader re-reads everything from the shared store, with the
// same grace period for UP targets as at start-up, so a failover marks no target DOWN before
// it had a heartbeat timeout to reach the new leader.
//
// Thread safety: all methods are thread-safe (one mutex; MetaStore commits happen under it).
// Ownership: the MetaStore is borrowed and must outlive the ClusterState.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mgmt/meta_store.h"
#include "penstock/mgmt.pb.h"
#include "penstock/redundancy.h"
#include "penstock/status.h"

namespace penstock::mgmt {

// Wall-clock time in ms since the Unix epoch; injected so tests control time.
using NowMsFn = std::function<int64_t()>;
int64_t SystemNowMs();

struct ClusterStateOptions {
  // A target silent for longer than this is marked DOWN by CheckLiveness.
  int64_t heartbeat_timeout_ms = 5000;
  // A target silent for longer than this is declared LOST by CheckLiveness (its data is
  // rebuilt elsewhere); 0: never automatically (only MarkTargetLost).
  int64_t lost_timeout_ms = 0;
  // The orphan grace period for a new cluster (ClusterMap.orphan_grace_ms); 0: kOrphanGrace.
  // A cluster keeps the one it was made with (a different value is logged and ignored).
  int64_t orphan_grace_ms = 0;
  NowMsFn now_ms = SystemNowMs;
};

// Result of RegisterTarget.
struct Registration {
  uint32_t target_id = 0;
  uint64_t epoch = 0;
  uint64_t placement_epoch = 0;  // see placement_epoch()
};

// Counts for `penstock status` and the mgmt metrics.
struct ClusterSummary {
  uint64_t epoch = 0;
  uint32_t targets_up = 0;
  uint32_t targets_down = 0;
  uint32_t targets_lost = 0;
  uint32_t containers = 0;
};

class ClusterState {
 public:
  // Loads the state recorded in `store` (an empty store is a new cluster at epoch 0).
  // Errors: those of the store; kDataLoss when a record cannot be parsed.
  static Result<std::unique_ptr<ClusterState>> Load(MetaStore* store, ClusterStateOptions options);

  // A new uuid gets the next id (from 1) and bumps the epoch; a known uuid keeps its id, takes
  // the new addresses, capacity and fault domain, becomes UP, and bumps the epoch if anything
  // in the map changed.
  // Errors: kInvalidArgument for an empty uuid or an address that is not "host:port".
  Result<Registration> RegisterTarget(const v1::RegisterTargetRequest& req);

  // Records usage and liveness; a DOWN target becomes UP (epoch bump). Returns the epoch.
  // Errors: kNotFound when the id is unknown or belongs to another uuid (re-register).
  Result<uint64_t> Heartbeat(const v1::HeartbeatRequest& req);

  // Marks DOWN every UP target whose last heartbeat is older than the timeout at `now_ms`, and
  // LOST every DOWN one silent for longer than lost_timeout_ms (when set), with one epoch bump
  // for all of them. Returns how many changed state.
  Result<int> CheckLiveness(int64_t now_ms);

  // Records that targets missed a write to container `container_id` that a client acknowledged
  // degraded. UP ones become recovering for that container (Target.recovering_containers; with
  // container 0, recovering for all), one epoch bump for all; for every one the time of the
  // report is kept, so that a repair pass that started before it cannot clear the flag (its
  // listing may predate the write). Lost targets are left as they are; DOWN ones get the
  // container entry too and become recovering for all when they return. Returns the epoch.
  // Errors: kNotFound for an unknown target or container id.
  Result<uint64_t> MarkRecovering(uint64_t container_id, const std::vector<uint32_t>& ids);
  // After a repair pass that started at map epoch `checked_at_epoch` (and `pass_started` in this
  // process's steady clock) with every target UP: clears `recovering` of the listed targets
  // `ids` (pass clean in every container) and the recovering-for-container entries of the
  // containers in `containers` (checked clean), of UP targets, that were set at or before that
  // epoch and had no missed write reported since the pass started. Entries for containers that
  // no longer exist go too.
  Result<uint64_t> MarkRecovered(const std::vector<uint32_t>& ids, const std::vector<uint64_t>& containers,
                                 uint64_t checked_at_epoch, std::chrono::steady_clock::time_point pass_started);

  // After a repair pass that started with placement epoch `placement_epoch` and found every
  // stripe and head of every container on that placement's slots (copies moved there):
  // ClusterMap.settled_placement_epoch becomes it (never goes back; epoch bump), and readers stop
  // asking where earlier placements put shards. Returns the epoch.
  Result<uint64_t> MarkPlacementSettled(uint64_t placement_epoch);

  // Declares target `id` lost for good (epoch bump): placement gives its slots to others and
  // repair rebuilds its shards there; it may not register again. Returns the new epoch.
  // Errors: kNotFound for an unknown id.
  Result<uint64_t> MarkTargetLost(uint32_t id);

  // Lost objects (cluster_state_lost.cc). Records what `loss` names (each object, and a marker
  // for each container it says lost objects unnamed) as lost at `now_ms`, durably, in one batch.
  Status RecordLostObjects(const v1::LossReport& loss, int64_t now_ms);
  // The records of container `container_id` (0: every container), or of object `name` in it
  // when not empty (and the container's unnamed marker), at most `limit` of them (0: all);
  // `total` counts them all.
  Result<v1::ListLostObjectsResponse> ListLostObjects(uint64_t container_id, const std::string& name,
                                                      uint32_t limit) const;
  // How many objects are recorded lost (markers not counted).
  Result<uint64_t> LostObjectCount() const;
  // Drops the record of object `name` of container `container_id` (its name was written again
  // or deleted since).
  Status ForgetLostObject(uint64_t container_id, const std::string& name);

  // Drops the in-memory state and loads it again from the store (see Reload above). On error
  // the state is left empty at epoch 0; call Reload again.
  Status Reload();

  // Blocks until the epoch exceeds `known` or `timeout` passes; returns the current epoch.
  uint64_t WaitForEpochAbove(uint64_t known, std::chrono::milliseconds timeout) const;

  v1::ClusterMap GetClusterMap() const;
  // The newest epoch at which placement changed (a target registered for the first time,
  // changed fault domain or was declared LOST): ClusterMap.placement_epoch.
  uint64_t placement_epoch() const;
  ClusterSummary Summary() const;
  int64_t heartbeat_timeout_ms() const { return options_.heartbeat_timeout_ms; }

  // Creates a container; no redundancy means the strongest standard scheme the cluster holds
  // now (DefaultRedundancy), stripe_unit 0 means 1 MiB. `min_durable` (when not 0) sets the
  // write quorum; the stored scheme always has its min_durable set (the scheme's default when
  // it came as 0).
  // Errors: kInvalidArgument (name, stripe unit — see container_rules.h; redundancy —
  // ValidateRedundancy);
  // kFailedPrecondition when the redundancy needs more targets than the cluster has (not LOST);
  // kAlreadyExists "container 'x' already exists".
  // `tenant_id` owns it (0: the built-in default tenant).
  Result<v1::Container> CreateContainer(const std::string& name, std::optional<Redundancy> redundancy,
                                        uint64_t stripe_unit, uint64_t tenant_id = 0, uint32_t min_durable = 0);
  // Errors: kNotFound "container 'x' does not exist; create it with `penstock container create x`".
  Result<v1::Container> GetContainer(const std::string& name) const;
  // Errors: kNotFound "container id N does not exist".
  Result<v1::Container> GetContainerById(uint64_t id) const;
  // Whether container id `id` belonged to a container this cluster deleted (each deletion is
  // recorded in the meta store; ids are never reused).
  bool ContainerIdRetired(uint64_t id) const;
  // Every such id, in order.
  std::vector<uint64_t> DeletedContainerIds() const;
  // All containers, ordered by name.
  std::vector<v1::Container> ListContainers() const;
  // Errors: kNotFound as GetContainer.
  Status DeleteContainer(const std::string& name);

 private:
  ClusterState(MetaStore* store, ClusterStateOptions options);
  Status LoadLocked();
  // Adds `epoch` to `batch` and commits it; callers apply the in-memory change only after
  // this returns OK.
  Status CommitLocked(WriteBatch& batch, uint64_t epoch);
  // Commits the new records `next` (by target id) with one epoch bump, then applies them in
  // memory. Nothing changes on error. Returns the new epoch.
  Result<uint64_t> CommitTargetsLocked(const std::map<uint32_t, v1::Target>& next);
  uint64_t PlacementEpochLocked() const;

  MetaStore* const store_;
  const ClusterStateOptions options_;

  mutable std::mutex mu_;
  mutable std::condition_variable epoch_cv_;       // notified on every commit and reload
  uint64_t epoch_ = 0;                             // guarded by mu_
  uint32_t next_target_id_ = 1;                    // guarded by mu_
  uint64_t next_container_id_ = 1;                 // guarded by mu_
  uint64_t orphan_grace_ms_ = 0;                   // guarded by mu_
  uint64_t settled_placement_epoch_ = 0;           // guarded by mu_; ClusterMap.settled_placement_epoch
  std::map<uint32_t, v1::Target> targets_;         // by id; guarded by mu_
  std::map<std::string, uint32_t> target_by_uuid_; // guarded by mu_
  // Last missed-write report per target (in memory: a new leader's passes all start after it).
  std::map<uint32_t, std::chrono::steady_clock::time_point> missed_at_;  // guarded by mu_
  // The same per (target, container).
  std::map<std::pair<uint32_t, uint64_t>, std::chrono::steady_clock::time_point> missed_in_at_;  // guarded by mu_
  std::map<std::string, v1::Container> containers_;  // by name; guarded by mu_
  std::set<uint64_t> deleted_containers_;            // ids of deleted containers; guarded by mu_
};

}  // namespace penstock::mgmt
