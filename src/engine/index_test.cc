// The index: records only. Segment entries an older version kept beside them are dropped at
// open, with the marker that said they were complete (an older version then writes them again).
#include "engine/index.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "common/temp_dir.h"

namespace penstock::engine {
namespace {

ShardRecord At(uint32_t segment, uint64_t offset, uint64_t length = 4096) {
  return ShardRecord::Contiguous(segment, offset, length, 1,
                                 std::vector<uint32_t>(BlocksFor(length), 0));
}

ShardKey Key(uint64_t stripe) { return ShardKey{7, {1, 2}, stripe, 0}; }

// Keys in [from, to) of the raw RocksDB directory.
int CountKeys(const std::string& path, const std::string& from, const std::string& to) {
  rocksdb::DB* raw = nullptr;
  EXPECT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  int n = 0;
  for (it->Seek(from); it->Valid() && it->key().ToString() < to; it->Next()) ++n;
  return n;
}

TEST(IndexTest, AppliesRecordsOnlyAndDropsTheSegmentEntriesOfAnOlderVersion) {
  testing::TempDir dir("index");
  const std::string path = dir.path() + "/idx";
  const std::string segments(1, kSegmentTag), after(1, static_cast<char>(kSegmentTag + 1));
  {
    auto index = Index::Open(path);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    ASSERT_TRUE((*index)->Apply({{Key(0), At(4, 0), std::nullopt}, {Key(1), At(5, 4096), std::nullopt}}).ok());
    ASSERT_TRUE((*index)->Apply({{Key(0), At(6, 0), At(4, 0)}}).ok());
    EXPECT_EQ(*(*index)->DropSegmentEntries(), false);  // none written
  }
  EXPECT_EQ(CountKeys(path, segments, after), 0);
  EXPECT_EQ(CountKeys(path, Index::AllShardsPrefix(), segments), 2);
  {  // What an older version leaves: segment entries and their marker.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), EncodeSegmentKey(6, 0), EncodeShardKey(Key(0))).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), EncodeSegmentKey(5, 4096), EncodeShardKey(Key(1))).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(),
                        rocksdb::Slice(kMetaSegmentIndexKey.data(), kMetaSegmentIndexKey.size()), "1")
                    .ok());
  }
  EXPECT_EQ(CountKeys(path, segments, after), 2);
  {
    auto index = Index::Open(path);
    ASSERT_TRUE(index.ok());
    EXPECT_EQ(*(*index)->DropSegmentEntries(), true);
    EXPECT_EQ(*(*index)->DropSegmentEntries(), false);
    auto got = (*index)->Get(Key(0));
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ(**got, At(6, 0));  // records untouched
  }
  EXPECT_EQ(CountKeys(path, segments, after), 0);
  EXPECT_EQ(CountKeys(path, std::string(kMetaSegmentIndexKey), std::string(kMetaSegmentIndexKey) + "\x01"), 0);
  EXPECT_EQ(CountKeys(path, Index::AllShardsPrefix(), segments), 2);
}

}  // namespace
}  // namespace penstock::engine
