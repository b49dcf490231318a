#include "engine/block_map.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <tuple>
#include <utility>

#include "common/crc32c.h"

namespace penstock::engine {

uint32_t ZeroBlockCrc() {
  static const uint32_t crc = [] {
    static const std::array<std::byte, kBlockSize> zeros{};
    return Crc32c(std::span<const std::byte>(zeros));
  }();
  return crc;
}

namespace {

// Joins, in place, the neighbouring runs of runs[from, to) that continue each other; the runs
// after `to` move down over those joined away.
void JoinRunsIn(std::vector<BlockRun>& runs, size_t from, size_t to) {
  size_t out = from;  // runs[from, out) are done
  for (size_t i = from; i < to; ++i) {
    const BlockRun run = runs[i];
    if (out > from) {
      BlockRun& last = runs[out - 1];
      const bool joins = last.hole()
                             ? run.hole()
                             : run.segment == last.segment &&
                                   last.offset + last.block_count * kBlockSize == run.offset;
      if (joins && last.end_block() == run.first_block) {
        last.block_count += run.block_count;
        continue;
      }
    }
    runs[out++] = run;
  }
  runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(out), runs.begin() + static_cast<std::ptrdiff_t>(to));
}

// The runs of `runs` (in block order) that hold any of blocks [begin, end): indices [lo, hi).
std::pair<size_t, size_t> Overlapping(std::span<const BlockRun> runs, uint64_t begin, uint64_t end) {
  const auto lo = std::partition_point(runs.begin(), runs.end(), [&](const BlockRun& r) { return r.end_block() <= begin; });
  const auto hi = std::partition_point(lo, runs.end(), [&](const BlockRun& r) { return r.first_block < end; });
  return {static_cast<size_t>(lo - runs.begin()), static_cast<size_t>(hi - runs.begin())};
}

// The window of runs a range write of blocks [begin, end) can change in a record of `runs`:
// those overlapping it and one neighbour on each side (the written run may join them).
std::pair<size_t, size_t> RangeWindow(std::span<const BlockRun> runs, uint64_t begin, uint64_t end) {
  const auto [lo, hi] = Overlapping(runs, begin, end);
  return {lo > 0 ? lo - 1 : 0, std::min(hi + 1, runs.size())};
}

}  // namespace

void JoinRuns(std::vector<BlockRun>& runs) { JoinRunsIn(runs, 0, runs.size()); }

namespace {

// Blocks [begin, end) of `run` (which holds them) as a run of their own.
BlockRun Piece(const BlockRun& run, uint64_t begin, uint64_t end) {
  BlockRun piece = run;
  piece.first_block = begin;
  piece.block_count = end - begin;
  if (!run.hole()) piece.offset = run.offset + (begin - run.first_block) * kBlockSize;
  return piece;
}

}  // namespace

ShardRecord ApplyRangeWrite(const ShardRecord* old, uint64_t first_block, uint32_t segment,
                            uint64_t offset, std::span<const uint32_t> crcs, uint64_t end,
                            uint64_t version) {
  // The new record is built beside `old` (not from a copy of it): its runs are rebuilt anyway.
  ShardRecord r;
  if (old) {
    r.length = old->length;
    r.block_crcs = old->block_crcs;
  }
  r.length = std::max(r.length, end);
  r.version = version;
  const uint64_t blocks = BlocksFor(r.length);
  const uint64_t had = r.block_crcs.size();
  const std::span<const BlockRun> old_runs = old ? std::span<const BlockRun>(old->runs) : std::span<const BlockRun>();
  std::optional<BlockRun> new_hole;  // past the old end
  if (blocks > had) {
    r.block_crcs.resize(blocks, ZeroBlockCrc());
    new_hole = BlockRun{.segment = kNoSegment, .offset = 0, .first_block = had, .block_count = blocks - had};
  }
  r.runs.reserve(old_runs.size() + 3);
  if (!crcs.empty() && !new_hole) {
    // Inside the old blocks: the runs before and after the written ones are copied as they
    // are and only those around the written ones are joined, so every other run is the same in
    // both records (RangeWriteRunChanges relies on that). A record is joined when made, so
    // nothing elsewhere could join anyway.
    const uint64_t last = first_block + crcs.size();
    assert(last <= blocks && !old_runs.empty());
    const BlockRun written{.segment = segment, .offset = offset, .first_block = first_block,
                           .block_count = crcs.size()};
    const auto [lo_index, hi_index] = Overlapping(old_runs, first_block, last);
    const auto lo = old_runs.begin() + static_cast<std::ptrdiff_t>(lo_index);
    const auto hi = old_runs.begin() + static_cast<std::ptrdiff_t>(hi_index);
    r.runs.assign(old_runs.begin(), lo);
    if (lo != hi && lo->first_block < first_block) r.runs.push_back(Piece(*lo, lo->first_block, first_block));
    r.runs.push_back(written);
    if (lo != hi && (hi - 1)->end_block() > last) r.runs.push_back(Piece(*(hi - 1), last, (hi - 1)->end_block()));
    const size_t spliced_end = r.runs.size();
    r.runs.insert(r.runs.end(), hi, old_runs.end());
    JoinRunsIn(r.runs, lo_index > 0 ? lo_index - 1 : 0, std::min(spliced_end + 1, r.runs.size()));
    std::copy(crcs.begin(), crcs.end(), r.block_crcs.begin() + static_cast<std::ptrdiff_t>(first_block));
    return r;
  }
  if (crcs.empty()) {
    r.runs.assign(old_runs.begin(), old_runs.end());
    if (new_hole) r.runs.push_back(*new_hole);
  } else {
    const uint64_t last = first_block + crcs.size();
    assert(last <= blocks);
    const BlockRun written{.segment = segment, .offset = offset, .first_block = first_block,
                           .block_count = crcs.size()};
    bool placed = false;
    auto add = [&](const BlockRun& run) {
      if (run.end_block() <= first_block || run.first_block >= last) {
        if (!placed && run.first_block >= last) {
          r.runs.push_back(written);
          placed = true;
        }
        r.runs.push_back(run);
        return;
      }
      if (run.first_block < first_block) r.runs.push_back(Piece(run, run.first_block, first_block));
      if (!placed) {
        r.runs.push_back(written);
        placed = true;
      }
      if (run.end_block() > last) r.runs.push_back(Piece(run, last, run.end_block()));
    };
    for (const BlockRun& run : old_runs) add(run);
    if (new_hole) add(*new_hole);
    if (!placed) r.runs.push_back(written);
    std::copy(crcs.begin(), crcs.end(), r.block_crcs.begin() + static_cast<std::ptrdiff_t>(first_block));
  }
  JoinRuns(r.runs);
  return r;
}

std::vector<Extent> ReleasedSpace(const ShardRecord& old, const ShardRecord* next) {
  std::vector<Extent> out;
  // Both maps are in block order without overlaps, so the runs of `next` that overlap an old
  // run follow those that overlap the run before it: `first` only moves forward.
  size_t first = 0;
  for (const BlockRun& run : old.runs) {
    if (next) {
      while (first < next->runs.size() && next->runs[first].end_block() <= run.first_block) ++first;
    }
    if (run.hole()) continue;
    // Blocks of `run` that `next` still maps to the same device place, in block order.
    uint64_t at = run.first_block;  // the first block not yet classified
    auto release_to = [&](uint64_t to) {
      if (to > at) {
        out.push_back({.segment = run.segment,
                       .offset = run.offset + (at - run.first_block) * kBlockSize,
                       .length = (to - at) * kBlockSize});
      }
    };
    if (next) {
      for (size_t k = first; k < next->runs.size() && next->runs[k].first_block < run.end_block(); ++k) {
        const BlockRun& keep = next->runs[k];
        if (keep.hole() || keep.segment != run.segment) continue;
        const uint64_t begin = std::max(keep.first_block, run.first_block);
        const uint64_t end = std::min(keep.end_block(), run.end_block());
        if (begin >= end) continue;
        // Same place for block `begin` means same place for the whole overlap.
        if (keep.offset + (begin - keep.first_block) * kBlockSize !=
            run.offset + (begin - run.first_block) * kBlockSize) {
          continue;
        }
        release_to(begin);
        at = end;
      }
    }
    release_to(run.end_block());
  }
  return out;
}

namespace {

void AppendRunsStartingElsewhere(std::span<const BlockRun> runs, std::span<const BlockRun> other,
                                 std::vector<BlockRun>& out) {
  // A device place holds one block of the shard in both records (new blocks go to fresh space,
  // never to a place the other record uses), so a start both have is at the same block in
  // both: one pass over the two maps in block order finds them.
  size_t j = 0;
  for (const BlockRun& run : runs) {
    if (run.hole()) continue;
    while (j < other.size() && other[j].first_block < run.first_block) ++j;
    const bool kept = j < other.size() && other[j].first_block == run.first_block &&
                      other[j].segment == run.segment && other[j].offset == run.offset;
    if (!kept) out.push_back(run);
  }
}

}  // namespace

std::vector<BlockRun> RunsStartingElsewhere(const std::vector<BlockRun>& runs,
                                            const std::vector<BlockRun>& other) {
  std::vector<BlockRun> out;
  AppendRunsStartingElsewhere(runs, other, out);
  return out;
}

RunChanges RangeWriteRunChanges(const ShardRecord& old, const ShardRecord& next, uint64_t begin, uint64_t end) {
  RunChanges c;
  const std::vector<BlockRun>& o = old.runs;
  const std::vector<BlockRun>& n = next.runs;
  // ApplyRangeWrite of blocks inside the old ones changes only the window of runs around them
  // and copies the rest: compare the windows. Anything else (an extension past the old end,
  // no blocks written) compares whole.
  const bool inside = begin < end && end <= old.block_crcs.size() && next.block_crcs.size() == old.block_crcs.size();
  size_t o0 = 0, o1 = o.size(), n0 = 0, n1 = n.size();
  if (inside) {
    std::tie(o0, o1) = RangeWindow(o, begin, end);
    const size_t after = o.size() - o1;  // runs copied after the window
    if (o0 + after <= n.size() && (o0 == 0 || o[o0 - 1] == n[o0 - 1]) && (after == 0 || o[o1] == n[n.size() - after])) {
      n0 = o0;
      n1 = n.size() - after;
    } else {
      o0 = n0 = 0;  // not what ApplyRangeWrite makes: whole
      o1 = o.size();
      n1 = n.size();
    }
  }
  const std::span<const BlockRun> ow(o.data() + o0, o1 - o0), nw(n.data() + n0, n1 - n0);
  AppendRunsStartingElsewhere(ow, nw, c.gone);
  AppendRunsStartingElsewhere(nw, ow, c.came);
  return c;
}

std::vector<Extent> RangeWriteReleasedSpace(const ShardRecord& old, uint64_t begin, uint64_t end) {
  std::vector<Extent> out;
  const auto [lo, hi] = Overlapping(old.runs, begin, end);
  for (size_t i = lo; i < hi; ++i) {
    const BlockRun& run = old.runs[i];
    if (run.hole()) continue;
    const uint64_t from = std::max(run.first_block, begin), to = std::min(run.end_block(), end);
    out.push_back({.segment = run.segment,
                   .offset = run.offset + (from - run.first_block) * kBlockSize,
                   .length = (to - from) * kBlockSize});
  }
  return out;
}

const BlockRun* RunHolding(const ShardRecord& record, uint64_t block) {
  auto after = std::upper_bound(record.runs.begin(), record.runs.end(), block,
                                [](uint64_t b, const BlockRun& r) { return b < r.first_block; });
  if (after == record.runs.begin()) return nullptr;
  const BlockRun& run = *std::prev(after);
  return block < run.end_block() ? &run : nullptr;
}

std::vector<Extent> OwnedSpace(const ShardRecord& record) {
  std::vector<Extent> out;
  for (const BlockRun& run : record.runs) {
    if (!run.hole()) out.push_back({run.segment, run.offset, run.block_count * kBlockSize});
  }
  return out;
}

ShardRecord Relocated(const ShardRecord& record, uint32_t from, uint32_t segment, uint64_t offset) {
  ShardRecord r = record;
  for (BlockRun& run : r.runs) {
    if (run.hole() || run.segment != from) continue;
    run.segment = segment;
    run.offset = offset;
    offset += run.block_count * kBlockSize;
  }
  JoinRuns(r.runs);
  return r;
}

ShardRecord ApplyMove(const ShardRecord& current, const ShardRecord& read, const ShardRecord& moved,
                      uint32_t from) {
  ShardRecord r = current;
  std::vector<BlockRun> runs;
  for (const BlockRun& run : current.runs) {
    if (run.segment != from) {
      runs.push_back(run);
      continue;
    }
    for (uint64_t b = run.first_block; b < run.end_block(); ++b) {
      const uint64_t at = run.offset + (b - run.first_block) * kBlockSize;
      BlockRun one{.segment = from, .offset = at, .first_block = b, .block_count = 1};
      if (BlockPlace(read, b) == std::pair{from, at}) {
        if (auto to = BlockPlace(moved, b)) {
          one.segment = to->first;
          one.offset = to->second;
        }
      }
      runs.push_back(one);
    }
  }
  JoinRuns(runs);
  r.runs = std::move(runs);
  return r;
}

std::vector<Extent> UnusedSpace(const Extent& extent, const ShardRecord* record) {
  std::vector<std::pair<uint64_t, uint64_t>> used;  // [begin, end) offsets inside the segment
  if (record) {
    for (const BlockRun& run : record->runs) {
      if (run.segment != extent.segment) continue;
      const uint64_t begin = std::max(run.offset, extent.offset);
      const uint64_t end = std::min(run.offset + run.block_count * kBlockSize, extent.offset + extent.length);
      if (begin < end) used.emplace_back(begin, end);
    }
  }
  std::sort(used.begin(), used.end());
  std::vector<Extent> out;
  uint64_t at = extent.offset;
  for (auto [begin, end] : used) {
    if (begin > at) out.push_back({extent.segment, at, begin - at});
    at = std::max(at, end);
  }
  if (extent.length > 0 && at < extent.offset + extent.length) {
    out.push_back({extent.segment, at, extent.offset + extent.length - at});
  }
  return out;
}

uint64_t StoredBytesIn(const ShardRecord& record, uint32_t segment) {
  uint64_t blocks = 0;
  for (const BlockRun& run : record.runs) blocks += run.segment == segment ? run.block_count : 0;
  return blocks * kBlockSize;
}

std::vector<uint32_t> SegmentsOf(const ShardRecord& record, uint64_t begin, uint64_t end) {
  std::vector<uint32_t> out;
  for (const BlockRun& run : record.runs) {
    if (run.hole() || run.end_block() <= begin || run.first_block >= end) continue;
    if (std::find(out.begin(), out.end(), run.segment) == out.end()) out.push_back(run.segment);
  }
  return out;
}

std::optional<std::pair<uint32_t, uint64_t>> BlockPlace(const ShardRecord& record, uint64_t block) {
  const BlockRun* run = RunHolding(record, block);
  if (run == nullptr || run->hole()) return std::nullopt;
  return std::pair{run->segment, run->offset + (block - run->first_block) * kBlockSize};
}

}  // namespace penstock::engine
