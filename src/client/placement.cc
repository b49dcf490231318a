#include "client/placement.h"

#include <algorithm>
#include <cmath>

namespace penstock {

namespace {

// SplitMix64 finaliser: a fast, well-mixed 64-bit permutation.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t HashString(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then mixed
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return Mix(h);
}

}  // namespace

uint64_t PlacementScore(const PlacementKey& key, const std::string& target_uuid) {
  uint64_t h = HashString(target_uuid);
  h = Mix(h ^ key.container);
  h = Mix(h ^ key.object_hi);
  h = Mix(h ^ key.object_lo);
  h = Mix(h ^ key.stripe);
  return h;
}

namespace {

// Weighted rendezvous: score = -weight / ln(u), u uniform in (0,1) from the hash.
double WeightedScore(const PlacementKey& key, const PlacementTarget& t) {
  uint64_t h = PlacementScore(key, t.uuid);
  double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;  // (0,1)
  return -static_cast<double>(t.weight == 0 ? 1 : t.weight) / std::log(u);
}

}  // namespace

std::vector<size_t> PlaceShards(const PlacementKey& key, std::span<const PlacementTarget> targets,
                                size_t count) {
  std::vector<std::pair<double, size_t>> scored;
  scored.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) scored.emplace_back(WeightedScore(key, targets[i]), i);
  count = std::min(count, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(count), scored.end(),
                    [&](const auto& a, const auto& b) {
                      if (a.first != b.first) return a.first > b.first;
                      return targets[a.second].uuid < targets[b.second].uuid;
                    });
  std::vector<size_t> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(scored[i].second);
  return out;
}

std::vector<size_t> PlaceSlots(const PlacementKey& key, std::span<const PlacementTarget> targets,
                               size_t width) {
  const std::vector<size_t> ranked = PlaceShards(key, targets, targets.size());
  auto domain = [&](size_t i) -> const std::string& {
    return targets[i].fault_domain.empty() ? targets[i].uuid : targets[i].fault_domain;
  };
  std::vector<size_t> slots;
  slots.reserve(width);
  std::vector<bool> taken(targets.size(), false);
  std::vector<const std::string*> domains;  // the targets' own strings: no copy per placement
  domains.reserve(width);
  auto used = [&](const std::string& d) {
    return std::any_of(domains.begin(), domains.end(), [&](const std::string* u) { return *u == d; });
  };
  // Best-ranked targets in distinct domains (lost ones keep their rank, so others do not shift).
  for (size_t i : ranked) {
    if (slots.size() == width) break;
    if (used(domain(i))) continue;
    slots.push_back(i);
    taken[i] = true;
    domains.push_back(&domain(i));
  }
  for (size_t i : ranked) {  // not enough domains: fill in rank order
    if (slots.size() == width) break;
    if (taken[i]) continue;
    slots.push_back(i);
    taken[i] = true;
  }
  // Substitutes for lost slots.
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!targets[slots[s]].lost) continue;
    size_t pick = SIZE_MAX;
    for (int pass = 0; pass < 2 && pick == SIZE_MAX; ++pass) {
      for (size_t i : ranked) {
        if (taken[i] || targets[i].lost) continue;
        if (pass == 0 && used(domain(i))) continue;
        pick = i;
        break;
      }
    }
    if (pick == SIZE_MAX) {
      slots[s] = SIZE_MAX;
      continue;
    }
    taken[pick] = true;
    domains.push_back(&domain(pick));
    slots[s] = pick;
  }
  return slots;
}

size_t PlaceShard(const PlacementKey& key, std::span<const PlacementTarget> targets) {
  return PlaceShards(key, targets, 1).front();
}

}  // namespace penstock
