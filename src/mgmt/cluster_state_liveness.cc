// cluster_state_liveness.cc — ClusterState's failure detector: UP targets that stopped
// heartbeating become DOWN, DOWN ones silent for long enough (or named by an operator) LOST.
#include <string>
#include <vector>

#include "common/log.h"
#include "mgmt/cluster_state.h"
#include "mgmt/cluster_state_keys.h"

namespace penstock::mgmt {

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

}  // namespace penstock::mgmt
