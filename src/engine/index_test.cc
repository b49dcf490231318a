// The index: records only. Segment entries an older version kept beside them are dropped at
// open, with the marker that said they were complete (an older version then writes them again).
#include "engine/index.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <array>
#include <atomic>
#include <random>
#include <thread>

#include "common/temp_dir.h"
#include "engine/block_map.h"

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

// The record cache: an Apply leaves the records it wrote in it (deletes drop theirs; a batch's
// later update of a key wins), so Gets after it answer from memory; a missing record is not
// cached; a reopened index (empty cache) decodes the same records, once.
TEST(IndexTest, RecordCacheServesWhatTheIndexHolds) {
  testing::TempDir dir("index");
  const std::string path = dir.path() + "/idx";
  ShardRecord mapped = At(3, 8192, 3 * 4096 + 100);
  mapped.runs = {{3, 8192, 0, 2}, {kNoSegment, 0, 2, 1}, {9, 4096, 3, 1}};  // segment, offset, first, count
  mapped.block_crcs = {11, 22, 33, 44};
  mapped.version = 9;
  {
    auto index = Index::Open(path);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    Index& ix = **index;
    ASSERT_TRUE(ix.Apply({{Key(0), At(4, 0), std::nullopt}, {Key(1), mapped, std::nullopt},
                          {Key(2), At(5, 0), std::nullopt}, {Key(2), std::nullopt, At(5, 0)},
                          {Key(3), At(6, 0), std::nullopt}, {Key(3), At(7, 0), At(6, 0)}})
                    .ok());
    for (int round = 0; round < 2; ++round) {  // from memory both times
      EXPECT_EQ(**ix.Get(Key(0)), At(4, 0));
      EXPECT_EQ(**ix.Get(Key(1)), mapped);
      EXPECT_FALSE(ix.Get(Key(2))->has_value());
      EXPECT_EQ(**ix.Get(Key(3)), At(7, 0));
      EXPECT_EQ(ix.cache_hits(), (round + 1) * 3u);  // a missing record is not cached
    }
    ASSERT_TRUE(ix.Apply({{Key(0), std::nullopt, At(4, 0)}, {Key(3), At(8, 0), At(7, 0)}}).ok());
    EXPECT_FALSE(ix.Get(Key(0))->has_value());
    EXPECT_EQ(**ix.Get(Key(3)), At(8, 0));
    EXPECT_EQ(**ix.Get(Key(1)), mapped);
    EXPECT_EQ(ix.cache_hits(), 8u);
  }
  auto index = Index::Open(path);
  ASSERT_TRUE(index.ok());
  Index& ix = **index;
  EXPECT_EQ(**ix.Get(Key(1)), mapped) << "what was cached is what RocksDB decodes";
  EXPECT_EQ(**ix.Get(Key(3)), At(8, 0));
  EXPECT_FALSE(ix.Get(Key(0))->has_value());
  EXPECT_EQ(ix.cache_hits(), 0u);
  EXPECT_EQ(**ix.Get(Key(1)), mapped);  // decoded once, then from memory
  EXPECT_EQ(ix.cache_hits(), 1u);
}

// Readers racing a writer never see a record older than the last Apply that returned before
// their Get began, and never leave an old record cached over a newer one. The cache holds one
// record per stripe and the writer puts a key of the same stripe after each version, so readers
// keep missing and reading RocksDB while newer versions land.
TEST(IndexTest, RecordCacheNeverGoesBackInTime) {
  testing::TempDir dir("index");
  constexpr size_t kStripes = 64;  // Index's, and its stripe function below
  auto index = Index::Open(dir.path() + "/idx", /*sync=*/false, kStripes * 300);
  ASSERT_TRUE(index.ok());
  Index& ix = **index;
  constexpr uint64_t kKeys = 4, kVersions = 3000;
  auto stripe = [](const ShardKey& k) { return (ShardKeyHash{}(k) >> 7) % kStripes; };
  std::array<ShardKey, kKeys> churn;  // a key of the same stripe as Key(k)
  for (uint64_t k = 0; k < kKeys; ++k) {
    uint64_t c = 1000;
    while (stripe(Key(c)) != stripe(Key(k))) ++c;
    churn[k] = Key(c);
  }
  std::array<std::atomic<uint64_t>, kKeys> done{};
  std::atomic<bool> stop{false};
  std::atomic<int> violations{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      for (uint64_t i = t; !stop.load(); ++i) {
        const uint64_t k = i % kKeys;
        const uint64_t at_least = done[k].load();
        auto got = ix.Get(Key(k));
        if (!got.ok() || (at_least > 0 && (!got->has_value() || (*got)->version < at_least))) ++violations;
      }
    });
  }
  for (uint64_t v = 1; v <= kVersions; ++v) {
    for (uint64_t k = 0; k < kKeys; ++k) {
      ShardRecord r = At(static_cast<uint32_t>(v % 7), 0);
      r.version = v;
      ASSERT_TRUE(ix.Apply({{Key(k), r, std::nullopt}}, std::nullopt, /*sync=*/false).ok());
      done[k].store(v);
      ASSERT_TRUE(ix.Apply({{churn[k], At(1, 0), std::nullopt}}, std::nullopt, /*sync=*/false).ok());
    }
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(violations.load(), 0);
  for (uint64_t k = 0; k < kKeys; ++k) EXPECT_EQ((*ix.Get(Key(k)))->version, kVersions);
  EXPECT_GT(ix.cache_hits(), 0u);
}

// Range writes onto a record go into RocksDB as merge operands (only the written blocks) and
// read back as the whole record the committer computed: from the memtable, after a reopen (the
// WAL replayed), through a scan, and after a flush and compaction merged them; a version-5
// build (no merge operator) cannot read such a key, hence device format 6.
TEST(IndexTest, RangeWritesGoInAsOperandsAndReadBackWhole) {
  testing::TempDir dir("index");
  const std::string path = dir.path() + "/idx";
  std::mt19937_64 rng(7);
  constexpr uint64_t kBlocks = 256;
  std::vector<uint32_t> crcs(kBlocks);
  for (uint32_t& c : crcs) c = static_cast<uint32_t>(rng());
  std::optional<ShardRecord> expect[2];
  {
    auto index = Index::Open(path);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    Index& ix = **index;
    for (uint64_t k = 0; k < 2; ++k) {
      expect[k] = ShardRecord::Contiguous(1, k << 20, kBlocks * 4096, 1, crcs);
      ASSERT_TRUE(ix.Apply({{Key(k), expect[k], std::nullopt}}).ok());
    }
    for (uint64_t i = 0; i < 3 * Index::kMaxMergesPerKey; ++i) {
      std::vector<Index::Update> batch;
      for (uint64_t k = 0; k < 2; ++k) {
        // 1 to 3 blocks anywhere, now and then past the end (the shard grows, with a hole).
        const uint64_t count = 1 + rng() % 3;
        const uint64_t blocks = expect[k]->block_crcs.size();
        const uint64_t first = rng() % 8 == 0 ? blocks + rng() % 3 : rng() % (blocks - count);
        std::vector<uint32_t> written(count);
        for (uint32_t& c : written) c = static_cast<uint32_t>(rng());
        const uint64_t end = std::max<uint64_t>(expect[k]->length, (first + count) * 4096 - rng() % 100);
        ShardRecord next = ApplyRangeWrite(expect[k], first, 2 + static_cast<uint32_t>(k),
                                           i * 16384, written, end, 2 + i);
        batch.push_back({.key = Key(k), .record = next, .old = expect[k], .written_begin = first,
                         .written_end = first + count, .range_write = true});
        expect[k] = std::move(next);
      }
      ASSERT_TRUE(ix.Apply(batch, std::nullopt, /*sync=*/i % 5 == 0).ok());
      for (uint64_t k = 0; k < 2; ++k) {
        auto got = ix.Get(Key(k));  // the record cache: what Apply was given
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(**got, *expect[k]) << "after write " << i;
      }
      // RocksDB's own merge of the operands gives the same records (a scan decodes them).
      ASSERT_TRUE(ix.Scan(Index::AllShardsPrefix(), std::nullopt, [&](const ShardKey& key, const ShardRecord& r) {
                      EXPECT_EQ(r, *expect[key.stripe]) << "after write " << i;
                      return true;
                    }).ok());
    }
    ASSERT_TRUE(ix.SyncWal().ok());
  }
  {  // RocksDB without the merge operator does not read the record (its WAL replay stops at
     // the first operand): the operands are there, and a format-5 build must not open this.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string value;
    rocksdb::Status got = db->Get(rocksdb::ReadOptions(), EncodeShardKey(Key(0)), &value);
    EXPECT_FALSE(got.ok() && DecodeShardRecord(Key(0), value).ok() &&
                 *DecodeShardRecord(Key(0), value) == *expect[0]);
  }
  auto index = Index::Open(path);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  Index& ix = **index;
  for (uint64_t k = 0; k < 2; ++k) EXPECT_EQ(**ix.Get(Key(k)), *expect[k]);
  int seen = 0;
  ASSERT_TRUE(ix.Scan(Index::AllShardsPrefix(), std::nullopt, [&](const ShardKey& key, const ShardRecord& r) {
                  EXPECT_EQ(r, *expect[key.stripe]);
                  ++seen;
                  return true;
                }).ok());
  EXPECT_EQ(seen, 2);
  ASSERT_TRUE(ix.Compact().ok());
  index->reset();
  auto again = Index::Open(path);
  ASSERT_TRUE(again.ok());
  for (uint64_t k = 0; k < 2; ++k) EXPECT_EQ(**(*again)->Get(Key(k)), *expect[k]);
  {  // Compacted: whole records again, readable without the operator.
    again->reset();
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), EncodeShardKey(Key(1)), &value).ok());
    EXPECT_EQ(*DecodeShardRecord(Key(1), value), *expect[1]);
  }
}

}  // namespace
}  // namespace penstock::engine
