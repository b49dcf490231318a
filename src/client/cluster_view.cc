#include "client/cluster_view.h"

#include <functional>
#include <set>

#include "mgmt_client/mgmt_client.h"

namespace penstock {

Status ClusterView::Refresh() {
  if (mgmt_ == nullptr) return OkStatus();
  PS_ASSIGN_OR_RETURN(v1::ClusterMap map, mgmt_->GetClusterMap());
  Apply(map);
  return OkStatus();
}

void ClusterView::Apply(const v1::ClusterMap& map) {
  std::vector<TargetRef> targets;
  for (const auto& t : map.targets()) {
    targets.push_back({t.id(), t.uuid(), t.address(), t.state() == v1::TARGET_STATE_UP,
                       t.state() == v1::TARGET_STATE_LOST, t.fault_domain(), t.recovering()});
    for (const auto& rc : t.recovering_containers()) targets.back().recovering_for.push_back(rc.container_id());
    targets.back().joined_epoch = t.joined_epoch();
  }
  Replace(map.epoch(), std::move(targets), static_cast<int64_t>(map.orphan_grace_ms()), map.settled_placement_epoch());
}

void ClusterView::Set(uint64_t epoch, std::vector<TargetRef> targets, uint64_t settled_placement_epoch) {
  Replace(epoch, std::move(targets), std::nullopt, settled_placement_epoch);
}

void ClusterView::Replace(uint64_t epoch, std::vector<TargetRef> targets, std::optional<int64_t> orphan_grace_ms,
                          uint64_t settled_placement_epoch) {
  std::vector<PlacementTarget> placement;
  for (const auto& t : targets) placement.push_back({t.id, t.uuid, 1, t.fault_domain, t.lost});
  // One earlier placement per join not settled yet: the one just before it (without the
  // targets that joined at or after it). A few at most: repair settles them in its next passes.
  std::set<uint64_t, std::greater<>> joins;
  for (const auto& t : targets) {
    if (t.joined_epoch > settled_placement_epoch && !t.lost) joins.insert(t.joined_epoch);
  }
  std::vector<Earlier> earlier;
  for (uint64_t join : joins) {
    Earlier e;
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i].joined_epoch >= join) continue;
      e.members.push_back(i);
      e.placement.push_back(placement[i]);
    }
    if (e.members.empty()) break;  // before the first target: nothing was placed
    earlier.push_back(std::move(e));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch < epoch_) return;  // a refresh and the watch may race: never go back
  epoch_ = epoch;
  targets_ = std::move(targets);
  placement_ = std::move(placement);
  earlier_ = std::move(earlier);
  has_earlier_ = !earlier_.empty();
  if (orphan_grace_ms) orphan_grace_ms_ = *orphan_grace_ms;
}

std::vector<std::vector<TargetRef>> ClusterView::EarlierSlots(const PlacementKey& key, size_t width) const {
  std::vector<std::vector<TargetRef>> out;
  if (!has_earlier_placements()) return out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Earlier& e : earlier_) {
    std::vector<TargetRef> slots;
    for (size_t i : PlaceSlots(key, e.placement, width)) {
      if (i == SIZE_MAX) {
        TargetRef none;
        none.lost = true;
        slots.push_back(none);
      } else {
        slots.push_back(targets_[e.members[i]]);
      }
    }
    out.push_back(std::move(slots));
  }
  return out;
}

Result<TargetRef> ClusterView::Locate(const PlacementKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (placement_.empty()) {
    return Unavailable("the cluster has no targets; start some with `penstock target` or `penstock up`");
  }
  auto slots = PlaceSlots(key, placement_, 1);
  if (slots.empty() || slots.front() == SIZE_MAX) return Unavailable("every target of the cluster is lost; add targets");
  return targets_[slots.front()];
}

Result<std::vector<TargetRef>> ClusterView::LocateSlots(const PlacementKey& key, size_t width) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (placement_.empty()) {
    return Unavailable("the cluster has no targets; start some with `penstock target` or `penstock up`");
  }
  std::vector<TargetRef> out;
  for (size_t i : PlaceSlots(key, placement_, width)) {
    if (i == SIZE_MAX) {
      TargetRef none;
      none.lost = true;  // no target for this slot: treated as lost (never up)
      out.push_back(none);
    } else {
      out.push_back(targets_[i]);
    }
  }
  return out;
}

std::vector<TargetRef> ClusterView::targets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return targets_;
}

bool ClusterView::IsUp(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& t : targets_) {
    if (t.id == id) return t.up;
  }
  return false;
}

uint64_t ClusterView::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

}  // namespace penstock
