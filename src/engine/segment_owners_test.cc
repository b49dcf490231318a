// SegmentOwners: the in-memory (segment, run offset) -> shard map GC lists victims from.
#include "engine/segment_owners.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace penstock::engine {
namespace {

ShardKey Key(uint64_t stripe) { return ShardKey{7, {1, 2}, stripe, 0}; }

ShardRecord At(uint32_t segment, uint64_t offset, uint64_t length = 4096) {
  return ShardRecord::Contiguous(segment, offset, length, 1,
                                 std::vector<uint32_t>(BlocksFor(length), 0));
}

TEST(SegmentOwnersTest, FollowsWritesOverwritesAndDeletesInBatchOrder) {
  SegmentOwners owners(8);
  owners.Apply({{Key(0), At(1, 0), std::nullopt},
                {Key(1), At(1, 8192, 8000), std::nullopt},
                {Key(2), ShardRecord{}, std::nullopt}});  // empty: owns no space
  EXPECT_EQ(owners.Owners(1), (std::vector<ShardKey>{Key(0), Key(1)}));
  EXPECT_EQ(owners.Entries(), 2u);
  // Overwrite (moves to segment 2); then in one batch a write and a delete of one key.
  owners.Apply({{Key(0), At(2, 4096), At(1, 0)}});
  owners.Apply({{Key(1), At(3, 0), At(1, 8192, 8000)}, {Key(1), std::nullopt, At(3, 0)}});
  EXPECT_TRUE(owners.Owners(1).empty());
  EXPECT_EQ(owners.Owners(2), (std::vector<ShardKey>{Key(0)}));
  EXPECT_TRUE(owners.Owners(3).empty());
  EXPECT_EQ(owners.Entries(), 1u);
  EXPECT_TRUE(owners.Owners(99).empty());  // no such segment
}

TEST(SegmentOwnersTest, ARangeWriteMovesOnlyTheRunsItChanged) {
  SegmentOwners owners(8);
  ShardRecord whole = At(1, 0, 10 * kBlockSize);
  owners.Add(Key(5), whole.runs);
  // Blocks 3..4 rewritten into segment 4: runs [0,3) at (1, 0), [3,5) at (4, 0), [5,10) at
  // (1, 5 blocks). The run start (1, 0) stays; two new starts come.
  ShardRecord patched = whole;
  patched.runs = {{.segment = 1, .offset = 0, .first_block = 0, .block_count = 3},
                  {.segment = 4, .offset = 0, .first_block = 3, .block_count = 2},
                  {.segment = 1, .offset = 5 * kBlockSize, .first_block = 5, .block_count = 5}};
  owners.Apply({{Key(5), patched, whole}});
  EXPECT_EQ(owners.Entries(), 3u);
  EXPECT_EQ(owners.Owners(1), (std::vector<ShardKey>{Key(5)}));  // once, though two runs
  EXPECT_EQ(owners.Owners(4), (std::vector<ShardKey>{Key(5)}));
  // Rewritten whole elsewhere: every entry goes.
  owners.Apply({{Key(5), At(6, 0, 10 * kBlockSize), patched}});
  EXPECT_TRUE(owners.Owners(1).empty());
  EXPECT_TRUE(owners.Owners(4).empty());
  EXPECT_EQ(owners.Entries(), 1u);
}

// Against a model (a map per segment, as the structure used to be): recovery adds in key
// order (offsets out of order, some repeated), then random puts and erases, in offset order
// mostly and sometimes not; owners and counts agree all along, through the compactions.
TEST(SegmentOwnersTest, MatchesAMapModelThroughRecoveryWritesAndCompaction) {
  constexpr uint32_t kSegments = 4;
  SegmentOwners owners(kSegments);
  std::vector<std::map<uint64_t, ShardKey>> model(kSegments);
  std::mt19937_64 rng(11);
  auto run_at = [](uint32_t segment, uint64_t offset) {
    return BlockRun{.segment = segment, .offset = offset, .first_block = 0, .block_count = 1};
  };
  for (uint64_t k = 0; k < 3000; ++k) {  // recovery: Add in key order
    const uint32_t seg = static_cast<uint32_t>(rng() % kSegments);
    const uint64_t off = (rng() % 2000) * kBlockSize;
    owners.Add(Key(k), {run_at(seg, off)});
    model[seg].insert_or_assign(off, Key(k));
  }
  auto check = [&](const char* when) {
    uint64_t total = 0;
    for (uint32_t seg = 0; seg < kSegments; ++seg) {
      std::vector<ShardKey> want;
      std::set<ShardKey> seen;
      for (const auto& [off, key] : model[seg]) {
        if (seen.insert(key).second) want.push_back(key);
      }
      ASSERT_EQ(owners.Owners(seg), want) << when << ", segment " << seg;
      total += model[seg].size();
    }
    ASSERT_EQ(owners.Entries(), total) << when;
  };
  check("after recovery");
  std::vector<uint64_t> next(kSegments, 2000 * kBlockSize);  // the log's end in each segment
  for (int i = 0; i < 20000; ++i) {
    const uint32_t seg = static_cast<uint32_t>(rng() % kSegments);
    const ShardKey key = Key(rng() % 4000);
    if (rng() % 2 == 0) {  // a new run: at the log's end, or now and then behind it
      const uint64_t off = rng() % 8 == 0 ? (rng() % 2000) * kBlockSize : (next[seg] += kBlockSize);
      ShardRecord r;
      r.runs = {run_at(seg, off)};
      owners.Apply({{key, r, std::nullopt}});
      model[seg].insert_or_assign(off, key);
    } else if (!model[seg].empty()) {  // erase an existing entry (its owner's old run)
      auto it = model[seg].begin();
      std::advance(it, static_cast<long>(rng() % model[seg].size()));
      ShardRecord old;
      old.runs = {run_at(seg, it->first)};
      owners.Apply({{it->second, std::nullopt, old}});
      model[seg].erase(it);
    }
    if (i % 2500 == 0) check("while writing");
  }
  check("at the end");
}


// Random writes into shards written whole split their runs: the tails start at new offsets
// in old segments, all over them. Thousands of such entries in one segment, in random order,
// then erased in random order; owners stay in offset order throughout.
TEST(SegmentOwnersTest, EntriesInTheMiddleOfASegmentStayInOffsetOrder) {
  SegmentOwners owners(2);
  std::map<uint64_t, ShardKey> model;
  std::mt19937_64 rng(5);
  auto put = [&](uint64_t off, const ShardKey& key) {
    ShardRecord r;
    r.runs = {BlockRun{.segment = 1, .offset = off, .first_block = 0, .block_count = 1}};
    owners.Apply({{key, r, std::nullopt}});
    model.insert_or_assign(off, key);
  };
  auto check = [&] {
    std::vector<ShardKey> want;
    std::set<ShardKey> seen;
    for (const auto& [off, key] : model) {
      if (seen.insert(key).second) want.push_back(key);
    }
    ASSERT_EQ(owners.Owners(1), want);
    ASSERT_EQ(owners.Entries(), model.size());
  };
  for (uint64_t i = 0; i < 6000; ++i) put((rng() % 16384) * kBlockSize, Key(i));
  check();
  std::vector<uint64_t> offsets;
  for (const auto& [off, key] : model) offsets.push_back(off);
  std::shuffle(offsets.begin(), offsets.end(), rng);
  for (size_t i = 0; i < offsets.size(); ++i) {
    ShardRecord old;
    old.runs = {BlockRun{.segment = 1, .offset = offsets[i], .first_block = 0, .block_count = 1}};
    owners.Apply({{model.at(offsets[i]), std::nullopt, old}});
    model.erase(offsets[i]);
    if (i % 1000 == 0) check();
    if (i % 3 == 0) put((rng() % 16384) * kBlockSize, Key(10000 + i));  // some come back
  }
  check();
}

}  // namespace
}  // namespace penstock::engine
