// Engine group commit and garbage collection: batching, full device, GC racing overwrites.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::FlipByteOf;
using testing::Key;
using testing::MustOpen;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

TEST(EngineCommitTest, ConcurrentWritesShareBatchesAndAllLand) {
  ScratchDir dir;
  auto e = MustOpen(SmallOptions(dir, 16, 1 << 20));
  constexpr int kThreads = 16, kPerThread = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        uint64_t obj = uint64_t(t) * 1000 + i;
        EXPECT_TRUE(e->Write(Key(1, obj), Pattern(5000, obj), 1).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EngineStats s = e->Stats();
  EXPECT_EQ(s.commit_ops, uint64_t{kThreads * kPerThread});
  EXPECT_LE(s.commit_batches, s.commit_ops);
  EXPECT_EQ(s.shards, uint64_t{kThreads * kPerThread});
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      uint64_t obj = uint64_t(t) * 1000 + i;
      EXPECT_TRUE(SameBytes(*e->Read(Key(1, obj)), Pattern(5000, obj)));
    }
  }
  // A delete rides the same committer; deleting twice is kNotFound.
  ASSERT_TRUE(e->Delete(Key(1, 0)).ok());
  EXPECT_EQ(e->Delete(Key(1, 0)).code(), StatusCode::kNotFound);
  EXPECT_EQ(e->Read(Key(1, 0)).status().code(), StatusCode::kNotFound);
}

// Issue 3, item 3: fill until "no space", delete every other shard (so every segment is half
// dead and none frees itself), GC, write again; everything that survived reads back intact.
TEST(EngineGcTest, FullDeviceDeleteHalfCollectAndWriteAgain) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 8, 1 << 20);
  o.gc_background = false;  // deterministic: GC only on demand and inline
  auto e = MustOpen(o);
  const size_t kShard = 64 * 1024;  // 16 per segment
  std::map<uint64_t, uint64_t> live;  // object -> pattern seed
  uint64_t n = 0;
  Status s;
  while ((s = e->Write(Key(1, n), Pattern(kShard, n), 1)).ok()) live[n] = n, ++n;
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(n, 7u * 16);  // one segment is GC's reserve
  for (uint64_t i = 0; i < n; i += 2) {
    ASSERT_TRUE(e->Delete(Key(1, i)).ok());
    live.erase(i);
  }
  EngineStats half = e->Stats();
  EXPECT_EQ(half.free_segments, 1u);
  EXPECT_EQ(half.gc_segments_cleaned, 0u);

  auto cleaned = e->CollectGarbage();
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_GE(*cleaned, 3u);
  EngineStats after = e->Stats();
  EXPECT_EQ(after.gc_segments_cleaned, *cleaned);
  EXPECT_EQ(after.gc_bytes_moved % 4096, 0u);
  EXPECT_GT(after.gc_bytes_moved, 0u);
  EXPECT_EQ(after.device_bytes_written, n * kShard + after.gc_bytes_moved);
  EXPECT_GT(after.write_amplification, 1.0);
  EXPECT_EQ(after.live_bytes, live.size() * kShard);
  for (auto [obj, seed] : live) ASSERT_TRUE(SameBytes(*e->Read(Key(1, obj)), Pattern(kShard, seed)));

  // Write again until full: roughly the deleted half fits again.
  uint64_t more = 0;
  while ((s = e->Write(Key(2, more), Pattern(kShard, 1000 + more), 1)).ok()) {
    live[(uint64_t{1} << 40) + more] = 1000 + more;
    ++more;
  }
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_GE(more, n / 2 - 16);
  for (auto [obj, seed] : live) {
    ShardKey k = obj >= (uint64_t{1} << 40) ? Key(2, obj - (uint64_t{1} << 40)) : Key(1, obj);
    ASSERT_TRUE(SameBytes(*e->Read(k), Pattern(kShard, seed))) << k.ToString();
  }

  // And after a restart, where every relocated record is read back from the index.
  e.reset();
  e = MustOpen(o);
  EXPECT_EQ(e->Stats().shards, live.size());
  for (auto [obj, seed] : live) {
    ShardKey k = obj >= (uint64_t{1} << 40) ? Key(2, obj - (uint64_t{1} << 40)) : Key(1, obj);
    ASSERT_TRUE(SameBytes(*e->Read(k), Pattern(kShard, seed))) << k.ToString();
  }
}

// A corrupt shard does not pin its segment: GC moves its bytes as they are (with the checksums
// its record had, so it still reads as corrupt until repair rewrites it) and the segment frees.
// Before, the segment stayed in use while GC had filled its reserve with the rest of it, and
// the next victim ran out of room half way: on a full device nothing could be cleaned again.
TEST(EngineGcTest, CorruptShardsDoNotPinTheirSegmentsOnAFullDevice) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 8, 1 << 20);
  o.gc_background = false;
  auto e = MustOpen(o);
  const size_t kShard = 128 * 1024;  // 8 per segment
  uint64_t n = 0;
  Status s;
  while ((s = e->Write(Key(1, n), Pattern(kShard, n), 1)).ok()) ++n;
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  ASSERT_EQ(n, 7u * 8);
  // One corrupt shard and two deleted ones per segment: each is 3/4 live.
  std::set<uint64_t> corrupt, live;
  for (uint64_t i = 0; i < n; ++i) live.insert(i);
  for (uint64_t seg = 0; seg < 7; ++seg) {
    ASSERT_TRUE(FlipByteOf(o.data_path, Pattern(kShard, seg * 8), 70000));
    corrupt.insert(seg * 8);
    for (uint64_t i : {seg * 8 + 6, seg * 8 + 7}) {
      ASSERT_TRUE(e->Delete(Key(1, i)).ok());
      live.erase(i);
    }
  }
  auto cleaned = e->CollectGarbage();
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_GE(*cleaned, 6u);
  EXPECT_EQ(e->Stats().checksum_errors, corrupt.size());
  auto listed = e->CorruptShards();
  EXPECT_EQ(listed.size(), corrupt.size());
  // What was freed takes new writes: 42 live shards fill 5 1/4 segments, one of the two
  // left is GC's reserve.
  uint64_t more = 0;
  while ((s = e->Write(Key(2, more), Pattern(kShard, 1000 + more), 1)).ok()) ++more;
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_GE(more, 8u);
  // Every shard reads back, but the corrupt ones, which read as corrupt; Key(2, i) from `from`.
  auto check = [&](Engine& eng, uint64_t from) {
    for (uint64_t i : live) {
      auto got = eng.Read(Key(1, i));
      if (corrupt.contains(i)) {
        EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << i;
      } else {
        ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
        EXPECT_TRUE(SameBytes(*got, Pattern(kShard, i))) << i;
      }
    }
    for (uint64_t i = from; i < more; ++i) EXPECT_TRUE(SameBytes(*eng.Read(Key(2, i)), Pattern(kShard, 1000 + i)));
  };
  check(*e, 0);
  // Repair rewrites a corrupt shard: it reads back and leaves the list. (The room for it: two
  // shards deleted, and GC moves the other six into the tail of its open segment.)
  ASSERT_TRUE(e->Delete(Key(2, 0)).ok());
  ASSERT_TRUE(e->Delete(Key(2, 1)).ok());
  s = e->Write(Key(1, 0), Pattern(kShard, 0), 2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  corrupt.erase(0);
  EXPECT_EQ(e->CorruptShards().size(), corrupt.size());
  // After a restart, where the moved records come from the index.
  e.reset();
  e = MustOpen(o);
  check(*e, 2);
}

// A device full of live data with a few dead blocks in every segment (rewritten object heads
// leave such): a write that finds no room is told "no space" at once, without GC moving
// segment after segment of live data to win a few KiB each (which GC's own open segment then
// kept, so the writer won nothing: writes waited minutes behind it).
TEST(EngineGcTest, AFullDeviceWithLittleDeadSpaceSaysNoSpaceWithoutMovingData) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 8, 1 << 20);
  o.gc_background = false;
  auto e = MustOpen(o);
  // Pairs of a 60 KiB and a 4 KiB shard, 16 pairs a segment, until the device is full.
  uint64_t pairs = 0;
  Status s;
  for (;; ++pairs) {
    if (!(s = e->Write(Key(1, pairs), Pattern(60 * 1024, pairs), 1)).ok()) break;
    if (!(s = e->Write(Key(2, pairs), Pattern(4096, pairs), 1)).ok()) break;
  }
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  ASSERT_GE(pairs, 6u * 16);
  for (uint64_t i = 0; i < pairs; ++i) ASSERT_TRUE(e->Delete(Key(2, i)).ok());  // 1/16 of each dead
  const EngineStats before = e->Stats();
  s = e->Write(Key(3, 0), Pattern(64 * 1024, 3), 1);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(e->Stats().gc_bytes_moved, before.gc_bytes_moved) << "GC moved live data to win a few KiB";
  // Deleting more (an eighth and more of some segments dead) makes cleaning worth it again.
  for (uint64_t i = 0; i < 32; ++i) ASSERT_TRUE(e->Delete(Key(1, i * 3)).ok());
  s = e->Write(Key(3, 1), Pattern(64 * 1024, 4), 1);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(SameBytes(*e->Read(Key(1, 1)), Pattern(60 * 1024, 1)));
}

TEST(EngineGcTest, WritesOnAFullDeviceRunGcInline) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 6, 1 << 20);
  o.gc_background = false;
  auto e = MustOpen(o);
  const size_t kShard = 128 * 1024;  // 8 per segment
  // 10 keys overwritten round-robin: far more appends than the device holds. Early on, every
  // sixth write also adds a shard that stays (Key(3, _)), so the first segments never die whole
  // and only GC can make room in them (a segment whose shards are all overwritten or deleted
  // comes back without GC).
  for (uint64_t v = 0; v < 400; ++v) {
    ASSERT_TRUE(e->Write(Key(1, v % 10), Pattern(kShard, v), v).ok()) << v;
    if (v % 7 == 0) {
      ASSERT_TRUE(e->Write(Key(2, v), Pattern(kShard, v), v).ok()) << v;
      if (v >= 7) {
        ASSERT_TRUE(e->Delete(Key(2, v - 7)).ok()) << v;
      }
    }
    if (v % 6 == 0 && v < 60) {
      ASSERT_TRUE(e->Write(Key(3, v), Pattern(kShard, 1000 + v), v).ok()) << v;
    }
  }
  EXPECT_GT(e->Stats().gc_segments_cleaned, 0u);
  EXPECT_GT(e->Stats().gc_bytes_moved, 0u);
  for (uint64_t k = 0; k < 10; ++k) {
    uint64_t last = 390 + k;
    EXPECT_TRUE(SameBytes(*e->Read(Key(1, k)), Pattern(kShard, last)));
    EXPECT_EQ(e->Stat(Key(1, k))->version, last);
  }
  EXPECT_TRUE(SameBytes(*e->Read(Key(2, 399)), Pattern(kShard, 399)));
  for (uint64_t v = 0; v < 60; v += 6) {
    EXPECT_TRUE(SameBytes(*e->Read(Key(3, v)), Pattern(kShard, 1000 + v))) << v;
  }
}

// Many writers find the device full at once: one cleans a segment and the others use the room
// it made, instead of each cleaning one more (mostly live) segment. GC moves far less than the
// writers write (one cleaning per writer moved ~4x what they wrote).
TEST(EngineGcTest, WritersFindingTheDeviceFullDoNotEachCleanASegment) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 12, 1 << 20);
  o.gc_background = false;
  auto e = MustOpen(o);
  constexpr uint64_t kKeys = 768;  // 3 MiB live of 12 MiB
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_TRUE(e->Write(Key(1, k), Pattern(4096, k), 1).ok());
  const EngineStats before = e->Stats();
  constexpr int kThreads = 32, kWritesEach = 400;  // 50 MiB: the device fills ~5 times over
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      for (int i = 0; i < kWritesEach; ++i) {
        if (!e->Write(Key(1, rng() % kKeys), Pattern(4096, i), 2 + i).ok()) ++failures;
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  const EngineStats after = e->Stats();
  const uint64_t written = after.bytes_written - before.bytes_written;
  const uint64_t moved = after.gc_bytes_moved - before.gc_bytes_moved;
  EXPECT_GT(after.gc_segments_cleaned, before.gc_segments_cleaned);
  EXPECT_LT(moved, written) << "GC moved " << moved << " bytes for " << written << " written";
}

// Background GC relocates while writers overwrite the same keys: the newest write always wins.
TEST(EngineGcTest, BackgroundGcNeverLosesAConcurrentOverwrite) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 8, 1 << 20);
  o.gc_min_dead_fraction = 0.1;
  o.gc_rate_bytes_per_sec = 0;  // as fast as it can, to race the writers
  auto e = MustOpen(o);
  constexpr int kThreads = 4;
  constexpr uint64_t kKeys = 24, kRounds = 60;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t r = 0; r < kRounds; ++r) {
        for (uint64_t k = t; k < kKeys; k += kThreads) {
          uint64_t seed = k * 1000 + r;
          ASSERT_TRUE(e->Write(Key(1, k), Pattern(40 * 1024 + k * 512, seed), r).ok());
        }
      }
    });
  }
  std::atomic<bool> done{false};
  std::thread collector([&] {
    // On this 8-segment device the writers can take every free segment for a moment, and a GC
    // pass then finds no room to move into ("no space", retry): allowed, losing data is not.
    while (!done) {
      auto cleaned = e->CollectGarbage(1);
      if (!cleaned.ok()) {
        ASSERT_EQ(cleaned.status().code(), StatusCode::kResourceExhausted) << cleaned.status().ToString();
      }
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  collector.join();
  for (uint64_t k = 0; k < kKeys; ++k) {
    EXPECT_TRUE(SameBytes(*e->Read(Key(1, k)), Pattern(40 * 1024 + k * 512, k * 1000 + kRounds - 1)))
        << k;
  }
  EngineStats s = e->Stats();
  EXPECT_EQ(s.shards, kKeys);
  EXPECT_EQ(s.checksum_errors, 0u);
  EXPECT_GT(s.gc_segments_cleaned, 0u);  // it did race the writers
}

}  // namespace
}  // namespace penstock::engine
