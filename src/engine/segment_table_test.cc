#include "engine/segment_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace penstock::engine {
namespace {

constexpr uint64_t kSeg = 64 * 1024;

TEST(SegmentTableTest, AppendsInOneSegmentThenOpensTheNext) {
  SegmentTable t(3, kSeg);
  auto a = t.Allocate(40 * 1024);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (Extent{0, 0, 40 * 1024}));
  auto b = t.Allocate(16 * 1024);
  EXPECT_EQ(*b, (Extent{0, 40 * 1024, 16 * 1024}));
  auto c = t.Allocate(16 * 1024);  // does not fit in segment 0's last 8 KiB
  EXPECT_EQ(*c, (Extent{1, 0, 16 * 1024}));
  EXPECT_EQ(t.state(0), SegmentState::kSealed);
  EXPECT_EQ(t.state(1), SegmentState::kOpen);
  EXPECT_EQ(t.Allocate(0)->segment, kNoSegment);
  EXPECT_EQ(t.Allocate(kSeg + 4096).status().code(), StatusCode::kInvalidArgument);
}

// A commit that replaces space (an overwrite, a GC move) makes the new extent live and the old
// dead in one step: live bytes never count both, and the emptied segment is freed.
TEST(SegmentTableTest, SegmentBeingZeroedIsFreeButNotAllocated) {
  SegmentTable t(4, kSeg, /*reserve_segments=*/1);
  EXPECT_FALSE(t.BeginZeroing(4));  // not a segment
  ASSERT_TRUE(t.BeginZeroing(0));
  EXPECT_FALSE(t.BeginZeroing(0));  // already taken
  EXPECT_EQ(t.Stats().free_segments, 4u);
  auto a = t.Allocate(kSeg);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->segment, 1u);  // not the one being zeroed
  // Two free (2, 3) with one kept for GC: writers need the other, so zeroing may not take it.
  EXPECT_FALSE(t.BeginZeroing(2));
  EXPECT_FALSE(t.zeroing_abort_requested());
  t.EndZeroing(0);
  EXPECT_EQ(t.Stats().free_segments, 3u);
  auto b = t.Allocate(kSeg);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->segment, 0u);  // back in the free set, lowest first
}

TEST(SegmentTableTest, AllocationWaitsForTheLastFreeSegmentBeingZeroed) {
  SegmentTable t(3, kSeg);
  ASSERT_TRUE(t.BeginZeroing(2));
  ASSERT_TRUE(t.Allocate(kSeg).ok());  // 0
  ASSERT_TRUE(t.Allocate(kSeg).ok());  // 1; only 2 is left, being zeroed
  // A caller that may not wait hears "not at hand", and the zeroing is asked to stop.
  auto now = t.Allocate(kSeg, AppendStream::kUser, /*may_wait=*/false);
  EXPECT_EQ(now.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(t.zeroing_abort_requested());
  std::atomic<bool> got{false};
  Result<Extent> waited = Extent{};
  std::thread writer([&] {
    waited = t.Allocate(kSeg);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());  // waits rather than failing with "no space"
  t.EndZeroing(2);
  writer.join();
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_EQ(waited->segment, 2u);
  EXPECT_FALSE(t.zeroing_abort_requested());
  // Now truly full: "no space" at once.
  EXPECT_EQ(t.Allocate(kSeg).status().code(), StatusCode::kResourceExhausted);
}

TEST(SegmentTableTest, CommitReplacingSpaceMovesLiveBytesAtOnce) {
  SegmentTable t(2, kSeg);
  Extent a = *t.Allocate(kSeg);
  t.Commit(a);
  Extent b = *t.Allocate(kSeg / 2);  // seals segment 0
  EXPECT_EQ(t.Stats().live_bytes, kSeg);
  const Extent halves[] = {{a.segment, a.offset, kSeg / 2}, {a.segment, a.offset + kSeg / 2, kSeg / 2}};
  t.Commit(b, halves);
  EXPECT_EQ(t.Stats().live_bytes, kSeg / 2);
  EXPECT_EQ(t.live_bytes(0), 0u);
  EXPECT_EQ(t.live_bytes(1), kSeg / 2);
  EXPECT_EQ(t.state(0), SegmentState::kFree);
}

TEST(SegmentTableTest, SealedSegmentIsFreedWhenItsLastLiveExtentDies) {
  SegmentTable t(2, kSeg);
  Extent a = *t.Allocate(kSeg);
  t.Commit(a);
  Extent b = *t.Allocate(kSeg);  // seals segment 0
  t.Commit(b);
  EXPECT_EQ(t.Stats().free_segments, 0u);
  EXPECT_EQ(t.Allocate(4096).status().code(), StatusCode::kResourceExhausted);
  t.Pin(0);
  t.Release(a);
  EXPECT_EQ(t.state(0), SegmentState::kSealed);  // a reader still holds it
  t.Unpin(0);
  EXPECT_EQ(t.state(0), SegmentState::kFree);
  EXPECT_EQ(t.Stats().free_segments, 1u);
  EXPECT_EQ(t.Allocate(4096)->segment, 0u);
}

TEST(SegmentTableTest, PendingExtentKeepsSegmentAndAbandonFreesIt) {
  SegmentTable t(2, kSeg);
  Extent a = *t.Allocate(kSeg);      // pending in segment 0
  Extent b = *t.Allocate(4096);      // seals 0, opens 1
  EXPECT_EQ(t.state(0), SegmentState::kSealed);
  t.Abandon(a);                      // write failed
  EXPECT_EQ(t.state(0), SegmentState::kFree);
  t.Commit(b);
  auto s = t.Stats();
  EXPECT_EQ(s.live_bytes, 4096u);
  EXPECT_EQ(s.used_bytes, kSeg);
  EXPECT_EQ(s.dead_bytes, 0u);
}

TEST(SegmentTableTest, OpenSegmentIsRewoundWhenAllOfItDied) {
  SegmentTable t(1, kSeg);
  Extent a = *t.Allocate(kSeg);
  t.Commit(a);
  EXPECT_EQ(t.Allocate(4096).status().code(), StatusCode::kResourceExhausted);
  t.Release(a);
  EXPECT_EQ(t.Stats().dead_bytes, kSeg);
  EXPECT_EQ(*t.Allocate(4096), (Extent{0, 0, 4096}));
}

TEST(SegmentTableTest, RecoveryReopensTheSegmentWithMostRoom) {
  SegmentTable t(4, kSeg);
  t.RecoverExtent({0, 0, kSeg});
  t.RecoverExtent({2, 0, 8192});
  t.RecoverExtent({3, 0, 32768});
  t.FinishRecovery();
  EXPECT_EQ(t.state(0), SegmentState::kSealed);
  EXPECT_EQ(t.state(1), SegmentState::kFree);
  EXPECT_EQ(t.state(2), SegmentState::kOpen);
  EXPECT_EQ(t.state(3), SegmentState::kSealed);
  EXPECT_EQ(*t.Allocate(4096), (Extent{2, 8192, 4096}));
  auto s = t.Stats();
  EXPECT_EQ(s.free_segments, 1u);
  EXPECT_EQ(s.live_bytes, kSeg + 8192 + 32768);
}

TEST(SegmentTableTest, ReserveIsForGcOnlyAndGcHasItsOwnOpenSegment) {
  SegmentTable t(3, kSeg, /*reserve_segments=*/1);
  t.Commit(*t.Allocate(kSeg));             // segment 0
  Extent half = *t.Allocate(kSeg / 2);     // seals 0, opens 1
  t.Commit(half);
  t.Commit(*t.Allocate(kSeg / 2));
  EXPECT_EQ(t.Allocate(4096).status().code(), StatusCode::kResourceExhausted);  // 2 is reserved
  Extent gc = *t.Allocate(4096, AppendStream::kGc);
  EXPECT_EQ(gc.segment, 2u);
  EXPECT_EQ(t.state(2), SegmentState::kOpen);
  t.Commit(gc);
  EXPECT_EQ(t.Stats().free_segments, 0u);
}

TEST(SegmentTableTest, PickVictimPrefersTheEmptiestSealedSegment) {
  SegmentTable t(5, kSeg);  // segment 4 stays free: GC's room
  std::vector<Extent> e;
  for (int i = 0; i < 12; ++i) {  // 4 extents of kSeg/4 per segment: segments 0, 1, 2 full
    e.push_back(*t.Allocate(kSeg / 4));
    t.Commit(e.back());
  }
  t.Commit(*t.Allocate(4096));  // seals 2, opens 3
  EXPECT_EQ(t.PickVictim(4096), kNoSegment);  // nothing dead yet
  t.Release(e[0]);                           // segment 0: 3/4 live
  t.Release(e[4]);
  t.Release(e[5]);  // segment 1: 1/2 live
  EXPECT_EQ(t.PickVictim(4096), 1u);
  EXPECT_EQ(t.PickVictim(kSeg / 2 + 4096), kNoSegment);  // not dead enough
  EXPECT_EQ(t.PickVictim(4096, {1}), 0u);
  // Picked and pinned in one step: emptied meanwhile, it stays until GC lets it go.
  EXPECT_EQ(t.PickAndPinVictim(4096), 1u);
  t.Release(e[6]);
  t.Release(e[7]);
  EXPECT_EQ(t.state(1), SegmentState::kSealed);
  t.Unpin(1);  // segment 1 frees itself
  EXPECT_EQ(t.state(1), SegmentState::kFree);
  EXPECT_EQ(t.PickVictim(4096), 0u);
}

// GC is given only a victim it has room to move: with no segment to open, one whose live
// bytes fit in the tail of GC's open segment.
TEST(SegmentTableTest, PickVictimOnlyWhatGcHasRoomToMove) {
  SegmentTable t(4, kSeg, /*reserve_segments=*/1);
  std::vector<Extent> e;
  for (int i = 0; i < 8; ++i) {  // segments 0 and 1, 4 extents of kSeg/4 each
    e.push_back(*t.Allocate(kSeg / 4));
    t.Commit(e.back());
  }
  t.Commit(*t.Allocate(4096));  // seals 1, opens 2 (3 is the reserve)
  t.Release(e[0]);              // segment 0: 3/4 live
  t.Release(e[4]);
  t.Release(e[5]);  // segment 1: 1/2 live
  EXPECT_EQ(t.PickVictim(4096), 1u);  // a free segment: anything fits
  Extent moved = *t.Allocate(kSeg / 2 + kSeg / 4, AppendStream::kGc);  // GC opens 3
  t.Commit(moved);
  EXPECT_EQ(t.Stats().free_segments, 0u);
  // GC's tail is kSeg/4: neither victim fits.
  EXPECT_EQ(t.PickVictim(4096), kNoSegment);
  t.Release(e[1]);
  t.Release(e[2]);  // segment 0: 1/4 live, fits
  EXPECT_EQ(t.PickVictim(4096), 0u);
}

TEST(SegmentTableTest, SpaceReleasedAtAJournalRecordWaitsForTheIndexSync) {
  SegmentTable t(2, kSeg);
  t.SetJournalSeq(4);
  t.SetDurableSeq(4);
  Extent a = *t.Allocate(kSeg);
  t.Commit(a);
  Extent b = *t.Allocate(kSeg);  // seals segment 0
  t.Commit(b);
  t.SetJournalSeq(5);
  t.Release(a);  // by record 5, which the index does not hold durably yet
  EXPECT_EQ(t.state(0), SegmentState::kSealed);
  EXPECT_EQ(t.Stats().free_segments, 1u);  // counted free, but not reusable
  EXPECT_EQ(t.Stats().awaiting_sync_segments, 1u);
  EXPECT_EQ(t.PickVictim(4096), kNoSegment);  // nothing for GC to do there
  EXPECT_EQ(t.Allocate(4096).status().code(), StatusCode::kResourceExhausted);
  t.SetDurableSeq(5);
  EXPECT_EQ(t.state(0), SegmentState::kFree);
  EXPECT_EQ(t.Stats().awaiting_sync_segments, 0u);
  EXPECT_EQ(t.Allocate(4096)->segment, 0u);
}

TEST(SegmentTableTest, OpenSegmentIsRewoundOnlyOnceTheIndexIsDurable) {
  SegmentTable t(1, kSeg);
  Extent a = *t.Allocate(kSeg);
  t.Commit(a);
  t.SetJournalSeq(1);
  t.Release(a);
  EXPECT_EQ(t.Allocate(4096).status().code(), StatusCode::kResourceExhausted);
  t.SetDurableSeq(1);
  Extent b = *t.Allocate(4096);
  EXPECT_EQ(b, (Extent{0, 0, 4096}));
  // An abandoned extent was never named by a record: reusable at once.
  t.SetJournalSeq(2);
  t.Abandon(b);
  EXPECT_EQ(*t.Allocate(kSeg), (Extent{0, 0, kSeg}));
}

TEST(SegmentTableTest, BackgroundGcWaitsLongerWhileSpaceIsPlentiful) {
  constexpr uint64_t kSeg = 64 << 20;
  auto min_dead = [&](uint64_t free, uint64_t total, double fraction = 0.5) {
    return BackgroundGcMinDead({.total_segments = total, .free_segments = free}, kSeg, fraction, 2);
  };
  EXPECT_EQ(min_dead(60, 100), kSeg / 4 * 3);  // half free or more: three quarters dead
  EXPECT_EQ(min_dead(50, 100), kSeg / 4 * 3);
  EXPECT_EQ(min_dead(49, 100), kSeg / 2);      // less: the configured fraction
  EXPECT_EQ(min_dead(60, 100, 0.9), uint64_t(kSeg * 0.9));  // a stricter setting stands
  EXPECT_EQ(min_dead(1, 100), kSeg / 8);       // pressure: emptier victims too
  EXPECT_EQ(min_dead(1, 2), kSeg / 8);         // (pressure wins over "half free")
  EXPECT_EQ(BackgroundGcMinDead({.total_segments = 4, .free_segments = 0}, 8192, 0.5, 2), kBlockSize);
}

}  // namespace
}  // namespace penstock::engine
