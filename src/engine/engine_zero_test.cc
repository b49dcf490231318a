// Background zeroing (engine_zero.cc): a fresh data file ends up with no unwritten space in
// its segments, data written meanwhile stays intact, and zeroing never makes space run out early.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "engine/engine.h"
#include "engine/file_device.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::Key;
using testing::MustOpen;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;
using testing::SmallOptions;

// Whether the filesystem under `dir` reports a fallocated file's unwritten extents.
bool ReportsUnwritten(const ScratchDir& dir) {
  auto dev = FileDevice::Open(dir.path() + "/probe", 1 << 20, 4);
  if (!dev.ok()) return false;
  auto ranges = (*dev)->UnwrittenRanges(0, 1 << 20);
  return ranges.ok() && !ranges->empty();
}

// Waits until at most `in_use` segments are left to zero (zeroing takes only free segments).
bool WaitForZeroing(Engine& e, uint64_t in_use) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (e.Stats().zero_pending_segments > in_use) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(EngineZeroTest, WritesEveryNeverWrittenSegmentAndKeepsDataWrittenMeanwhile) {
  ScratchDir dir;
  if (!ReportsUnwritten(dir)) GTEST_SKIP() << "this filesystem does not report unwritten extents";
  EngineOptions o = SmallOptions(dir, 16, 1 << 20);
  o.zero_rate_bytes_per_sec = 8 << 20;  // paced while the writes below run
  constexpr size_t kShard = 64 * 1024;
  {
    auto e = MustOpen(o);
    ASSERT_TRUE(e);
    // Overwrites of a few keys: the log moves through the segments (twice) while zeroing runs.
    // 64 KiB shards tile the segments, so none is sealed with an unwritten tail.
    for (uint64_t i = 0; i < 500; ++i) {
      ASSERT_TRUE(e->Write(Key(1, i % 20), Pattern(kShard, i), i).ok()) << i;
    }
    // What is left to zero is in the two open segments (writers' and GC's), in use.
    ASSERT_TRUE(WaitForZeroing(*e, 2)) << e->Stats().zero_pending_segments << " segments left";
    EXPECT_GT(e->Stats().zeroed_bytes, 0u);
    for (uint64_t k = 0; k < 20; ++k) {
      auto got = e->Read(Key(1, k));
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(SameBytes(*got, Pattern(kShard, 480 + k))) << k;
    }
  }
  {
    // The data area's unwritten space lies in at most those two segments (the header region
    // before it is the journal's).
    auto dev = FileDevice::Open(o.data_path, 0, 4);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    auto left = (*dev)->UnwrittenRanges(1 << 20, 16 << 20);
    ASSERT_TRUE(left.ok());
    std::set<uint64_t> segments;
    for (const DeviceRange& r : *left) {
      for (uint64_t at = r.offset; at < r.offset + r.length; at += 4096) segments.insert((at - (1 << 20)) >> 20);
    }
    EXPECT_LE(segments.size(), 2u);
  }
  auto e = MustOpen(o);
  ASSERT_TRUE(e);
  for (uint64_t k = 0; k < 20; ++k) {
    auto got = e->Read(Key(1, k));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(SameBytes(*got, Pattern(kShard, 480 + k))) << k;
  }
}

// Fills a fresh device with 64 KiB shards until "no space"; returns how many fit. With a
// zeroing rate, also checks that zeroing ran.
uint64_t FillFresh(uint64_t zero_rate) {
  ScratchDir dir;
  EngineOptions o = SmallOptions(dir, 16, 1 << 20);
  o.zero_rate_bytes_per_sec = zero_rate;
  auto e = MustOpen(o);
  if (!e) return 0;
  if (zero_rate > 0) {
    // Zeroing starts with the engine: let it get going, so the writes below meet it.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (e->Stats().zeroed_bytes == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GT(e->Stats().zeroed_bytes, 0u) << "zeroing never ran";
  }
  uint64_t n = 0;
  Status s;
  while ((s = e->Write(Key(1, n), Pattern(64 * 1024, n), 1)).ok()) ++n;
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  for (uint64_t i = 0; i < n; ++i) {
    auto got = e->Read(Key(1, i));
    EXPECT_TRUE(got.ok() && SameBytes(*got, Pattern(64 * 1024, i))) << i;
  }
  return n;
}

TEST(EngineZeroTest, ZeroingNeverRunsOutOfSpaceEarly) {
  // With or without zeroing, as many shards fit: a writer takes over a segment being zeroed
  // rather than hear "no space".
  {
    ScratchDir dir;
    if (!ReportsUnwritten(dir)) GTEST_SKIP() << "this filesystem does not report unwritten extents";
  }
  const uint64_t without = FillFresh(0);
  EXPECT_EQ(without, 15u * 16);  // all but GC's reserved segment
  for (uint64_t rate : {uint64_t{16} << 20, uint64_t{1} << 30}) EXPECT_EQ(FillFresh(rate), without) << rate;
}

}  // namespace
}  // namespace penstock::engine
