// The index's segment entries: kept in step with the shard records by every batch, listed per
// segment for GC, and written once for an index made before they existed.
#include "engine/index.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <set>

#include "common/temp_dir.h"

namespace penstock::engine {
namespace {

ShardRecord At(uint32_t segment, uint64_t offset, uint64_t length = 4096) {
  return ShardRecord::Contiguous(segment, offset, length, 1,
                                 std::vector<uint32_t>(BlocksFor(length), 0));
}

ShardKey Key(uint64_t stripe) { return ShardKey{7, {1, 2}, stripe, 0}; }

std::set<std::pair<uint64_t, uint64_t>> InSegment(const Index& index, uint32_t segment) {
  std::set<std::pair<uint64_t, uint64_t>> out;  // (stripe, offset)
  EXPECT_TRUE(index.ScanSegment(segment, [&](const ShardKey& k, const ShardRecord& r) {
    for (const BlockRun& run : r.runs) {
      if (run.segment == segment) out.emplace(k.stripe, run.offset);
    }
    return true;
  }).ok());
  return out;
}

TEST(IndexTest, SegmentEntriesFollowEveryUpdate) {
  testing::TempDir dir("index");
  auto index = Index::Open(dir.path() + "/idx");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  Index& ix = **index;
  EXPECT_EQ(*ix.EnsureSegmentEntries(), 0u);  // a new index has them from the start
  ASSERT_TRUE(ix.Apply({{Key(0), At(1, 0), std::nullopt},
                        {Key(1), At(1, 8192, 8000), std::nullopt},
                        {Key(2), ShardRecord{}, std::nullopt}})  // empty: no space, no entry
                  .ok());
  EXPECT_EQ(InSegment(ix, 1), (std::set<std::pair<uint64_t, uint64_t>>{{0, 0}, {1, 8192}}));
  // Overwrite (moves to segment 2), then in one batch a write and a delete of the same key.
  ASSERT_TRUE(ix.Apply({{Key(0), At(2, 4096), At(1, 0)}}).ok());
  ASSERT_TRUE(ix.Apply({{Key(1), At(3, 0), At(1, 8192, 8000)}, {Key(1), std::nullopt, At(3, 0)}}).ok());
  EXPECT_TRUE(InSegment(ix, 1).empty());
  EXPECT_EQ(InSegment(ix, 2), (std::set<std::pair<uint64_t, uint64_t>>{{0, 4096}}));
  EXPECT_TRUE(InSegment(ix, 3).empty());
}

TEST(IndexTest, OlderIndexGetsItsSegmentEntriesOnce) {
  testing::TempDir dir("index");
  const std::string path = dir.path() + "/idx";
  {
    auto index = Index::Open(path);
    ASSERT_TRUE(index.ok());
    ASSERT_TRUE((*index)->Apply({{Key(0), At(4, 0), std::nullopt}, {Key(1), At(5, 4096), std::nullopt}}).ok());
  }
  {  // What an index written before segment entries looks like: records only.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), EncodeSegmentKey(4, 0)).ok());
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), EncodeSegmentKey(5, 4096)).ok());
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(),
                           rocksdb::Slice(kMetaSegmentIndexKey.data(), kMetaSegmentIndexKey.size()))
                    .ok());
  }
  auto index = Index::Open(path);
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE(InSegment(**index, 4).empty());
  EXPECT_EQ(*(*index)->EnsureSegmentEntries(), 2u);
  EXPECT_EQ(*(*index)->EnsureSegmentEntries(), 0u);
  EXPECT_EQ(InSegment(**index, 4), (std::set<std::pair<uint64_t, uint64_t>>{{0, 0}}));
  EXPECT_EQ(InSegment(**index, 5), (std::set<std::pair<uint64_t, uint64_t>>{{1, 4096}}));
}

}  // namespace
}  // namespace penstock::engine
