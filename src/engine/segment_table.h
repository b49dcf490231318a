// segment_table.h — which segments are free, which one is open for appends, and how many live
// bytes each holds.
//
// The space allocator of the engine, in memory only: rebuilt from the index at Open
// (RecoverExtent for every indexed shard, then FinishRecovery). No I/O.
//
// Two append streams: writers fill the user-open segment; GC relocates live extents into its own
// GC-open segment, so cold relocated data is not mixed with fresh writes. The last
// `reserve_segments` free segments are kept for GC (a user Allocate that would need one fails
// with kResourceExhausted), so GC can always make progress on a full device.
//
// Segment life cycle: kFree -> kOpen (appends at its fill pointer) -> kSealed (full) -> kFree
// when it holds no live bytes, no pending (written but not yet indexed) extent, and no reader
// pins it. The open segment is rewound in place when everything in it has died.
// An extent moves: Allocate (pending) -> Commit (live, after its index record is synced) or
// Abandon (garbage, after a failed write) -> Release (dead, after the index record that named it
// was replaced or deleted). Because a segment is freed only when none of its bytes are live or
// pending, reusing it can never overwrite data a live index record names; pins keep a segment
// from being reused while a reader that already looked its key up is still reading it.
//
// Journal gating: the index journal (journal.h) may replay records that name extents released
// since the index was last synced, so space released at journal sequence number S (SetJournalSeq)
// is not reused — neither a freed segment nor a rewound open one — until the index is durable
// through S (SetDurableSeq). Until then a freed segment waits sealed, counted as free in Stats.
// Both sequence numbers stay 0 when there is no journal: space is then reused at once.
//
// Zeroing (engine_zero.cc): a free segment may be taken out of the free set while background
// zeroing writes it (BeginZeroing .. EndZeroing); Stats counts it as free. An allocation that
// finds no other free segment asks the zeroing to stop (zeroing_abort_requested) and waits for
// the segment rather than fail with "no space".
//
// Thread safety: every method may be called from any thread; one mutex guards the table.
#pragma once

#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <span>
#include <set>
#include <vector>

#include "engine/format.h"
#include "penstock/status.h"

namespace penstock::engine {

// A run of bytes inside one segment. segment == kNoSegment for no space (a zero-length shard).
struct Extent {
  uint32_t segment = kNoSegment;
  uint64_t offset = 0;  // inside the segment, multiple of kBlockSize
  uint64_t length = 0;  // allocated bytes, multiple of kBlockSize
  friend bool operator==(const Extent&, const Extent&) = default;
};

enum class SegmentState : uint8_t { kFree, kOpen, kSealed };
enum class AppendStream : uint8_t { kUser, kGc };

struct SegmentTableStats {
  uint64_t total_segments = 0;
  uint64_t free_segments = 0;
  uint64_t used_bytes = 0;     // non-free segments * segment_bytes
  uint64_t live_bytes = 0;     // committed extents
  uint64_t pending_bytes = 0;  // allocated, not yet committed or abandoned
  uint64_t dead_bytes = 0;     // used - live - pending - unwritten tail of the open segment
  uint64_t awaiting_sync_segments = 0;  // empty, but reusable only after the index is synced
                                        // (counted in free_segments too)
};

// Background GC's victim threshold (PickVictim's min_dead_bytes) for a table in state `st`:
//  - fewer than `free_segments_low` free segments (pressure): a segment 1/8 dead;
//  - at least half the segments free: max(min_dead_fraction, 3/4) of a segment, so while space
//    is plentiful each cleaning moves at most a quarter of a segment (GC's write
//    amplification halves against cleaning at half dead, and dead space waits for later);
//  - otherwise min_dead_fraction of a segment. Never less than one 4 KiB block.
uint64_t BackgroundGcMinDead(const SegmentTableStats& st, uint64_t segment_bytes,
                             double min_dead_fraction, uint32_t free_segments_low);

class SegmentTable {
 public:
  // `reserve_segments` free segments are kept back from kUser allocations (see above).
  SegmentTable(uint32_t segment_count, uint64_t segment_bytes, uint32_t reserve_segments = 0);

  // Recovery, before any other call: count an indexed shard's extent as live.
  void RecoverExtent(const Extent& extent);
  // Ends recovery: segments holding live bytes are sealed, except that the one with the most
  // room left is reopened for appends after its last live byte (what lies beyond is garbage).
  void FinishRecovery();

  // Reserves `bytes` (a multiple of kBlockSize, at most segment_bytes) at the open segment's
  // fill pointer, opening a free segment when it does not fit. bytes == 0 gives an empty
  // extent. Errors: kResourceExhausted when no segment has room (delete shards, then retry).
  // When the only free segment is being zeroed, waits for it; with !may_wait returns
  // kResourceExhausted then instead (and asks the zeroing to stop).
  Result<Extent> Allocate(uint64_t bytes, AppendStream stream = AppendStream::kUser,
                          bool may_wait = true);
  // pending -> live, and each of `released` live -> dead, at once: Stats never shows a new
  // extent and the space it replaces both live (GC's moves would count twice for a moment).
  void Commit(const Extent& extent, std::span<const Extent> released = {});
  void Abandon(const Extent& extent);  // pending -> dead
  void Release(const Extent& extent);  // live -> dead

  // Extents released from now on were released at journal record `seq` (the committer's).
  void SetJournalSeq(uint64_t seq);
  // The index is durable through journal record `seq`: space released up to it may be reused.
  void SetDurableSeq(uint64_t seq);

  // Takes free segment `segment` out of the free set for zeroing; false (nothing changed) when
  // it is not free, or fewer than reserve + 2 segments are free (writers keep one besides
  // GC's reserve).
  bool BeginZeroing(uint32_t segment);
  // Returns a segment BeginZeroing took to the free set, and wakes allocations waiting for it.
  void EndZeroing(uint32_t segment);
  // True when an allocation waits for a segment being zeroed: the zeroing should stop soon.
  bool zeroing_abort_requested() const;

  // A reader pins the segment of the extent it is about to read.
  void Pin(uint32_t segment);
  void Unpin(uint32_t segment);

  // The sealed segment with the fewest live bytes (at least one) that holds at least
  // `min_dead_bytes` of reclaimable space (and no pending extent), or kNoSegment. Open segments,
  // empty ones (they free themselves) and those in `exclude` are never chosen, nor one whose
  // live bytes GC has no room to move (no free segment, and more than the tail of GC's open
  // segment): a pass never runs out of room half way.
  uint32_t PickVictim(uint64_t min_dead_bytes, const std::set<uint32_t>& exclude = {}) const;
  // PickVictim, and pins the segment it picks in the same step (a segment picked and pinned
  // apart could be freed and opened again in between). Unpin it when done.
  uint32_t PickAndPinVictim(uint64_t min_dead_bytes, const std::set<uint32_t>& exclude = {});

  SegmentTableStats Stats() const;
  SegmentState state(uint32_t segment) const;
  uint64_t live_bytes(uint32_t segment) const;
  uint32_t segment_count() const { return static_cast<uint32_t>(segments_.size()); }
  uint64_t segment_bytes() const { return segment_bytes_; }

 private:
  struct Segment {
    SegmentState state = SegmentState::kFree;
    uint64_t fill = 0;     // bytes appended (open) or the end of the last live extent (recovered)
    uint64_t live = 0;     // bytes of committed extents
    uint64_t pending = 0;  // bytes of allocated, uncommitted extents
    uint32_t pins = 0;
    uint64_t released_seq = 0;  // journal seq of the last Release
  };
  static constexpr uint32_t kNoOpen = UINT32_MAX;

  void MaybeFreeLocked(uint32_t segment);
  void ReleaseLocked(const Extent& extent);  // mu_ held
  // Seals the stream's open segment if `bytes` does not fit, and opens a free one.
  Status MakeRoomLocked(uint32_t& open, uint64_t bytes, size_t free_floor);
  uint32_t PickVictimLocked(uint64_t min_dead_bytes, const std::set<uint32_t>& exclude) const;
  bool ReclaimableLocked(const Segment& s) const { return s.live == 0 && s.pending == 0 && s.pins == 0; }
  bool ReusableLocked(const Segment& s) const {
    return ReclaimableLocked(s) && s.released_seq <= durable_seq_;
  }

  const uint64_t segment_bytes_;
  mutable std::mutex mu_;
  std::vector<Segment> segments_;  // guarded by mu_
  std::set<uint32_t> free_;        // guarded by mu_; lowest index reused first
  std::set<uint32_t> awaiting_sync_;  // guarded by mu_; sealed, empty, released after durable_seq_
  std::set<uint32_t> zeroing_;     // guarded by mu_; free, taken out of free_ while zeroed
  uint32_t zeroing_waiters_ = 0;   // guarded by mu_; allocations waiting for one of zeroing_
  bool zeroing_abort_ = false;     // guarded by mu_; until the next EndZeroing
  std::condition_variable zeroing_done_;
  uint64_t journal_seq_ = 0;       // guarded by mu_
  uint64_t durable_seq_ = 0;       // guarded by mu_
  const uint32_t reserve_;
  uint32_t open_ = kNoOpen;        // guarded by mu_; the user stream's open segment
  uint32_t gc_open_ = kNoOpen;     // guarded by mu_; the GC stream's open segment
};

// Pins segments for as long as it lives (a read of a shard whose runs lie in several segments).
class SegmentPins {
 public:
  explicit SegmentPins(SegmentTable& table) : table_(table) {}
  ~SegmentPins() { Clear(); }
  SegmentPins(const SegmentPins&) = delete;
  SegmentPins& operator=(const SegmentPins&) = delete;
  void Add(uint32_t segment) {
    table_.Pin(segment);
    segments_.push_back(segment);
  }
  void Clear() {
    for (uint32_t segment : segments_) table_.Unpin(segment);
    segments_.clear();
  }

 private:
  SegmentTable& table_;
  std::vector<uint32_t> segments_;
};

}  // namespace penstock::engine
