// placement.h — where a shard lives: a pure function of the cluster map.
//
// Rendezvous (highest-random-weight) hashing: every member target gets a score
// hash(container, object, stripe, target uuid) and the highest score wins. Any client computes
// it alone (no lookup service on the data path); adding or removing a target moves only the
// stripes that must move (those whose winner changed), about 1/N of them.
//
// Members are the targets registered in the map, up or down: a target that is down for a
// restart keeps its stripes (reads of them wait, or degrade to the other shards of a
// protected stripe, until it returns) instead of having them silently re-placed onto targets
// that do not hold the data. Only a target declared lost gives its slots away (PlaceSlots);
// rebuild then fills them from redundancy. Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace penstock {

struct PlacementTarget {
  uint32_t id = 0;
  std::string uuid;  // stable identity: placement survives address changes
  uint32_t weight = 1;
  std::string fault_domain{};  // empty: the target is its own domain
  bool lost = false;         // declared lost: holds nothing, its slots go to substitutes
};

struct PlacementKey {
  uint64_t container = 0;
  uint64_t object_hi = 0;
  uint64_t object_lo = 0;
  uint64_t stripe = 0;
};

// 64-bit hash of a key for one target (exposed for tests).
uint64_t PlacementScore(const PlacementKey& key, const std::string& target_uuid);

// Index into `targets` of the `count` best targets for `key`, best first (count is clamped to
// targets.size()). Deterministic for the same inputs regardless of the order of `targets`.
std::vector<size_t> PlaceShards(const PlacementKey& key, std::span<const PlacementTarget> targets,
                                size_t count);

// The `width` slots of a protected stripe (shard i lives on slot i), as indexes into `targets`.
// Slots are the best-ranked targets in distinct fault domains (when there are fewer domains
// than slots the rest are the best-ranked remaining targets); a slot whose target is lost goes
// to the next-ranked target that is neither lost nor already a slot, preferring an unused fault
// domain. So losing a target moves only the shards it held, and adding one moves about
// width/N of them. A slot that no usable target is left for is SIZE_MAX (slot indexes never
// shift); fewer than `width` entries only when the map has fewer targets than `width`.
std::vector<size_t> PlaceSlots(const PlacementKey& key, std::span<const PlacementTarget> targets,
                               size_t width);

// The single best target; `targets` must not be empty.
size_t PlaceShard(const PlacementKey& key, std::span<const PlacementTarget> targets);

}  // namespace penstock
