// cluster_view.h — the client's cached copy of the cluster map and the placement over it.
//
// Loaded from mgmt at connect, kept current by mgmt's map stream (WatchClusterMap) and
// refreshed on demand after a target error. Lookups return copies, so a refresh never invalidates what a caller
// holds. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/placement.h"
#include "penstock/status.h"

namespace penstock {

class MgmtClient;
namespace v1 {
class ClusterMap;
}

struct TargetRef {
  uint32_t id = 0;
  std::string uuid;
  std::string address;  // data plane host:port
  bool up = false;
  bool lost = false;  // declared lost: never read from or written to
  std::string fault_domain{};
  bool recovering = false;  // may hold stale shards until repaired: written to, not read from
  // The same for these containers only (a write to them missed it).
  std::vector<uint64_t> recovering_for{};
  // Map epoch of its first registration (Target.joined_epoch; 0: long ago).
  uint64_t joined_epoch = 0;

  // A write to `container` is known to have missed it: never read from it, not even as a
  // last resort.
  bool MissedWritesIn(uint64_t container) const {
    return std::find(recovering_for.begin(), recovering_for.end(), container) != recovering_for.end();
  }
  bool RecoveringFor(uint64_t container) const { return recovering || MissedWritesIn(container); }
};

class ClusterView {
 public:
  // `mgmt` is borrowed and must outlive the view; null for a view fed only by Set().
  explicit ClusterView(MgmtClient* mgmt) : mgmt_(mgmt) {}

  // Fetches the current map from mgmt (a no-op for a view built without mgmt).
  Status Refresh();

  // Replaces the map unless `epoch` is older than the one held (map pushes from mgmt's
  // WatchClusterMap, tests). `settled_placement_epoch` as ClusterMap's: targets that joined
  // after it make earlier placements (EarlierSlots); the default has none.
  void Set(uint64_t epoch, std::vector<TargetRef> targets, uint64_t settled_placement_epoch = UINT64_MAX);
  void Apply(const v1::ClusterMap& map);

  // Target holding `key` (rendezvous over all member targets).
  // Errors: kUnavailable when the map has no targets.
  Result<TargetRef> Locate(const PlacementKey& key) const;

  // The slots of a protected stripe (slot i holds shard i; see PlaceSlots). A slot without a
  // usable target is a TargetRef with id 0, lost and not up; fewer than `width` only when the
  // map has fewer targets. Errors: kUnavailable when the map has no targets.
  Result<std::vector<TargetRef>> LocateSlots(const PlacementKey& key, size_t width) const;

  // Where placements before the joins repair has not finished moving data for put the slots
  // of `key` (ClusterMap.settled_placement_epoch): one slot list per earlier placement, the
  // newest first (each without the targets that joined after it; slots as LocateSlots gives
  // them, width 1 for an unprotected stripe). Empty when every join is settled. A shard a slot
  // does not hold may still be on slot i of one of these; readers ask there before they count
  // it missing.
  std::vector<std::vector<TargetRef>> EarlierSlots(const PlacementKey& key, size_t width) const;
  bool has_earlier_placements() const { return has_earlier_.load(std::memory_order_relaxed); }

  std::vector<TargetRef> targets() const;
  // ClusterMap.orphan_grace_ms (0 before a map from mgmt).
  std::chrono::milliseconds orphan_grace() const { return std::chrono::milliseconds(orphan_grace_ms_.load()); }
  // Whether the map marks target `id` up (false for an unknown id).
  bool IsUp(uint32_t id) const;
  uint64_t epoch() const;

 private:
  // Set, and the orphan grace when given (Apply); nothing when `epoch` is older than the held one.
  void Replace(uint64_t epoch, std::vector<TargetRef> targets, std::optional<int64_t> orphan_grace_ms,
               uint64_t settled_placement_epoch);

  MgmtClient* mgmt_;
  mutable std::mutex mu_;
  uint64_t epoch_ = 0;
  std::vector<TargetRef> targets_;
  std::vector<PlacementTarget> placement_;
  // Earlier placements, newest first: the member targets (indexes into targets_) and their
  // placement entries.
  struct Earlier {
    std::vector<size_t> members;
    std::vector<PlacementTarget> placement;
  };
  std::vector<Earlier> earlier_;
  std::atomic<bool> has_earlier_{false};
  std::atomic<int64_t> orphan_grace_ms_{0};
};

}  // namespace penstock
