#include "engine/segment_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace penstock::engine {

SegmentTable::SegmentTable(uint32_t segment_count, uint64_t segment_bytes,
                           uint32_t reserve_segments)
    : segment_bytes_(segment_bytes), segments_(segment_count), reserve_(reserve_segments) {
  for (uint32_t i = 0; i < segment_count; ++i) free_.insert(i);
}

void SegmentTable::RecoverExtent(const Extent& extent) {
  if (extent.segment == kNoSegment) return;
  std::lock_guard lock(mu_);
  Segment& s = segments_.at(extent.segment);
  s.live += extent.length;
  s.fill = std::max(s.fill, extent.offset + extent.length);
}

void SegmentTable::FinishRecovery() {
  std::lock_guard lock(mu_);
  uint32_t best = kNoOpen;
  for (uint32_t i = 0; i < segments_.size(); ++i) {
    Segment& s = segments_[i];
    if (s.live == 0) {
      s = Segment{};
      continue;
    }
    free_.erase(i);
    s.state = SegmentState::kSealed;
    if (s.fill < segment_bytes_ && (best == kNoOpen || s.fill < segments_[best].fill)) best = i;
  }
  if (best != kNoOpen) {
    segments_[best].state = SegmentState::kOpen;
    open_ = best;
  }
}

Result<Extent> SegmentTable::Allocate(uint64_t bytes, AppendStream stream, bool may_wait) {
  if (bytes == 0) return Extent{};
  if (bytes > segment_bytes_ || bytes % kBlockSize != 0) {
    return InvalidArgument(fmt::format("cannot allocate {} bytes: must be a multiple of 4 KiB and "
                                       "at most the segment size {}", bytes, segment_bytes_));
  }
  std::unique_lock lock(mu_);
  uint32_t& open = stream == AppendStream::kUser ? open_ : gc_open_;
  const size_t floor = stream == AppendStream::kUser ? reserve_ : 0;
  // A segment being zeroed is free: if it may be needed, wait for it rather than say "no space".
  while (free_.size() <= floor && !zeroing_.empty()) {
    zeroing_abort_ = true;
    if (!may_wait) {
      return ResourceExhausted("no free segment at hand: one is being zeroed; retry from a "
                               "thread that may wait");
    }
    ++zeroing_waiters_;
    zeroing_done_.wait(lock);
    --zeroing_waiters_;
  }
  PS_RETURN_IF_ERROR(MakeRoomLocked(open, bytes, floor));
  Segment& s = segments_[open];
  Extent extent{.segment = open, .offset = s.fill, .length = bytes};
  s.fill += bytes;
  s.pending += bytes;
  return extent;
}

Status SegmentTable::MakeRoomLocked(uint32_t& open, uint64_t bytes, size_t free_floor) {
  if (open != kNoOpen) {
    Segment& s = segments_[open];
    if (s.fill + bytes > segment_bytes_ && ReusableLocked(s)) s.fill = 0;  // all of it died
    if (s.fill + bytes <= segment_bytes_) return OkStatus();
    if (free_.size() <= free_floor) {
      const uint64_t left = segment_bytes_ - s.fill;
      // With GC on, seal it anyway: an open segment is never a GC victim, and this one may be
      // the best to clean. Without GC keep it open, so smaller shards can still use its tail.
      if (reserve_ > 0) {
        s.state = SegmentState::kSealed;
        uint32_t sealed = open;
        open = kNoOpen;
        MaybeFreeLocked(sealed);
      }
      return ResourceExhausted(fmt::format(
          "no space: all {} segments of {} bytes are in use ({} kept for GC) and the open one "
          "had {} bytes left ({} requested); delete shards (or wait for GC), then retry",
          segments_.size(), segment_bytes_, free_floor, left, bytes));
    }
    s.state = SegmentState::kSealed;
    uint32_t sealed = open;
    open = kNoOpen;
    MaybeFreeLocked(sealed);
  }
  if (free_.size() <= free_floor) {
    return ResourceExhausted(fmt::format("no space: all {} segments of {} bytes are in use ({} "
                                         "kept for GC); delete shards (or wait for GC), then "
                                         "retry", segments_.size(), segment_bytes_, free_floor));
  }
  open = *free_.begin();
  free_.erase(free_.begin());
  segments_[open] = Segment{.state = SegmentState::kOpen};
  return OkStatus();
}

uint32_t SegmentTable::PickAndPinVictim(uint64_t min_dead_bytes, const std::set<uint32_t>& exclude) {
  std::lock_guard lock(mu_);
  const uint32_t victim = PickVictimLocked(min_dead_bytes, exclude);
  if (victim != kNoSegment) ++segments_[victim].pins;
  return victim;
}

uint32_t SegmentTable::PickVictim(uint64_t min_dead_bytes, const std::set<uint32_t>& exclude) const {
  std::lock_guard lock(mu_);
  return PickVictimLocked(min_dead_bytes, exclude);
}

uint32_t SegmentTable::PickVictimLocked(uint64_t min_dead_bytes, const std::set<uint32_t>& exclude) const {
  // GC's room: with a segment to open, any victim fits (its live bytes fill the GC stream's
  // open segment up to the first shard that does not fit, the rest a fresh one); without,
  // only one that fits in that open segment's tail.
  const bool spare = !free_.empty() || !awaiting_sync_.empty() || !zeroing_.empty();
  const uint64_t tail = gc_open_ != kNoOpen ? segment_bytes_ - segments_[gc_open_].fill : 0;
  uint32_t best = kNoSegment;
  for (uint32_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    if (s.state != SegmentState::kSealed || s.pending != 0 || exclude.contains(i) ||
        awaiting_sync_.contains(i) || (!spare && s.live > tail)) {
      continue;
    }
    // A segment with nothing live frees itself once unpinned (or once the index is synced):
    // nothing for GC to move, and picking it would spin a GC pass on it while a reader holds it.
    if (s.live == 0) continue;
    uint64_t dead = segment_bytes_ - s.live;
    if (dead == 0 || dead < min_dead_bytes) continue;
    if (best == kNoSegment || s.live < segments_[best].live) best = i;
  }
  return best;
}

void SegmentTable::Commit(const Extent& extent, std::span<const Extent> released) {
  std::lock_guard lock(mu_);
  if (extent.segment != kNoSegment) {
    Segment& s = segments_.at(extent.segment);
    assert(s.pending >= extent.length);
    s.pending -= extent.length;
    s.live += extent.length;
  }
  for (const Extent& x : released) ReleaseLocked(x);
}

void SegmentTable::Abandon(const Extent& extent) {
  if (extent.segment == kNoSegment) return;
  std::lock_guard lock(mu_);
  Segment& s = segments_.at(extent.segment);
  assert(s.pending >= extent.length);
  s.pending -= extent.length;  // no record names it: no wait for an index sync
  MaybeFreeLocked(extent.segment);
}

void SegmentTable::Release(const Extent& extent) {
  std::lock_guard lock(mu_);
  ReleaseLocked(extent);
}

void SegmentTable::ReleaseLocked(const Extent& extent) {
  if (extent.segment == kNoSegment) return;
  Segment& s = segments_.at(extent.segment);
  assert(s.live >= extent.length);
  s.live -= extent.length;
  s.released_seq = journal_seq_;
  MaybeFreeLocked(extent.segment);
}

bool SegmentTable::BeginZeroing(uint32_t segment) {
  std::lock_guard lock(mu_);
  if (free_.size() < size_t{reserve_} + 2 || !free_.contains(segment)) return false;
  free_.erase(segment);
  zeroing_.insert(segment);
  return true;
}

void SegmentTable::EndZeroing(uint32_t segment) {
  {
    std::lock_guard lock(mu_);
    if (zeroing_.erase(segment) == 0) return;
    free_.insert(segment);
    zeroing_abort_ = zeroing_waiters_ > 0 && !zeroing_.empty();
  }
  zeroing_done_.notify_all();
}

bool SegmentTable::zeroing_abort_requested() const {
  std::lock_guard lock(mu_);
  return zeroing_abort_;
}

void SegmentTable::Pin(uint32_t segment) {
  if (segment == kNoSegment) return;
  std::lock_guard lock(mu_);
  ++segments_.at(segment).pins;
}

void SegmentTable::Unpin(uint32_t segment) {
  if (segment == kNoSegment) return;
  std::lock_guard lock(mu_);
  Segment& s = segments_.at(segment);
  assert(s.pins > 0);
  --s.pins;
  MaybeFreeLocked(segment);
}

void SegmentTable::SetJournalSeq(uint64_t seq) {
  std::lock_guard lock(mu_);
  journal_seq_ = seq;
}

void SegmentTable::SetDurableSeq(uint64_t seq) {
  std::lock_guard lock(mu_);
  durable_seq_ = seq;
  std::set<uint32_t> waiting;
  waiting.swap(awaiting_sync_);
  for (uint32_t segment : waiting) MaybeFreeLocked(segment);
}

void SegmentTable::MaybeFreeLocked(uint32_t segment) {
  Segment& s = segments_[segment];
  if (s.state != SegmentState::kSealed || !ReclaimableLocked(s)) return;
  if (!ReusableLocked(s)) {
    awaiting_sync_.insert(segment);
    return;
  }
  awaiting_sync_.erase(segment);
  s = Segment{};
  free_.insert(segment);
}

SegmentTableStats SegmentTable::Stats() const {
  std::lock_guard lock(mu_);
  SegmentTableStats stats;
  stats.total_segments = segments_.size();
  stats.awaiting_sync_segments = awaiting_sync_.size();
  stats.free_segments = free_.size() + awaiting_sync_.size() + zeroing_.size();
  stats.used_bytes = (segments_.size() - stats.free_segments) * segment_bytes_;
  uint64_t open_tail = 0;
  for (uint32_t i = 0; i < segments_.size(); ++i) {
    stats.live_bytes += segments_[i].live;
    stats.pending_bytes += segments_[i].pending;
  }
  if (open_ != kNoOpen) open_tail += segment_bytes_ - segments_[open_].fill;
  if (gc_open_ != kNoOpen) open_tail += segment_bytes_ - segments_[gc_open_].fill;
  stats.dead_bytes = stats.used_bytes - stats.live_bytes - stats.pending_bytes - open_tail;
  return stats;
}

SegmentState SegmentTable::state(uint32_t segment) const {
  std::lock_guard lock(mu_);
  return segments_.at(segment).state;
}

uint64_t SegmentTable::live_bytes(uint32_t segment) const {
  std::lock_guard lock(mu_);
  return segments_.at(segment).live;
}

uint64_t BackgroundGcMinDead(const SegmentTableStats& st, uint64_t segment_bytes,
                             double min_dead_fraction, uint32_t free_segments_low) {
  // Under pressure take emptier victims too, but not nearly full ones: moving a segment to win
  // a few blocks would churn the device without end.
  if (st.free_segments < free_segments_low) return std::max<uint64_t>(segment_bytes / 8, kBlockSize);
  double fraction = min_dead_fraction;
  if (st.free_segments * 2 >= st.total_segments) fraction = std::max(fraction, 0.75);
  return std::max<uint64_t>(static_cast<uint64_t>(static_cast<double>(segment_bytes) * fraction), kBlockSize);
}

}  // namespace penstock::engine
