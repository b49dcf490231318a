// cluster_state_recovery.cc — what repair and clients tell ClusterState about data: targets that
// missed writes become recovering (for every container or for one), a clean repair pass clears
// that, and a pass that found every shard where the newest placement puts it settles it.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "mgmt/cluster_state.h"
#include "mgmt/cluster_state_keys.h"

namespace penstock::mgmt {

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

}  // namespace penstock::mgmt
