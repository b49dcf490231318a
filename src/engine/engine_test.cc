// Engine basics: round trips, overwrite, delete, stat, list, reopen, corruption, pairing.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>

#include "engine/format.h"
#include "engine/index.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::Key;
using testing::MustOpen;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

TEST(EngineTest, RoundTripsEverySize) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  const uint64_t seg = e->segment_bytes();
  std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, 1000000, 65536, seg};
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto data = Pattern(sizes[i], i);
    ASSERT_TRUE(e->Write(Key(1, i), data, 7).ok()) << sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto got = e->Read(Key(1, i));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, Pattern(sizes[i], i))) << sizes[i];
    EXPECT_EQ(e->Stat(Key(1, i)).value(), (ShardInfo{sizes[i], 7}));
  }
  auto too_big = Pattern(seg + 1, 0);
  EXPECT_EQ(e->Write(Key(1, 99), too_big, 1).code(), StatusCode::kInvalidArgument);
  EngineStats s = e->Stats();
  EXPECT_EQ(s.shards, sizes.size());
  EXPECT_EQ(s.writes, sizes.size());
  EXPECT_EQ(s.reads, sizes.size());
}

// Reads find shard records in the index's record cache from the second look on; the stats
// (and the target's metrics) count both.
TEST(EngineTest, SecondReadsOfARecordComeFromTheIndexCache) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  constexpr int kShards = 8;
  for (int i = 0; i < kShards; ++i) ASSERT_TRUE(e->Write(Key(2, i), Pattern(10000, i), 1).ok());
  const EngineStats before = e->Stats();  // waits until the index holds every write
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kShards; ++i) {
      auto got = e->ReadRange(Key(2, i), 4096, 4096);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const std::vector<std::byte> all = Pattern(10000, i);
      EXPECT_TRUE(SameBytes(*got, std::vector<std::byte>(all.begin() + 4096, all.begin() + 8192)));
    }
  }
  const EngineStats after = e->Stats();
  EXPECT_GE(after.index_lookups - before.index_lookups, 2u * kShards);
  EXPECT_GE(after.index_cache_hits - before.index_cache_hits, uint64_t{kShards});
}

TEST(EngineTest, OneMiBPlusOneInLargerSegments) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir, 4, 4 << 20));
  for (size_t n : {size_t(1 << 20) + 1, size_t(4 << 20)}) {
    auto data = Pattern(n, n);
    ASSERT_TRUE(e->Write(Key(1, n), data, 1).ok());
    auto got = e->Read(Key(1, n));
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(SameBytes(*got, data));
  }
}

TEST(EngineTest, OverwriteDeleteStat) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  ShardKey k = Key(5, 1, ShardKey::kHeadStripe);
  EXPECT_EQ(e->Read(k).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e->Stat(k).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e->Delete(k).code(), StatusCode::kNotFound);
  ASSERT_TRUE(e->Write(k, Pattern(10000, 1), 1).ok());
  ASSERT_TRUE(e->Write(k, Pattern(300, 2), 2).ok());
  EXPECT_TRUE(SameBytes(*e->Read(k), Pattern(300, 2)));
  EXPECT_EQ(e->Stat(k).value(), (ShardInfo{300, 2}));
  EngineStats s = e->Stats();
  EXPECT_EQ(s.shards, 1u);
  EXPECT_EQ(s.live_bytes, 4096u);
  EXPECT_EQ(s.dead_bytes, 12288u);
  ASSERT_TRUE(e->Delete(k).ok());
  auto gone = e->Read(k);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gone.status().message().find(k.ToString()), std::string::npos);
  EXPECT_EQ(e->Stats().shards, 0u);
  EXPECT_EQ(e->Stats().live_bytes, 0u);
}

TEST(EngineTest, ListOrdersFiltersAndPaginates) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  std::vector<ShardKey> keys;
  for (uint64_t c : {2, 1, 3}) {
    for (uint64_t obj : {9, 4}) {
      for (uint64_t stripe : {ShardKey::kHeadStripe, uint64_t{1}, uint64_t{0}}) {
        for (uint32_t shard : {1u, 0u}) {
          ShardKey k = Key(c, obj, stripe, shard);
          ASSERT_TRUE(e->Write(k, Pattern(c * 10 + shard, 0), stripe).ok());
          if (c == 2) keys.push_back(k);
        }
      }
    }
  }
  std::sort(keys.begin(), keys.end());
  auto all = e->List(2, std::nullopt, std::nullopt, 1000);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*all)[i].first, keys[i]);
    EXPECT_EQ((*all)[i].second, (ShardInfo{20 + keys[i].shard, keys[i].stripe}));
  }
  auto one = e->List(2, Key(2, 4).object, std::nullopt, 1000);
  ASSERT_EQ(one->size(), 6u);
  for (auto& [k, info] : *one) EXPECT_EQ(k.object, Key(2, 4).object);

  std::vector<ShardKey> paged;
  std::optional<ShardKey> after;
  for (;;) {
    auto page = e->List(2, std::nullopt, after, 5);
    ASSERT_TRUE(page.ok());
    ASSERT_LE(page->size(), 5u);
    if (page->empty()) break;
    for (auto& [k, info] : *page) paged.push_back(k);
    after = page->back().first;
  }
  EXPECT_EQ(paged, keys);
  EXPECT_TRUE(e->List(7, std::nullopt, std::nullopt, 10)->empty());
  EXPECT_TRUE(e->List(2, std::nullopt, std::nullopt, 0)->empty());
  // start_after from another container: a key before this container starts at its beginning.
  EXPECT_EQ(e->List(2, std::nullopt, Key(1, 100), 1)->front().first, keys.front());
}

// A conditional delete removes the shard only at the version it names; a rewritten shard stays.
TEST(EngineTest, ConditionalDeleteOnlyAtTheVersionItNames) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  const ShardKey k = Key(3, 1, ShardKey::kHeadStripe);
  ASSERT_TRUE(e->Write(k, {}, 7).ok());  // a tombstone: no bytes
  Status s = e->Delete(k, 6);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_EQ(e->Delete(k, 8).code(), StatusCode::kAborted);
  EXPECT_EQ(e->Stat(k)->version, 7u);
  ASSERT_TRUE(e->Write(k, Pattern(100, 1), 9).ok());  // a new put of the name
  EXPECT_EQ(e->Delete(k, 7).code(), StatusCode::kAborted);
  EXPECT_TRUE(SameBytes(*e->Read(k), Pattern(100, 1)));
  EXPECT_TRUE(e->Delete(k, 9).ok());
  EXPECT_EQ(e->Stat(k).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e->Delete(k, 9).code(), StatusCode::kNotFound);
}

TEST(EngineTest, ContainersListsEachHeldContainerOnceInOrder) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  EXPECT_TRUE(e->Containers(std::nullopt, 10)->empty());
  // Keys at both ends of a container's range (the largest object, stripe and shard too).
  const ShardKey last{5, ObjectId{UINT64_MAX, UINT64_MAX}, ShardKey::kHeadStripe, UINT32_MAX};
  for (const ShardKey& k : {Key(9, 1), Key(5, 0, 0, 0), last, Key(1, 3, 2, 1), Key(1, 4), Key(12, 7),
                            Key(UINT64_MAX, 1)}) {
    ASSERT_TRUE(e->Write(k, Pattern(1, 0), 1).ok());
  }
  EXPECT_EQ(*e->Containers(std::nullopt, 100), (std::vector<uint64_t>{1, 5, 9, 12, UINT64_MAX}));
  EXPECT_EQ(*e->Containers(std::nullopt, 2), (std::vector<uint64_t>{1, 5}));
  EXPECT_EQ(*e->Containers(5, 2), (std::vector<uint64_t>{9, 12}));
  EXPECT_EQ(*e->Containers(6, 100), (std::vector<uint64_t>{9, 12, UINT64_MAX}));
  EXPECT_TRUE(e->Containers(UINT64_MAX, 100)->empty());
  EXPECT_TRUE(e->Containers(std::nullopt, 0)->empty());
  // A container whose last shard is deleted is no longer held.
  ASSERT_TRUE(e->Delete(Key(9, 1)).ok());
  ASSERT_TRUE(e->Delete(Key(5, 0, 0, 0)).ok());
  EXPECT_EQ(*e->Containers(std::nullopt, 100), (std::vector<uint64_t>{1, 5, 12, UINT64_MAX}));
  ASSERT_TRUE(e->Delete(last).ok());
  EXPECT_EQ(*e->Containers(std::nullopt, 100), (std::vector<uint64_t>{1, 12, UINT64_MAX}));
}

TEST(EngineTest, ReopenReadsEverythingBackWithConsistentStats) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  EngineStats before;
  {
    auto e = MustOpen(o);
    for (uint64_t i = 0; i < 40; ++i) ASSERT_TRUE(e->Write(Key(1, i), Pattern(i * 5000, i), i).ok());
    for (uint64_t i = 0; i < 40; i += 3) ASSERT_TRUE(e->Delete(Key(1, i)).ok());
    for (uint64_t i = 1; i < 40; i += 5) ASSERT_TRUE(e->Write(Key(1, i), Pattern(777, i), 100).ok());
    before = e->Stats();
  }
  auto e = MustOpen(o);
  for (uint64_t i = 0; i < 40; ++i) {
    auto got = e->Read(Key(1, i));
    if (i % 5 == 1) {  // rewritten after the deletes
      EXPECT_TRUE(SameBytes(*got, Pattern(777, i))) << i;
    } else if (i % 3 == 0) {
      EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << i;
    } else {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(SameBytes(*got, Pattern(i * 5000, i))) << i;
    }
  }
  EngineStats after = e->Stats();
  EXPECT_EQ(after.shards, before.shards);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.total_segments, before.total_segments);
  EXPECT_EQ(after.capacity_bytes, 16u << 20);
  // Appends resume after the recovered data and do not disturb it.
  ASSERT_TRUE(e->Write(Key(9, 9), Pattern(50000, 9), 1).ok());
  EXPECT_TRUE(SameBytes(*e->Read(Key(1, 2)), Pattern(10000, 2)));
  EXPECT_TRUE(SameBytes(*e->Read(Key(9, 9)), Pattern(50000, 9)));
}

TEST(EngineTest, CorruptedBlockIsDataLossNeverWrongBytes) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  auto e = MustOpen(o);
  ShardKey k = Key(4, 2, 3, 1);
  auto data = Pattern(3 * 4096 + 10, 42);
  ASSERT_TRUE(e->Write(k, data, 1).ok());
  ASSERT_TRUE(e->Write(Key(4, 3), Pattern(5000, 43), 1).ok());

  // Find the shard's second block in the data file and flip one byte of it.
  std::fstream f(o.data_path, std::ios::in | std::ios::out | std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string needle(reinterpret_cast<const char*>(data.data()) + 4096, 64);
  size_t pos = file.find(needle);
  ASSERT_NE(pos, std::string::npos);
  f.seekp(static_cast<std::streamoff>(pos + 100));
  f.put(static_cast<char>(file[pos + 100] ^ 0x01));
  f.close();

  auto got = e->Read(k);
  ASSERT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
  EXPECT_NE(got.status().message().find(k.ToString()), std::string::npos);
  EXPECT_NE(got.status().message().find("shard offset 4096"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(e->Stats().checksum_errors, 1u);
  EXPECT_TRUE(SameBytes(*e->Read(Key(4, 3)), Pattern(5000, 43)));  // neighbours unharmed
}

TEST(EngineTest, ReadRangeReturnsExactlyTheRange) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  ShardKey k = Key(6, 1, 1, 0);
  auto data = Pattern(5 * 4096 + 123, 7);
  ASSERT_TRUE(e->Write(k, data, 9).ok());
  struct Case { uint64_t off, len; };
  for (Case c : {Case{0, 1}, Case{0, 4096}, Case{1, 4096}, Case{4095, 2}, Case{4096, 4096},
                 Case{10000, 9000}, Case{5 * 4096, 123}, Case{5 * 4096 + 100, 1000},
                 Case{0, UINT64_MAX}, Case{data.size(), 10}, Case{data.size() + 5000, 10}}) {
    ShardInfo info;
    auto got = e->ReadRange(k, c.off, c.len, &info);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    uint64_t begin = std::min<uint64_t>(c.off, data.size());
    uint64_t end = c.len >= data.size() - begin ? data.size() : begin + c.len;
    ASSERT_EQ(got->size(), end - begin) << c.off << "+" << c.len;
    EXPECT_TRUE(std::equal(got->data(), got->data() + got->size(), data.begin() + static_cast<long>(begin)))
        << c.off << "+" << c.len;
    EXPECT_EQ(info.length, data.size());
    EXPECT_EQ(info.version, 9u);
  }
  EXPECT_EQ(e->ReadRange(Key(6, 9), 0, 10).status().code(), StatusCode::kNotFound);
}

TEST(EngineTest, ReadRangeVerifiesOnlyTheBlocksItReads) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  auto e = MustOpen(o);
  ShardKey k = Key(7, 1, 1, 0);
  auto data = Pattern(4 * 4096, 11);
  ASSERT_TRUE(e->Write(k, data, 1).ok());
  std::fstream f(o.data_path, std::ios::in | std::ios::out | std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string needle(reinterpret_cast<const char*>(data.data()) + 2 * 4096, 64);
  size_t pos = file.find(needle);
  ASSERT_NE(pos, std::string::npos);
  f.seekp(static_cast<std::streamoff>(pos + 7));  // corrupt block 2
  f.put(static_cast<char>(file[pos + 7] ^ 0x40));
  f.close();
  EXPECT_TRUE(e->ReadRange(k, 0, 2 * 4096).ok());   // blocks 0-1: fine
  EXPECT_TRUE(e->ReadRange(k, 3 * 4096, 10).ok());  // block 3: fine
  auto bad = e->ReadRange(k, 2 * 4096 + 100, 10);   // inside block 2
  ASSERT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("shard offset 8192"), std::string::npos) << bad.status().message();
  EXPECT_EQ(e->ReadRange(k, 4000, 200).status().code(), StatusCode::kOk);  // blocks 0-1 again
}

TEST(EngineTest, PairingOfDeviceAndIndexIsChecked) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  {
    auto e = MustOpen(o);
    ASSERT_TRUE(e->Write(Key(1, 1), Pattern(100, 1), 1).ok());
  }
  EngineOptions other_seg = o;
  other_seg.segment_bytes = 2 << 20;
  EXPECT_EQ(Engine::Open(other_seg).status().code(), StatusCode::kInvalidArgument);

  EngineOptions fresh_index = o;
  fresh_index.index_dir = dir.path() + "/index2";
  auto s = Engine::Open(fresh_index).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(o.data_path), std::string::npos);

  EngineOptions other_dev = SmallOptions(dir);
  other_dev.data_path = dir.path() + "/data2";
  other_dev.index_dir = dir.path() + "/index3";
  ASSERT_TRUE(Engine::Open(other_dev).ok());
  other_dev.index_dir = o.index_dir;
  EXPECT_EQ(Engine::Open(other_dev).status().code(), StatusCode::kFailedPrecondition);

  auto e = MustOpen(o);  // the right pair still opens
  EXPECT_TRUE(SameBytes(*e->Read(Key(1, 1)), Pattern(100, 1)));
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kUnavailable);  // already open
}

// A device of format 1 (before the index journal), 2 (before block maps) or 3 (before range
// entries in the journal) opens, keeps its data, and is marked as the current format on device
// and index, so a build that knows only the older format refuses it after.
TEST(EngineTest, OlderDeviceFormatIsUpgradedAtOpen) {
  for (uint32_t older : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("format " + std::to_string(older));
    ScratchDir dir;
    EngineOptions o = SmallOptions(dir);
    {
      auto e = MustOpen(o);
      ASSERT_TRUE(e->Write(Key(1, 1), Pattern(5000, 3), 1).ok());
    }
    auto header_on_device = [&]() -> DeviceHeader {
      std::ifstream f(o.data_path, std::ios::binary);
      std::vector<char> block(4096);
      f.read(block.data(), static_cast<std::streamsize>(block.size()));
      auto h = DecodeDeviceHeader(std::as_bytes(std::span(block.data(), block.size())));
      EXPECT_TRUE(h.ok() && h->has_value());
      return h.ok() && h->has_value() ? **h : DeviceHeader{};
    };
    DeviceHeader old = header_on_device();
    EXPECT_EQ(old.format_version, kDeviceFormatVersion);
    old.format_version = older;  // as an older build left it
    {
      std::fstream f(o.data_path, std::ios::binary | std::ios::in | std::ios::out);
      const std::string bytes = EncodeDeviceHeader(old);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      auto index = Index::Open(o.index_dir);
      ASSERT_TRUE(index.ok());
      ASSERT_TRUE((*index)->PutSuperblock(old).ok());
    }
    {
      auto e = MustOpen(o);
      EXPECT_TRUE(SameBytes(*e->Read(Key(1, 1)), Pattern(5000, 3)));
      ASSERT_TRUE(e->WriteRange(Key(1, 1), 100, Pattern(10, 4), 2).ok());  // a block map now
    }
    EXPECT_EQ(header_on_device().format_version, kDeviceFormatVersion);
    auto index = Index::Open(o.index_dir);
    ASSERT_TRUE(index.ok());
    auto sb = (*index)->GetSuperblock();
    ASSERT_TRUE(sb.ok() && sb->has_value());
    EXPECT_EQ((*sb)->format_version, kDeviceFormatVersion);
    DeviceHeader future = old;
    future.format_version = kDeviceFormatVersion + 1;
    const std::string bytes = EncodeDeviceHeader(future);
    auto decoded = DecodeDeviceHeader(std::as_bytes(std::span(bytes.data(), bytes.size())));
    EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
  }
}

TEST(EngineTest, BadOptionsAreInvalidArgument) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  o.segment_bytes = 5000;
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
  o = SmallOptions(dir);
  o.capacity_bytes = 1 << 20;  // only room for the header
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// TryWriteAsync: whole-shard writes queued from a thread that must not block share flushes,
// keep Write's version rule (not_older) and its durability (read back after a reopen).
TEST(EngineTest, AsynchronousWholeWritesShareCommits) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  auto e = MustOpen(o);
  constexpr int kWrites = 200;
  std::vector<std::vector<std::byte>> payloads;
  for (int w = 0; w < kWrites; ++w) payloads.push_back(Pattern(100 + 37 * w, 500 + w));  // unaligned sizes
  std::mutex mu;
  std::condition_variable cv;
  int left = kWrites, failed = 0;
  const uint64_t batches = e->Stats().commit_batches;
  for (int w = 0; w < kWrites; ++w) {
    std::function<void(Status)> done = [&](Status s) {
      std::lock_guard<std::mutex> lock(mu);
      failed += !s.ok();
      if (--left == 0) cv.notify_all();
    };
    ASSERT_TRUE(e->TryWriteAsync(Key(7, w), payloads[w], 5, /*not_older=*/true, done));
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return left == 0; });
  }
  EXPECT_EQ(failed, 0);
  EXPECT_LT(e->Stats().commit_batches - batches, uint64_t{kWrites} / 2);  // writes shared flushes
  // An older version is refused (kAborted) and changes nothing; a newer one replaces.
  std::promise<Status> older, newer;
  std::function<void(Status)> a = [&](Status s) { older.set_value(s); };
  std::function<void(Status)> b = [&](Status s) { newer.set_value(s); };
  ASSERT_TRUE(e->TryWriteAsync(Key(7, 0), Pattern(10, 1), 4, true, a));
  EXPECT_EQ(older.get_future().get().code(), StatusCode::kAborted);
  ASSERT_TRUE(e->TryWriteAsync(Key(7, 1), {}, 6, true, b));  // empty: a tombstone-like record
  EXPECT_TRUE(newer.get_future().get().ok());
  e.reset();
  e = MustOpen(o);
  EXPECT_TRUE(SameBytes(*e->Read(Key(7, 0)), payloads[0]));
  EXPECT_EQ(e->Read(Key(7, 1))->size(), 0u);
  for (int w = 2; w < kWrites; ++w) EXPECT_TRUE(SameBytes(*e->Read(Key(7, w)), payloads[w])) << w;
  // Larger than a segment: refused at once, on this thread.
  Status got = OkStatus();
  std::function<void(Status)> c = [&](Status s) { got = s; };
  ASSERT_TRUE(e->TryWriteAsync(Key(7, 9999), Pattern(o.segment_bytes + 1, 2), 1, false, c));
  EXPECT_EQ(got.code(), StatusCode::kInvalidArgument) << got.ToString();
}

// Write with an expected version (a record's conditional update): applied only over that
// stored version (none: 0); a newer one kAborted, an older one or none kFailedPrecondition.
TEST(EngineTest, WritesOverAnExpectedVersion) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir));
  EXPECT_EQ(e->Write(Key(8, 1), Pattern(100, 1), 5, false, 3).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(e->Write(Key(8, 1), Pattern(5000, 2), 5, false, 0).ok());  // over none
  EXPECT_EQ(e->Write(Key(8, 1), Pattern(10, 3), 7, false, 4).code(), StatusCode::kAborted);
  EXPECT_EQ(e->Write(Key(8, 1), Pattern(10, 3), 7, false, 6).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(e->Write(Key(8, 1), Pattern(10, 4), 7, false, 5).ok());
  EXPECT_TRUE(SameBytes(*e->Read(Key(8, 1)), Pattern(10, 4)));  // replaced whole: shorter
  std::promise<Status> refused;
  std::function<void(Status)> done = [&](Status s) { refused.set_value(s); };
  ASSERT_TRUE(e->TryWriteAsync(Key(8, 1), Pattern(10, 5), 9, false, done, 5));
  EXPECT_EQ(refused.get_future().get().code(), StatusCode::kAborted);
  EXPECT_TRUE(SameBytes(*e->Read(Key(8, 1)), Pattern(10, 4)));
}

}  // namespace
}  // namespace penstock::engine
