#include "engine/segment_owners.h"

#include <set>

#include "engine/block_map.h"

namespace penstock::engine {

void SegmentOwners::Put(const ShardKey& key, const BlockRun& run) {
  if (run.hole() || run.segment >= segments_.size()) return;  // Open refuses such records
  if (segments_[run.segment].insert_or_assign(run.offset, key).second) ++entries_;
}

void SegmentOwners::Erase(const ShardKey& key, const BlockRun& run) {
  if (run.hole() || run.segment >= segments_.size()) return;
  auto& segment = segments_[run.segment];
  auto it = segment.find(run.offset);
  if (it != segment.end() && it->second == key) {
    segment.erase(it);
    --entries_;
  }
}

void SegmentOwners::Add(const ShardKey& key, const std::vector<BlockRun>& runs) {
  std::lock_guard lock(mu_);
  for (const BlockRun& run : runs) Put(key, run);
}

void SegmentOwners::Apply(const std::vector<IndexUpdate>& updates) {
  const std::vector<BlockRun> none;
  std::lock_guard lock(mu_);
  for (const IndexUpdate& u : updates) {
    const std::vector<BlockRun>& old_runs = u.old ? u.old->runs : none;
    const std::vector<BlockRun>& new_runs = u.record ? u.record->runs : none;
    for (const BlockRun& run : RunsStartingElsewhere(old_runs, new_runs)) Erase(u.key, run);
    for (const BlockRun& run : RunsStartingElsewhere(new_runs, old_runs)) Put(u.key, run);
  }
}

std::vector<ShardKey> SegmentOwners::Owners(uint32_t segment) const {
  std::vector<ShardKey> out;
  std::set<ShardKey> seen;
  std::lock_guard lock(mu_);
  if (segment >= segments_.size()) return out;
  for (const auto& [offset, key] : segments_[segment]) {
    if (seen.insert(key).second) out.push_back(key);
  }
  return out;
}

uint64_t SegmentOwners::Entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

}  // namespace penstock::engine
