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

void SegmentOwners::Rechunk(Segment& segment, std::vector<Entry> live) {
  segment.chunks.clear();
  segment.size = live.size();
  segment.dead = 0;
  if (live.size() <= kChunk) {
    if (!live.empty()) segment.chunks.push_back(std::move(live));
    return;
  }
  for (size_t i = 0; i < live.size(); i += kChunk) {
    const auto first = live.begin() + static_cast<std::ptrdiff_t>(i);
    segment.chunks.emplace_back(first, first + static_cast<std::ptrdiff_t>(std::min(kChunk, live.size() - i)));
  }
}

std::vector<SegmentOwners::Chunk>::iterator SegmentOwners::ChunkFor(Segment& segment, uint64_t offset) {
  auto it = std::upper_bound(segment.chunks.begin(), segment.chunks.end(), offset,
                             [](uint64_t o, const Chunk& c) { return o < c.front().offset; });
  return it == segment.chunks.begin() ? it : it - 1;
}

void SegmentOwners::Sort(Segment& segment) const {
  if (segment.added.empty()) return;
  std::vector<Entry> v;
  v.reserve(segment.size + segment.added.size());
  for (Chunk& c : segment.chunks) v.insert(v.end(), c.begin(), c.end());
  v.insert(v.end(), segment.added.begin(), segment.added.end());
  segment.added.clear();
  segment.added.shrink_to_fit();
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
  Rechunk(segment, std::move(v));
}

void SegmentOwners::Put(const ShardKey& key, const BlockRun& run) {
  if (run.hole() || run.segment >= segments_.size()) return;  // Open refuses such records
  Segment& segment = segments_[run.segment];
  Sort(segment);
  const Entry entry{.offset = run.offset, .key = key};
  if (segment.chunks.empty() || segment.chunks.back().back().offset < run.offset) {  // the log appends
    if (segment.chunks.empty() || segment.chunks.back().size() >= kChunk) {
      segment.chunks.push_back({entry});
    } else {
      segment.chunks.back().push_back(entry);
    }
    ++segment.size;
    ++entries_;
    return;
  }
  auto chunk = ChunkFor(segment, run.offset);
  auto it = AtOffset(*chunk, run.offset);
  if (it != chunk->end() && it->offset == run.offset) {
    if (!it->live) {
      it->live = true;
      --segment.dead;
      ++entries_;
    }
    it->key = key;
    return;
  }
  chunk->insert(it, entry);
  ++segment.size;
  ++entries_;
  if (chunk->size() > 2 * kChunk) {  // split in halves
    const auto half = chunk->begin() + static_cast<std::ptrdiff_t>(chunk->size() / 2);
    Chunk upper(half, chunk->end());
    chunk->erase(half, chunk->end());
    segment.chunks.insert(chunk + 1, std::move(upper));
  }
}

void SegmentOwners::Erase(const ShardKey& key, const BlockRun& run) {
  if (run.hole() || run.segment >= segments_.size()) return;
  Segment& segment = segments_[run.segment];
  Sort(segment);
  if (segment.chunks.empty()) return;
  Chunk& chunk = *ChunkFor(segment, run.offset);
  auto it = AtOffset(chunk, run.offset);
  if (it == chunk.end() || it->offset != run.offset || !it->live || it->key != key) return;
  it->live = false;
  ++segment.dead;
  --entries_;
  if (segment.dead > 64 && segment.dead * 2 > segment.size) {
    std::vector<Entry> live;
    live.reserve(segment.size - segment.dead);
    for (const Chunk& c : segment.chunks) {
      for (const Entry& e : c) {
        if (e.live) live.push_back(e);
      }
    }
    Rechunk(segment, std::move(live));
  }
}

void SegmentOwners::Add(const ShardKey& key, const std::vector<BlockRun>& runs) {
  std::lock_guard lock(mu_);
  for (const BlockRun& run : runs) {  // kept as they come (key order); merged when next used
    if (run.hole() || run.segment >= segments_.size()) continue;
    segments_[run.segment].added.push_back({.offset = run.offset, .key = key});
    ++entries_;
  }
}

void SegmentOwners::Apply(const std::vector<IndexUpdate>& updates) {
  const std::vector<BlockRun> none;
  std::lock_guard lock(mu_);
  for (const IndexUpdate& u : updates) {
    if (u.range_write && u.old && u.record) {  // only the runs around the written blocks
      const RunChanges c = RangeWriteRunChanges(*u.old, *u.record, u.written_begin, u.written_end);
      for (const BlockRun& run : c.gone) Erase(u.key, run);
      for (const BlockRun& run : c.came) Put(u.key, run);
      continue;
    }
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
  for (const Chunk& c : segments_[segment].chunks) {
    for (const Entry& e : c) {
      if (e.live && seen.insert(e.key).second) out.push_back(e.key);
    }
  }
  return out;
}

uint64_t SegmentOwners::Entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

}  // namespace penstock::engine
