#include "client/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace penstock {
namespace {

std::vector<PlacementTarget> Targets(int n) {
  std::vector<PlacementTarget> t;
  for (int i = 0; i < n; ++i) t.push_back({static_cast<uint32_t>(i), "uuid-" + std::to_string(i), 1});
  return t;
}

TEST(PlacementTest, DeterministicAndOrderIndependent) {
  auto t = Targets(5);
  auto r = t;
  std::reverse(r.begin(), r.end());
  for (uint64_t s = 0; s < 200; ++s) {
    PlacementKey k{1, 2, 3, s};
    EXPECT_EQ(t[PlaceShard(k, t)].uuid, r[PlaceShard(k, r)].uuid);
    EXPECT_EQ(PlaceShard(k, t), PlaceShard(k, t));
  }
}

TEST(PlacementTest, Balanced) {
  auto t = Targets(4);
  std::map<size_t, int> counts;
  const int n = 40000;
  for (int s = 0; s < n; ++s) counts[PlaceShard({7, 11, 13, static_cast<uint64_t>(s)}, t)]++;
  for (auto& [idx, c] : counts) {
    EXPECT_NEAR(c, n / 4, n / 4 * 0.05) << "target " << idx;
  }
}

TEST(PlacementTest, AddingATargetMovesOnlyItsShare) {
  auto t4 = Targets(4);
  auto t5 = Targets(5);
  int moved = 0;
  const int n = 20000;
  for (int s = 0; s < n; ++s) {
    PlacementKey k{1, 5, 9, static_cast<uint64_t>(s)};
    const auto& before = t4[PlaceShard(k, t4)].uuid;
    const auto& after = t5[PlaceShard(k, t5)].uuid;
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, "uuid-4");  // only moves onto the new target
    }
  }
  EXPECT_NEAR(moved, n / 5, n / 5 * 0.1);
}

TEST(PlacementTest, WeightsSkewShare) {
  auto t = Targets(2);
  t[1].weight = 3;
  int on1 = 0;
  const int n = 20000;
  for (int s = 0; s < n; ++s) on1 += PlaceShard({1, 1, 1, static_cast<uint64_t>(s)}, t) == 1;
  EXPECT_NEAR(on1, n * 3 / 4, n * 0.03);
}

TEST(PlacementTest, PlaceShardsDistinct) {
  auto t = Targets(6);
  auto picks = PlaceShards({1, 2, 3, 4}, t, 3);
  ASSERT_EQ(picks.size(), 3u);
  std::sort(picks.begin(), picks.end());
  EXPECT_EQ(std::unique(picks.begin(), picks.end()), picks.end());
  EXPECT_EQ(PlaceShards({1, 2, 3, 4}, t, 10).size(), 6u);
}

}  // namespace
}  // namespace penstock
