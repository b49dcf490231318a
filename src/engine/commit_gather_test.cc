#include "engine/commit_gather.h"

#include <gtest/gtest.h>

namespace penstock::engine {
namespace {

using std::chrono::microseconds;
using Clock = CommitGather::Clock;

// Feeds `g` `batches` batches of `size` requests arriving `gap` apart, from `t` (advanced).
void Load(CommitGather& g, Clock::time_point& t, int batches, size_t size, microseconds gap) {
  for (int b = 0; b < batches; ++b) {
    for (size_t i = 0; i < size; ++i) {
      t += gap;
      g.Arrived(t);
    }
    g.Started(size);
  }
}

// A gather (300 us at most, 16 enough) after 100 batches of `size` requests `gap` apart.
CommitGather After(size_t size, microseconds gap) {
  CommitGather g(microseconds(300), 16);
  Clock::time_point t{};
  Load(g, t, 100, size, gap);
  return g;
}

TEST(CommitGatherTest, ALoneWriterNeverWaits) {
  CommitGather g = After(1, microseconds(20));  // one request a batch, however close together
  EXPECT_EQ(g.NextWait(0, microseconds(0)).count(), 0);
  EXPECT_EQ(g.NextWait(1, microseconds(0)).count(), 0);
}

TEST(CommitGatherTest, ManyWritersWaitForTheNextArrivalWhileFewerThanUsualAreQueued) {
  CommitGather g = After(8, microseconds(20));
  EXPECT_NEAR(g.mean_batch(), 8.0, 0.01);
  EXPECT_NEAR(g.mean_gap_us(), 20.0, 0.01);
  // Two queued where batches hold eight: wait for the next, at most twice the mean gap.
  EXPECT_EQ(g.NextWait(2, microseconds(0)).count(), 41);
  // Bounded by what is left of the longest wait.
  EXPECT_EQ(g.NextWait(2, microseconds(290)).count(), 10);
  EXPECT_EQ(g.NextWait(2, microseconds(300)).count(), 0);
  // As many as usual are here: go.
  EXPECT_EQ(g.NextWait(8, microseconds(0)).count(), 0);
  EXPECT_EQ(g.NextWait(9, microseconds(0)).count(), 0);
}

TEST(CommitGatherTest, LargeBatchesWaitOnlyUntilEnough) {
  CommitGather g = After(57, microseconds(5));
  EXPECT_GT(g.NextWait(10, microseconds(0)).count(), 0);
  EXPECT_EQ(g.NextWait(16, microseconds(0)).count(), 0);
}

TEST(CommitGatherTest, SparseArrivalsAreNotWaitedFor) {
  CommitGather g = After(4, microseconds(1000));  // several a batch, but a millisecond apart
  EXPECT_EQ(g.NextWait(1, microseconds(0)).count(), 0);
}

TEST(CommitGatherTest, TurnedOffOrWithNothingMeasuredItNeverWaits) {
  CommitGather off(microseconds(0), 16);
  Clock::time_point t{};
  Load(off, t, 100, 8, microseconds(20));
  EXPECT_EQ(off.NextWait(1, microseconds(0)).count(), 0);
  CommitGather fresh(microseconds(300), 16);
  EXPECT_EQ(fresh.NextWait(0, microseconds(0)).count(), 0);
  fresh.Started(8);
  fresh.Started(8);
  EXPECT_EQ(fresh.NextWait(0, microseconds(0)).count(), 0);  // no gap measured yet
}

TEST(CommitGatherTest, AnIdleSpellCountsAsAtMostFourLongestWaits) {
  CommitGather g(microseconds(300), 16);
  Clock::time_point t{};
  Load(g, t, 100, 8, microseconds(20));
  t += std::chrono::seconds(10);  // idle
  g.Arrived(t);
  EXPECT_LE(g.mean_gap_us(), 20.0 + (1200.0 - 20.0) / 8 + 0.01);
  Load(g, t, 4, 8, microseconds(20));  // busy again: waiting again within a few batches
  EXPECT_GT(g.NextWait(2, microseconds(0)).count(), 0);
}

}  // namespace
}  // namespace penstock::engine
