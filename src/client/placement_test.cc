#include "client/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

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


TEST(PlacementTest, SlotsAreDistinctTargetsInDistinctDomains) {
  auto t = Targets(8);
  for (size_t i = 0; i < t.size(); ++i) t[i].fault_domain = "host-" + std::to_string(i / 2);  // 4 hosts
  for (uint64_t s = 0; s < 500; ++s) {
    auto slots = PlaceSlots({1, 2, 3, s}, t, 4);
    ASSERT_EQ(slots.size(), 4u);
    std::set<std::string> domains;
    for (size_t i : slots) domains.insert(t[i].fault_domain);
    EXPECT_EQ(domains.size(), 4u) << "stripe " << s;
    EXPECT_EQ(slots[0], PlaceShard({1, 2, 3, s}, t));  // slot 0 is the unprotected placement
    // Wider than the domains: still distinct targets, every domain used.
    auto wide = PlaceSlots({1, 2, 3, s}, t, 6);
    EXPECT_EQ(std::set<size_t>(wide.begin(), wide.end()).size(), 6u);
    EXPECT_TRUE(std::equal(slots.begin(), slots.end(), wide.begin()));  // a prefix
  }
}

TEST(PlacementTest, LosingATargetMovesOnlyItsSlots) {
  auto t = Targets(6);
  auto lost = t;
  lost[2].lost = true;
  int moved = 0;
  for (uint64_t s = 0; s < 2000; ++s) {
    auto before = PlaceSlots({4, 5, 6, s}, t, 3);
    auto after = PlaceSlots({4, 5, 6, s}, lost, 3);
    ASSERT_EQ(after.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NE(after[i], 2u);
      if (before[i] == 2) {
        ++moved;
        EXPECT_EQ(std::count(before.begin(), before.end(), after[i]), 0) << "substitute is a new target";
      } else {
        EXPECT_EQ(after[i], before[i]) << "stripe " << s << " slot " << i << " moved";
      }
    }
  }
  EXPECT_NEAR(moved, 1000, 150);  // 3 of 6 slots: half of the stripes had one on target 2
}

TEST(PlacementTest, TooFewUsableTargetsGiveFewerSlots) {
  auto t = Targets(3);
  t[0].lost = true;
  auto three = PlaceSlots({1, 1, 1, 1}, t, 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(std::count(three.begin(), three.end(), SIZE_MAX), 1);  // the lost one's slot stays empty
  auto two = PlaceSlots({1, 1, 1, 1}, t, 2);
  EXPECT_EQ(std::count(two.begin(), two.end(), SIZE_MAX), 0);
  EXPECT_EQ(PlaceSlots({1, 1, 1, 1}, t, 5).size(), 3u);
}

}  // namespace
}  // namespace penstock
