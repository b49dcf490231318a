// Engine scrub (finds flipped bytes without a client read) and the null device mode.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::FlipByteOf;
using testing::Key;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

TEST(EngineScrubTest, FindsAFlippedByteAndForgetsItOnceRewritten) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  auto e = std::move(*Engine::Open(o));
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(e->Write(Key(1, i), Pattern(9000, i), 1).ok());
  auto clean = e->Scrub();
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_EQ(*clean, 20u * 3 * 4096);
  EXPECT_TRUE(e->CorruptShards().empty());

  ASSERT_TRUE(FlipByteOf(o.data_path, Pattern(9000, 7), 5000));
  ASSERT_TRUE(e->Scrub().ok());
  EngineStats s = e->Stats();
  EXPECT_EQ(s.scrub_corrupt_shards, 1u);
  EXPECT_EQ(s.scrub_bytes_verified, 2u * 20 * 3 * 4096 - 3 * 4096);
  EXPECT_EQ(e->CorruptShards(), std::vector<ShardKey>{Key(1, 7)});
  ASSERT_TRUE(e->Scrub().ok());
  EXPECT_EQ(e->Stats().scrub_corrupt_shards, 1u);  // already known: counted once
  EXPECT_EQ(e->Read(Key(1, 7)).status().code(), StatusCode::kDataLoss);

  // Repair by rewriting (what a rebuild from replicas does): no longer listed.
  ASSERT_TRUE(e->Write(Key(1, 7), Pattern(9000, 7), 2).ok());
  EXPECT_TRUE(e->CorruptShards().empty());
  EXPECT_TRUE(SameBytes(*e->Read(Key(1, 7)), Pattern(9000, 7)));
}

TEST(EngineScrubTest, BackgroundScrubFindsCorruptionWithoutAnyRead) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  ASSERT_TRUE(std::move(*Engine::Open(o))->Write(Key(2, 1), Pattern(20000, 5), 1).ok());
  ASSERT_TRUE(FlipByteOf(o.data_path, Pattern(20000, 5), 12000));
  o.scrub_rate_bytes_per_sec = 1 << 30;
  auto e = std::move(*Engine::Open(o));
  while (e->CorruptShards().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(e->CorruptShards(), std::vector<ShardKey>{Key(2, 1)});
  EXPECT_EQ(e->Stats().reads, 0u);
}

TEST(EngineNullDeviceTest, AccountsWritesAndReadsZeros) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 4, 1 << 20);
  o.device_kind = "null";
  o.data_path.clear();
  auto opened = Engine::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& e = *opened;
  ASSERT_TRUE(e->Write(Key(1, 1), Pattern(10000, 1), 3).ok());
  auto got = e->Read(Key(1, 1));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameBytes(*got, std::vector<std::byte>(10000)));
  EXPECT_EQ(e->Stat(Key(1, 1))->version, 3u);
  EngineStats s = e->Stats();
  EXPECT_EQ(s.live_bytes, 3u * 4096);
  EXPECT_EQ(s.checksum_errors, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/data"));
  // A shard of one block (an object head, a small record) is kept: objects stay usable.
  ASSERT_TRUE(e->Write(Key(1, 3), Pattern(300, 3), 1).ok());
  auto small = e->Read(Key(1, 3));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_TRUE(SameBytes(*small, Pattern(300, 3)));

  // Overwrites reclaim space as on a real device; more than the capacity fits over time.
  for (uint64_t v = 0; v < 50; ++v) ASSERT_TRUE(e->Write(Key(1, 2), Pattern(500000, v), v).ok());
  // Reopening keeps the index (lengths, versions); the data reads as zeros.
  e.reset();
  auto again = Engine::Open(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->Stat(Key(1, 2))->length, 500000u);
}

TEST(EngineNullDeviceTest, UnknownDeviceKindIsInvalidArgument) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir);
  o.device_kind = "tape";
  EXPECT_EQ(Engine::Open(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace penstock::engine
