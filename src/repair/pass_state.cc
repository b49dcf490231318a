#include "repair/pass_state.h"

#include <utility>

namespace penstock {

PassState::PassState(v1::ClusterMap m, std::chrono::steady_clock::time_point started_at,
                     std::chrono::milliseconds default_grace)
    : map(std::move(m)), started(started_at) {
  for (const auto& t : map.targets()) {
    for (const auto& k : t.corrupt_shards()) corrupt.emplace(t.id(), k);
    if (t.recovering() && t.state() == v1::TARGET_STATE_UP) recovering.push_back(t.id());
    any_recovering |= t.recovering() || t.recovering_containers_size() > 0;
  }
  for (const auto& t : map.targets()) {
    if (t.state() == v1::TARGET_STATE_DOWN) all_up = false;
    if (t.state() == v1::TARGET_STATE_LOST) ++lost_targets;
  }
  moves_done = all_up;
  grace = map.orphan_grace_ms() > 0 ? std::chrono::milliseconds(map.orphan_grace_ms()) : default_grace;
}

}  // namespace penstock
