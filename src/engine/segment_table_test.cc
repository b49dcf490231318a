#include "engine/segment_table.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace penstock::engine
