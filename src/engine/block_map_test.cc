// Block maps as values: composing range writes, the space a new record stops using, relocation.
#include "engine/block_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace penstock::engine {
namespace {

constexpr uint64_t B = kBlockSize;

BlockRun At(uint32_t segment, uint64_t offset, uint64_t first, uint64_t count) {
  return {.segment = segment, .offset = offset, .first_block = first, .block_count = count};
}
BlockRun Hole(uint64_t first, uint64_t count) { return At(kNoSegment, 0, first, count); }

ShardRecord Record(std::vector<BlockRun> runs, uint64_t length) {
  ShardRecord r;
  r.runs = std::move(runs);
  r.length = length;
  r.block_crcs.assign(BlocksFor(length), 7);
  return r;
}

TEST(BlockMapTest, RangeWritesReplaceTheBlocksTheyCover) {
  const ShardRecord one = Record({At(1, 0, 0, 8)}, 8 * B);
  struct Case {
    const char* what;
    std::optional<ShardRecord> old;
    uint64_t first, count, end;
    std::vector<BlockRun> runs;
    uint64_t length;
  } cases[] = {
      {"middle", one, 3, 2, 5 * B, {At(1, 0, 0, 3), At(2, 0, 3, 2), At(1, 5 * B, 5, 3)}, 8 * B},
      {"head", one, 0, 2, 2 * B, {At(2, 0, 0, 2), At(1, 2 * B, 2, 6)}, 8 * B},
      {"tail", one, 6, 2, 8 * B, {At(1, 0, 0, 6), At(2, 0, 6, 2)}, 8 * B},
      {"whole", one, 0, 8, 8 * B, {At(2, 0, 0, 8)}, 8 * B},
      {"past the end", one, 10, 1, 10 * B + 5, {At(1, 0, 0, 8), Hole(8, 2), At(2, 0, 10, 1)}, 10 * B + 5},
      {"straddling the end", one, 7, 3, 10 * B, {At(1, 0, 0, 7), At(2, 0, 7, 3)}, 10 * B},
      {"absent", std::nullopt, 2, 1, 3 * B, {Hole(0, 2), At(2, 0, 2, 1)}, 3 * B},
      {"length only", one, 0, 0, 9 * B + 1, {At(1, 0, 0, 8), Hole(8, 2)}, 9 * B + 1},
      {"across runs",
       Record({At(1, 0, 0, 2), Hole(2, 2), At(3, 4 * B, 4, 4)}, 8 * B), 1, 4, 5 * B,
       {At(1, 0, 0, 1), At(2, 0, 1, 4), At(3, 5 * B, 5, 3)}, 8 * B},
      {"joins a neighbour it continues", one, 8, 1, 9 * B,
       {At(1, 0, 0, 8), At(2, 0, 8, 1)}, 9 * B},
  };
  for (const Case& c : cases) {
    std::vector<uint32_t> crcs(c.count, 42);
    ShardRecord got = ApplyRangeWrite(c.old, c.first, 2, 0, crcs, c.end, 9);
    EXPECT_EQ(got.runs, c.runs) << c.what;
    EXPECT_EQ(got.length, c.length) << c.what;
    EXPECT_EQ(got.version, 9u) << c.what;
    ASSERT_EQ(got.block_crcs.size(), BlocksFor(c.length)) << c.what;
    for (uint64_t b = 0; b < got.block_crcs.size(); ++b) {
      const bool written = b >= c.first && b < c.first + c.count;
      const bool hole = !BlockPlace(got, b).has_value();
      const uint32_t want = written ? 42 : hole ? ZeroBlockCrc() : 7;
      EXPECT_EQ(got.block_crcs[b], want) << c.what << " block " << b;
    }
  }
  // Appending right after a run in the same segment joins them.
  ShardRecord appended = ApplyRangeWrite(Record({At(1, 0, 0, 2)}, 2 * B), 2, 1, 2 * B,
                                         std::vector<uint32_t>(1, 1), 3 * B, 2);
  EXPECT_EQ(appended.runs, (std::vector<BlockRun>{At(1, 0, 0, 3)}));
}

TEST(BlockMapTest, ReleasedSpaceIsWhatTheNewRecordNoLongerMaps) {
  const ShardRecord old = Record({At(1, 0, 0, 4), Hole(4, 2), At(3, 8 * B, 6, 2)}, 8 * B);
  // A range write over blocks 2..6: blocks 2,3 of segment 1 and block 6 of segment 3 die.
  ShardRecord next = ApplyRangeWrite(old, 2, 5, 0, std::vector<uint32_t>(5, 1), 7 * B, 2);
  EXPECT_EQ(ReleasedSpace(old, next),
            (std::vector<Extent>{{1, 2 * B, 2 * B}, {3, 8 * B, B}}));
  // Deleted, or rewritten whole: everything.
  EXPECT_EQ(ReleasedSpace(old, std::nullopt), (std::vector<Extent>{{1, 0, 4 * B}, {3, 8 * B, 2 * B}}));
  EXPECT_EQ(ReleasedSpace(old, Record({At(9, 0, 0, 8)}, 8 * B)), ReleasedSpace(old, std::nullopt));
  // Only the version changed: nothing.
  ShardRecord same = old;
  same.version = 5;
  EXPECT_TRUE(ReleasedSpace(old, same).empty());
  EXPECT_EQ(OwnedSpace(old), (std::vector<Extent>{{1, 0, 4 * B}, {3, 8 * B, 2 * B}}));
}

TEST(BlockMapTest, RelocationMovesWhatLiesInTheVictimAndKeepsTheRest) {
  const ShardRecord r = Record({At(1, 0, 0, 2), Hole(2, 3), At(3, 8 * B, 5, 1), At(1, 4 * B, 6, 2)}, 8 * B);
  ShardRecord moved = Relocated(r, 1, 7, 16 * B);
  EXPECT_EQ(moved.runs, (std::vector<BlockRun>{At(7, 16 * B, 0, 2), Hole(2, 3), At(3, 8 * B, 5, 1),
                                                At(7, 18 * B, 6, 2)}));
  EXPECT_EQ(moved.block_crcs, r.block_crcs);
  EXPECT_EQ(moved.stored_bytes(), r.stored_bytes());
  EXPECT_EQ(StoredBytesIn(r, 1), 4 * B);
  // Moved next to each other, neighbours join.
  ShardRecord joined = Relocated(Record({At(1, 0, 0, 2), At(1, 8 * B, 2, 2)}, 4 * B), 1, 2, 0);
  EXPECT_EQ(joined.runs, (std::vector<BlockRun>{At(2, 0, 0, 4)}));
  EXPECT_EQ(SegmentsOf(r), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(SegmentsOf(r, 2, 6), (std::vector<uint32_t>{3}));
  EXPECT_EQ(BlockPlace(r, 7), (std::pair<uint32_t, uint64_t>{1, 5 * B}));
  EXPECT_EQ(BlockPlace(r, 3), std::nullopt);
}

TEST(BlockMapTest, AMoveSkipsBlocksWrittenSinceGcReadThem) {
  const ShardRecord read = Record({At(1, 0, 0, 4), At(2, 0, 4, 2)}, 6 * B);
  const ShardRecord moved = Relocated(read, 1, 9, 8 * B);  // blocks 0-3 to segment 9
  EXPECT_EQ(moved.runs, (std::vector<BlockRun>{At(9, 8 * B, 0, 4), At(2, 0, 4, 2)}));
  // Meanwhile block 1 was range-written elsewhere.
  ShardRecord current = ApplyRangeWrite(read, 1, 5, 0, std::vector<uint32_t>(1, 3), 2 * B, 2);
  ShardRecord next = ApplyMove(current, read, moved, 1);
  EXPECT_EQ(next.runs, (std::vector<BlockRun>{At(9, 8 * B, 0, 1), At(5, 0, 1, 1), At(9, 10 * B, 2, 2),
                                               At(2, 0, 4, 2)}));
  EXPECT_EQ(next.version, 2u);
  EXPECT_EQ(next.block_crcs, current.block_crcs);
  // The copy of block 1 is unused; the victim's places all die.
  EXPECT_EQ(UnusedSpace({9, 8 * B, 4 * B}, next), (std::vector<Extent>{{9, 9 * B, B}}));
  EXPECT_EQ(ReleasedSpace(current, next), (std::vector<Extent>{{1, 0, B}, {1, 2 * B, 2 * B}}));
  EXPECT_EQ(UnusedSpace({9, 8 * B, 4 * B}, std::nullopt), (std::vector<Extent>{{9, 8 * B, 4 * B}}));
  // Rewritten whole since: nothing moves.
  ShardRecord rewritten = Record({At(7, 0, 0, 6)}, 6 * B);
  EXPECT_EQ(ApplyMove(rewritten, read, moved, 1), rewritten);
}

// Random range writes (fresh space each, sometimes past the end, sometimes continuing the last
// write on the device so runs join) and GC moves, checked against the definitions: the linear
// passes of RunsStartingElsewhere, ReleasedSpace and RunHolding agree with a search of every run.
TEST(BlockMapTest, LinearPassesMatchTheDefinitionsOnRandomHistories) {
  std::mt19937_64 rng(42);
  for (int history = 0; history < 50; ++history) {
    std::optional<ShardRecord> record;
    uint32_t segment = 1;
    uint64_t append = 0;  // next fresh offset in `segment`
    for (int step = 0; step < 200; ++step) {
      const uint64_t blocks = record ? BlocksFor(record->length) : 0;
      ShardRecord next;
      if (record && rng() % 10 == 0) {
        // GC: what lies in a random segment the record uses moves to fresh space.
        std::vector<uint32_t> used = SegmentsOf(*record);
        if (used.empty()) continue;
        const uint32_t from = used[rng() % used.size()];
        next = Relocated(*record, from, ++segment, 0);
        append = StoredBytesIn(*record, from);
      } else {
        if (record && rng() % 5 == 0) {
          // A record not joined everywhere (as an older version may have stored it): one run
          // cut in two at the same places. The diffs below must not depend on joins.
          const size_t k = rng() % record->runs.size();
          const BlockRun run = record->runs[k];
          if (run.block_count > 1) {
            const uint64_t cut = 1 + rng() % (run.block_count - 1);
            BlockRun head = run, tail = run;
            head.block_count = cut;
            tail.first_block += cut;
            tail.block_count -= cut;
            if (!run.hole()) tail.offset += cut * B;
            record->runs[k] = head;
            record->runs.insert(record->runs.begin() + static_cast<std::ptrdiff_t>(k) + 1, tail);
          }
        }
        const uint64_t first = rng() % (blocks + 8);
        const uint64_t count = 1 + rng() % 6;
        if (rng() % 4 == 0) append += (1 + rng() % 3) * B;  // not contiguous with the last write
        if (rng() % 16 == 0) {
          ++segment;
          append = 0;
        }
        std::vector<uint32_t> crcs(count, 9);
        next = ApplyRangeWrite(record, first, segment, append, crcs, (first + count) * B, step);
        append += count * B;
        if (record) {
          // The applier's shortcuts for a range write agree with the whole passes.
          const RunChanges c = RangeWriteRunChanges(*record, next, first, first + count);
          ASSERT_EQ(c.gone, RunsStartingElsewhere(record->runs, next.runs)) << history << "/" << step;
          ASSERT_EQ(c.came, RunsStartingElsewhere(next.runs, record->runs)) << history << "/" << step;
          ASSERT_EQ(RangeWriteReleasedSpace(*record, first, first + count), ReleasedSpace(*record, next))
              << history << "/" << step;
        }
      }
      const std::vector<BlockRun> none;
      const std::vector<BlockRun>& old_runs = record ? record->runs : none;
      auto by_search = [](const std::vector<BlockRun>& runs, const std::vector<BlockRun>& other) {
        std::vector<BlockRun> out;
        for (const BlockRun& r : runs) {
          if (r.hole()) continue;
          if (std::none_of(other.begin(), other.end(), [&](const BlockRun& o) {
                return o.segment == r.segment && o.offset == r.offset;
              })) {
            out.push_back(r);
          }
        }
        return out;
      };
      ASSERT_EQ(RunsStartingElsewhere(old_runs, next.runs), by_search(old_runs, next.runs)) << history << "/" << step;
      ASSERT_EQ(RunsStartingElsewhere(next.runs, old_runs), by_search(next.runs, old_runs)) << history << "/" << step;
      if (record) {
        // Released space, block by block: the old places the new record does not map the same.
        uint64_t released = 0, expected = 0;
        for (const Extent& e : ReleasedSpace(*record, next)) released += e.length;
        for (uint64_t b = 0; b < BlocksFor(record->length); ++b) {
          auto was = BlockPlace(*record, b);
          if (was && BlockPlace(next, b) != was) expected += B;
        }
        ASSERT_EQ(released, expected) << history << "/" << step;
      }
      for (uint64_t b = 0; b < BlocksFor(next.length) + 2; ++b) {
        const BlockRun* run = RunHolding(next, b);
        const BlockRun* searched = nullptr;
        for (const BlockRun& r : next.runs) {
          if (r.first_block <= b && b < r.end_block()) searched = &r;
        }
        ASSERT_EQ(run, searched) << history << "/" << step << " block " << b;
      }
      record = std::move(next);
    }
  }
}

}  // namespace
}  // namespace penstock::engine
