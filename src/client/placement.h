// placement.h — where a shard lives: a pure function of the cluster map.
//
// Rendezvous (highest-random-weight) hashing: every member target gets a score
// hash(container, object, stripe, target uuid) and the highest score wins. Any client computes
// it alone (no lookup service on the data path); adding or removing a target moves only the
// stripes that must move (those whose winner changed), about 1/N of them.
//
// Members are the targets registered in the map, up or down: a target that is down for a
// restart keeps its stripes (reads of them wait or fail until it returns) instead of having
// them silently re-placed onto targets that do not hold the data. Re-placement belongs to
// rebuild, which needs redundancy. Thread-safe (pure functions).
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

// The single best target; `targets` must not be empty.
size_t PlaceShard(const PlacementKey& key, std::span<const PlacementTarget> targets);

}  // namespace penstock
