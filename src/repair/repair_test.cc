// Table tests of repair's vote (vote.h): pure functions over listings and slots.
#include "repair/vote.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace penstock {
namespace {

TargetRef Up(uint32_t id) {
  TargetRef t;
  t.id = id;
  t.up = true;
  return t;
}

TargetRef Down(uint32_t id) {
  TargetRef t;
  t.id = id;
  t.up = false;
  return t;
}

std::vector<uint32_t> Ids(const std::vector<TargetRef>& targets) {
  std::vector<uint32_t> ids;
  for (const TargetRef& t : targets) ids.push_back(t.id);
  return ids;
}

TEST(RepairVoteTest, StripeVersionIsTheNewestEnoughShardsHold) {
  struct Case {
    const char* name;
    StripeShards shards;
    uint32_t need;
    uint64_t want;
  };
  const std::vector<Case> cases = {
      {"nothing listed", {}, 1, 0},
      {"replicas: the newest copy", {{0, {{1, 3, 10}, {2, 5, 10}}}}, 1, 5},
      {"ec: the newest of K shards", {{0, {{1, 5, 8}}}, {1, {{2, 4, 8}}}, {2, {{3, 4, 8}}}}, 2, 4},
      {"ec: all shards newest", {{0, {{1, 7, 8}}}, {1, {{2, 7, 8}}}, {2, {{3, 7, 8}, {4, 6, 8}}}}, 2, 7},
      // Two copies of one shard index count once.
      {"ec: one shard on two targets", {{0, {{1, 5, 8}, {2, 5, 8}}}, {1, {{3, 4, 8}}}, {2, {{4, 4, 8}}}}, 2, 4},
      {"ec: no version on K shards", {{0, {{1, 3, 8}}}, {1, {{2, 4, 8}}}}, 2, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(StripeVersion(c.shards, c.need), c.want);
  }
}

TEST(RepairVoteTest, AStripeSurvivesALossWhenEnoughShardsOfOneVersionStayElsewhere) {
  const std::vector<TargetRef> slots = {Up(1), Up(2), Up(3)};
  // rep:3 written on its quorum (1 and 2): losing either leaves a copy.
  const StripeShards rep = {{0, {{1, 5, 64}}}, {1, {{2, 5, 64}}}};
  EXPECT_TRUE(StripeSurvives(rep, slots, 1, 1));
  EXPECT_TRUE(StripeSurvives(rep, slots, 1, 3));
  // One copy only (none, or a write acknowledged below quorum): lost with its target.
  const StripeShards one = {{0, {{1, 5, 64}}}};
  EXPECT_FALSE(StripeSurvives(one, {Up(1)}, 1, 1));
  EXPECT_TRUE(StripeSurvives(one, {Up(1)}, 1, 2));
  // ec:2+1 with 2 shards at the newest version and a stale one: losing a newest-version holder
  // leaves one shard of that version, and the stale shard is no substitute.
  const StripeShards ec = {{0, {{1, 7, 64}}}, {1, {{2, 7, 64}}}, {2, {{3, 6, 64}}}};
  EXPECT_FALSE(StripeSurvives(ec, slots, 2, 1));
  EXPECT_TRUE(StripeSurvives(ec, slots, 2, 3));
  // A slot on a target down for now counts: it may come back with its shard.
  const StripeShards two = {{0, {{1, 7, 64}}}, {1, {{2, 7, 64}}}};
  EXPECT_FALSE(StripeSurvives(two, slots, 2, 1));
  EXPECT_TRUE(StripeSurvives(two, {Up(1), Up(2), Down(3)}, 2, 1));
  // Nothing listed (its target down): only down slots can hold it.
  EXPECT_FALSE(StripeSurvives({}, {Down(1)}, 1, 1));
  EXPECT_TRUE(StripeSurvives({}, {Down(1), Down(2)}, 1, 1));
}

TEST(RepairVoteTest, ShardLengthIsTheLastListedAtTheVersion) {
  const StripeShards shards = {{0, {{1, 4, 100}, {2, 5, 200}}}, {1, {{3, 5, 300}, {4, 6, 400}}}};
  EXPECT_EQ(ShardLengthAt(shards, 5), 300u);
  EXPECT_EQ(ShardLengthAt(shards, 4), 100u);
  EXPECT_EQ(ShardLengthAt(shards, 9), 0u);
}

TEST(RepairVoteTest, StripeSlotsLackingTheVersionAreFixed) {
  struct Case {
    const char* name;
    std::vector<TargetRef> slots;
    uint32_t width;
    StripeShards shards;
    std::vector<uint32_t> fix;
    bool unchecked;
    bool whole;
  };
  const StripeShards all_on_slots = {{0, {{1, 5, 8}}}, {1, {{2, 5, 8}}}, {2, {{3, 5, 8}}}};
  const std::vector<Case> cases = {
      {"whole", {Up(1), Up(2), Up(3)}, 3, all_on_slots, {}, false, true},
      {"a newer shard is as good", {Up(1), Up(2), Up(3)}, 3,
       {{0, {{1, 5, 8}}}, {1, {{2, 6, 8}}}, {2, {{3, 5, 8}}}}, {}, false, true},
      {"a slot lacks its shard", {Up(1), Up(2), Up(3)}, 3, {{0, {{1, 5, 8}}}, {2, {{3, 5, 8}}}}, {1}, false, false},
      {"a slot holds an older version", {Up(1), Up(2), Up(3)}, 3,
       {{0, {{1, 5, 8}}}, {1, {{2, 4, 8}}}, {2, {{3, 5, 8}}}}, {1}, false, false},
      // Slot i is asked for shard i only: shard 0 on slot 1's target does not count.
      {"slots permuted", {Up(2), Up(1), Up(3)}, 3, all_on_slots, {0, 1}, false, false},
      {"a new target took a slot", {Up(1), Up(9), Up(3)}, 3, all_on_slots, {1}, false, false},
      {"a slot down", {Up(1), Down(2), Up(3)}, 3, all_on_slots, {}, true, false},
      {"a slot with no target", {Up(1), Down(0), Up(3)}, 3, all_on_slots, {}, false, false},
      {"fewer slots than the width", {Up(1), Up(2)}, 3, all_on_slots, {}, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const SlotVerdict v = CheckStripeSlots(c.slots, c.width, c.shards, 5);
    EXPECT_EQ(v.fix, c.fix);
    EXPECT_EQ(v.unchecked, c.unchecked);
    EXPECT_EQ(v.whole, c.whole);
  }
}

// A head's listed copies: (target, copy index, version).
HeadCopies Copies(const std::vector<std::tuple<uint32_t, uint32_t, uint64_t>>& copies) {
  HeadCopies hc;
  for (const auto& [target, shard, version] : copies) {
    ListEntry e;
    e.key = WireShardKey{7, 1, 2, UINT64_MAX, shard, 0};
    e.shard_version = version;
    e.length = 64;
    AddHeadCopy(hc, target, e, false);
  }
  return hc;
}

TEST(RepairVoteTest, HeadSlotsLackingTheNewestCopyAreFixed) {
  struct Case {
    const char* name;
    std::vector<TargetRef> slots;
    std::optional<HeadCopies> copies;
    CorruptSet corrupt;
    std::vector<uint32_t> fix;
    bool unchecked;
    bool whole;
  };
  const HeadCopies both = Copies({{1, 0, 5}, {2, 1, 5}});
  const std::string corrupt_copy = KeyText(WireShardKey{7, 1, 2, UINT64_MAX, 1, 0});
  const std::vector<Case> cases = {
      {"whole", {Up(1), Up(2)}, both, {}, {}, false, true},
      {"none listed", {Up(1), Up(2)}, std::nullopt, {}, {0, 1}, false, false},
      {"an older copy", {Up(1), Up(2)}, Copies({{1, 0, 5}, {2, 1, 4}}), {}, {1}, false, false},
      {"a corrupt copy", {Up(1), Up(2)}, both, {{2, corrupt_copy}}, {1}, false, false},
      {"corrupt on another target only", {Up(1), Up(2)}, both, {{3, corrupt_copy}}, {}, false, true},
      // Copy 0 on the target of slot 1 is not the copy readers ask slot 1 for.
      {"slots permuted", {Up(2), Up(1)}, both, {}, {0, 1}, false, false},
      {"a slot down", {Up(1), Down(2)}, both, {}, {}, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const SlotVerdict v = CheckHeadSlots(c.slots, 2, c.copies ? &*c.copies : nullptr, 5, c.corrupt);
    EXPECT_EQ(v.fix, c.fix);
    EXPECT_EQ(v.unchecked, c.unchecked);
    EXPECT_EQ(v.whole, c.whole);
  }
}

TEST(RepairVoteTest, MissingShardsAreCopiedFromHoldersElseRebuilt) {
  struct Case {
    const char* name;
    StripeShards shards;
    std::vector<TargetRef> listed;
    bool protected_stripe;
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> copy_from;  // (shard, holder ids)
    std::vector<uint32_t> rebuild;
  };
  // Slots: targets 1, 2, 3; shard 1 is missing on target 2.
  const std::vector<Case> cases = {
      {"nowhere else: rebuilt", {{0, {{1, 5, 8}}}, {2, {{3, 5, 8}}}}, {Up(1), Up(2), Up(3)}, true, {}, {1}},
      {"left on an old slot: copied", {{0, {{1, 5, 8}}}, {1, {{4, 5, 8}}}, {2, {{3, 5, 8}}}},
       {Up(1), Up(2), Up(3), Up(4)}, true, {{1, {4}}}, {}},
      {"every holder in turn", {{0, {{1, 5, 8}}}, {1, {{4, 5, 8}, {5, 5, 8}}}},
       {Up(1), Up(2), Up(3), Up(4), Up(5)}, true, {{1, {4, 5}}}, {}},
      {"an older copy elsewhere: rebuilt", {{0, {{1, 5, 8}}}, {1, {{4, 4, 8}}}}, {Up(1), Up(4)}, true, {}, {1}},
      {"a holder not listed: rebuilt", {{0, {{1, 5, 8}}}, {1, {{4, 5, 8}}}}, {Up(1), Up(2), Up(3)}, true, {}, {1}},
      {"a holder down: rebuilt", {{0, {{1, 5, 8}}}, {1, {{4, 5, 8}}}}, {Up(1), Down(4)}, true, {}, {1}},
      // A truncate deleted the stripe on its slots: copies left elsewhere are not brought back.
      {"nothing on the slots: rebuilt", {{1, {{4, 5, 8}}}}, {Up(4)}, true, {}, {1}},
      // An unprotected stripe has no other copy: its one slot never held it before.
      {"unprotected: copied", {{1, {{4, 5, 8}}}}, {Up(4)}, false, {{1, {4}}}, {}},
  };
  const std::vector<TargetRef> slots = {Up(1), Up(2), Up(3)};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const FixPlan plan = PlanFix({1}, c.shards, slots, 5, c.protected_stripe, c.listed);
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> copy_from;
    for (const auto& [i, from] : plan.copy_from) copy_from.emplace_back(i, Ids(from));
    EXPECT_EQ(copy_from, c.copy_from);
    EXPECT_EQ(plan.rebuild, c.rebuild);
  }
}

TEST(RepairVoteTest, CopiesOffTheirSlotsAreFound) {
  const std::vector<TargetRef> slots = {Up(1), Up(2)};
  const StripeShards shards = {
      {0, {{1, 5, 8}, {3, 4, 8}}},  // on its slot, and left on target 3
      {1, {{2, 5, 8}, {1, 5, 8}}},  // on its slot, and on slot 0's target
      {2, {{4, 5, 8}}},             // past the slots: not judged
  };
  const std::vector<OffSlotCopy> off = CopiesOffSlots(shards, slots);
  ASSERT_EQ(off.size(), 2u);
  EXPECT_EQ(off[0].shard, 0u);
  EXPECT_EQ(off[0].target, 3u);
  EXPECT_EQ(off[0].version, 4u);
  EXPECT_EQ(off[1].shard, 1u);
  EXPECT_EQ(off[1].target, 1u);
  EXPECT_EQ(off[1].version, 5u);
}

TEST(RepairVoteTest, HeadCopiesOffTheirSlotsAreFound) {
  // Copy 0 on its slot; copy 1 on slot 0's target; copy 1 on a target that is no slot; copy 5
  // past the slots.
  const HeadCopies hc = Copies({{1, 0, 5}, {1, 1, 5}, {9, 1, 5}, {2, 5, 5}, {2, 1, 5}});
  EXPECT_EQ(HeadCopiesOffSlots(hc, {Up(1), Up(2)}), (std::vector<size_t>{1, 2, 3}));
}

TEST(RepairVoteTest, OnItsSlot) {
  struct Case {
    const char* name;
    uint32_t width;
    uint32_t target;
    uint32_t shard;
    bool want;
  };
  const std::vector<TargetRef> slots = {Up(1), Up(2), Up(3)};
  const std::vector<Case> cases = {
      {"shard on its slot", 3, 2, 1, true},
      {"shard on another slot", 3, 1, 1, false},
      {"shard past the slots", 3, 3, 4, false},
      {"unprotected: slot 0 whatever the index", 1, 1, 2, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(OnItsSlot(slots, c.width, c.target, c.shard), c.want);
  }
}

TEST(RepairVoteTest, HeadCopiesAreOneTombstoneWhenAllAreEmptyAtOneVersion) {
  struct Case {
    const char* name;
    std::vector<std::tuple<uint64_t, uint32_t, bool>> copies;  // (version, length, corrupt)
    bool same_tombstone;
  };
  const std::vector<Case> cases = {
      {"one tombstone everywhere", {{5, 0, false}, {5, 0, false}}, true},
      {"a copy with data", {{5, 0, false}, {5, 64, false}}, false},
      {"tombstones of two versions", {{5, 0, false}, {6, 0, false}}, false},
      {"a corrupt copy", {{5, 0, false}, {5, 0, true}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    HeadCopies hc;
    uint32_t target = 1;
    for (const auto& [version, length, corrupt] : c.copies) {
      ListEntry e;
      e.key = WireShardKey{7, 1, 2, UINT64_MAX, 0, 0};
      e.shard_version = version;
      e.length = length;
      AddHeadCopy(hc, target++, e, corrupt);
    }
    EXPECT_EQ(hc.same_tombstone, c.same_tombstone);
    EXPECT_EQ(hc.version, std::get<0>(c.copies[0]));
    EXPECT_EQ(hc.copies.size(), c.copies.size());
    EXPECT_EQ(hc.versions.size(), c.copies.size());
  }
}

TEST(RepairVoteTest, KeyTextIsWhatTargetsReport) {
  EXPECT_EQ(KeyText(WireShardKey{3, 0x0123456789abcdef, 0x1, 2, 0, 0}),
            "c=3 obj=0123456789abcdef:0000000000000001 stripe=2 shard=0");
  EXPECT_EQ(KeyText(WireShardKey{3, 1, 2, UINT64_MAX, 1, 0}),
            "c=3 obj=0000000000000001:0000000000000002 stripe=head shard=1");
}

}  // namespace
}  // namespace penstock
