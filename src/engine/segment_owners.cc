#include "engine/segment_owners.h"

#include <algorithm>
#include <set>

#include "engine/block_map.h"

namespace penstock::engine {

namespace {

template <typename Entries>
auto AtOffset(Entries& entries, uint64_t offset) {
  return std::lower_bound(entries.begin(), entries.end(), offset,
                          [](const auto& e, uint64_t o) { return e.offset < o; });
}

}  // namespace

void SegmentOwners::Sort(Segment& segment) const {
  if (segment.sorted) return;
  std::vector<Entry>& v = segment.entries;
  std::stable_sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.offset < b.offset; });
  // One entry per offset, the last added (a map's insert_or_assign), live ones only.
  size_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i + 1 < v.size() && v[i + 1].offset == v[i].offset) {
      if (v[i].live) --entries_;
      continue;
    }
    if (v[i].live) v[out++] = v[i];
  }
  v.resize(out);
  segment.dead = 0;
  segment.sorted = true;
}

void SegmentOwners::Put(const ShardKey& key, const BlockRun& run) {
  if (run.hole() || run.segment >= segments_.size()) return;  // Open refuses such records
  Segment& segment = segments_[run.segment];
  Sort(segment);
  std::vector<Entry>& v = segment.entries;
  if (v.empty() || v.back().offset < run.offset) {  // the usual case: the log appends
    v.push_back({.offset = run.offset, .key = key});
    ++entries_;
    return;
  }
  auto it = AtOffset(v, run.offset);
  if (it != v.end() && it->offset == run.offset) {
    if (!it->live) {
      it->live = true;
      --segment.dead;
      ++entries_;
    }
    it->key = key;
    return;
  }
  v.insert(it, {.offset = run.offset, .key = key});
  ++entries_;
}

void SegmentOwners::Erase(const ShardKey& key, const BlockRun& run) {
  if (run.hole() || run.segment >= segments_.size()) return;
  Segment& segment = segments_[run.segment];
  Sort(segment);
  std::vector<Entry>& v = segment.entries;
  auto it = AtOffset(v, run.offset);
  if (it == v.end() || it->offset != run.offset || !it->live || it->key != key) return;
  it->live = false;
  ++segment.dead;
  --entries_;
  if (segment.dead > 64 && segment.dead * 2 > v.size()) {
    std::erase_if(v, [](const Entry& e) { return !e.live; });
    segment.dead = 0;
    if (v.capacity() > 4 * v.size() + 64) v.shrink_to_fit();
  }
}

void SegmentOwners::Add(const ShardKey& key, const std::vector<BlockRun>& runs) {
  std::lock_guard lock(mu_);
  for (const BlockRun& run : runs) {  // appended as they come (key order); sorted when next used
    if (run.hole() || run.segment >= segments_.size()) continue;
    Segment& segment = segments_[run.segment];
    if (!segment.entries.empty() && segment.entries.back().offset >= run.offset) segment.sorted = false;
    segment.entries.push_back({.offset = run.offset, .key = key});
    ++entries_;
  }
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
  Sort(segments_[segment]);
  for (const Entry& e : segments_[segment].entries) {
    if (e.live && seen.insert(e.key).second) out.push_back(e.key);
  }
  return out;
}

uint64_t SegmentOwners::Entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

}  // namespace penstock::engine
