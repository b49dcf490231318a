// stripe_read_ec_test.cc — the healthy ec read's fast path (StripeIo::ReadEc) over a fake
// transport: a read of all K data cells with M < K asks no other shard (no kStat, no parity),
// and anything short of a healthy stripe (a stale or missing cell, a target the map marks,
// a partial read, M >= K) still reads as before: the right bytes, degraded where needed.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "client/fake_shard_transport.h"
#include "client/stripe_io.h"
#include "client/write_version.h"

namespace penstock {
namespace {

constexpr uint64_t kStripe = 4096;

class EcReadTest : public ::testing::Test {
 protected:
  EcReadTest()
      : view_(nullptr),
        shards_(&fake_, &view_, std::chrono::milliseconds(200)),
        io_(&shards_, &view_, std::chrono::milliseconds(200)) {
    view_.Set(1, {{1, "uuid-1", "fake:1", true},
                  {2, "uuid-2", "fake:2", true},
                  {3, "uuid-3", "fake:3", true},
                  {4, "uuid-4", "fake:4", true},
                  {5, "uuid-5", "fake:5", true},
                  {6, "uuid-6", "fake:6", true}});
  }

  StripeGeometry Scheme(const std::string& text) { return StripeGeometry::For(*ParseRedundancy(text), kStripe); }

  static std::shared_ptr<const AlignedBuffer> Unit(uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> v(kStripe);
    for (auto& b : v) b = std::byte{static_cast<unsigned char>(rng())};
    return std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(v));
  }

  // Writes `data` to every slot of `key`'s stripe and waits until every shard holds it.
  void WriteAll(const StripeGeometry& g, const WireShardKey& key, std::shared_ptr<const AlignedBuffer> data) {
    ASSERT_TRUE(io_.WriteSync(g, key, data, NewVersion()).ok());
    fake_.Drain();
  }

  // The requests a read of [begin, begin + length) of `key` sent, and that it answered `want`'s
  // bytes there.
  struct Sent {
    int stats = 0, ranges = 0;
    uint64_t degraded = 0, without_stat = 0;
  };
  Sent ReadAndCheck(const StripeGeometry& g, const WireShardKey& key, uint64_t begin, uint64_t length,
                    const AlignedBuffer& want) {
    const int stats = fake_.calls(ShardOp::kStat), ranges = fake_.calls(ShardOp::kReadRange);
    const uint64_t degraded = io_.stats().degraded_reads, without = io_.stats().ec_reads_without_stat;
    auto got = io_.ReadSync(g, key, begin, length);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok()) {
      EXPECT_EQ(got->data.size(), length);
      EXPECT_EQ(std::memcmp(got->data.data(), want.data() + begin, length), 0) << "wrong bytes";
    }
    fake_.Drain();
    return {fake_.calls(ShardOp::kStat) - stats, fake_.calls(ShardOp::kReadRange) - ranges,
            io_.stats().degraded_reads - degraded, io_.stats().ec_reads_without_stat - without};
  }

  testing::FakeShardTransport fake_;
  ClusterView view_;
  ShardClient shards_;
  StripeIo io_;
};

// ec:2+1 and ec:4+2 healthy: the K data cells and nothing else.
TEST_F(EcReadTest, AHealthyWholeStripeReadAsksOnlyTheDataCells) {
  for (const std::string scheme : {"ec:2+1", "ec:4+2"}) {
    const StripeGeometry g = Scheme(scheme);
    const WireShardKey key{1, 700, 1, 0, 0, 0};
    auto data = Unit(1);
    WriteAll(g, key, data);
    const Sent s = ReadAndCheck(g, key, 0, kStripe, *data);
    EXPECT_EQ(s.stats, 0) << scheme;
    EXPECT_EQ(s.ranges, static_cast<int>(g.red.k)) << scheme << ": the data cells, no parity";
    EXPECT_EQ(s.degraded, 0u) << scheme;
    EXPECT_EQ(s.without_stat, 1u) << scheme;
  }
}

// A read of part of the cells cannot tell alone that K shards hold their version, and with
// M >= K the data cells can all have missed an acknowledged write: both ask every shard.
TEST_F(EcReadTest, PartialReadsAndSchemesWithMAtLeastKStillAskEveryShard) {
  const StripeGeometry g21 = Scheme("ec:2+1");
  const WireShardKey key{1, 701, 1, 0, 0, 0};
  auto data = Unit(2);
  WriteAll(g21, key, data);
  Sent s = ReadAndCheck(g21, key, 0, g21.cell, *data);  // cell 0 alone
  EXPECT_EQ(s.stats, 2);
  EXPECT_EQ(s.without_stat, 0u);
  const StripeGeometry g22 = Scheme("ec:2+2");
  const WireShardKey key22{1, 702, 1, 0, 0, 0};
  WriteAll(g22, key22, data);
  s = ReadAndCheck(g22, key22, 0, kStripe, *data);
  EXPECT_EQ(s.stats, 2) << "the parity cells' versions";
  EXPECT_EQ(s.without_stat, 0u);
}

// A data cell that missed the last write (older version): the cells disagree, the read turns
// degraded and decodes that cell from the newest version K shards hold.
TEST_F(EcReadTest, AStaleDataCellTurnsTheReadDegraded) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 703, 1, 0, 0, 0};
  auto v1 = Unit(3), v2 = Unit(4);
  WriteAll(g, key, v1);
  const uint64_t old_version = fake_.Version(1, 703, 1, 0, 1);
  auto old_cell = fake_.Stored(1, 703, 1, 0, 1);
  WriteAll(g, key, v2);
  fake_.Put(1, 703, 1, 0, 1, old_cell, old_version);  // cell 1 as if it had missed v2
  const Sent s = ReadAndCheck(g, key, 0, kStripe, *v2);
  EXPECT_EQ(s.degraded, 1u);
}

// A data cell that is missing is rebuilt from the others.
TEST_F(EcReadTest, AMissingDataCellIsDecoded) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 704, 1, 0, 0, 0};
  auto data = Unit(5);
  WriteAll(g, key, data);
  fake_.Erase(1, 704, 1, 0, 0);
  const Sent s = ReadAndCheck(g, key, 0, kStripe, *data);
  EXPECT_EQ(s.degraded, 1u);
}

// A data cell whose target the map marks as having missed writes to the container is not read:
// the stripe reads degraded from the others, whatever that cell holds.
TEST_F(EcReadTest, ACellOnATargetTheMapMarksIsNotRead) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 705, 1, 0, 0, 0};
  auto v1 = Unit(6), v2 = Unit(7);
  WriteAll(g, key, v1);
  auto slots = io_.Slots(key, 3);
  ASSERT_TRUE(slots.ok());
  const uint64_t old_version = fake_.Version(1, 705, 1, 0, 0);
  auto old_cell = fake_.Stored(1, 705, 1, 0, 0);
  WriteAll(g, key, v2);
  fake_.Put(1, 705, 1, 0, 0, old_cell, old_version);  // cell 0 missed v2 ...
  std::vector<TargetRef> marked = view_.targets();
  for (TargetRef& t : marked) {
    if (t.id == (*slots)[0].id) t.recovering_for = {1};  // ... and the map says so
  }
  view_.Set(view_.epoch() + 1, marked);
  const Sent s = ReadAndCheck(g, key, 0, kStripe, *v2);
  EXPECT_EQ(s.degraded, 1u);
  EXPECT_EQ(s.ranges, 2) << "cell 1 and parity, not the marked target's cell";
}

// A late data cell (its target stopped): the read does not wait for it past the straggler
// delay, decodes it, and suspects that target only, not the parity target it never asked.
TEST_F(EcReadTest, ALateDataCellIsDecodedAndOnlyItsTargetSuspected) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 706, 1, 0, 0, 0};
  auto data = Unit(8);
  WriteAll(g, key, data);
  auto slots = io_.Slots(key, 3);
  ASSERT_TRUE(slots.ok());
  fake_.Stall((*slots)[1].address);
  auto got = io_.ReadSync(g, key, 0, kStripe);
  fake_.Unstall((*slots)[1].address);
  fake_.Drain();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::memcmp(got->data.data(), data->data(), kStripe), 0);
  auto now = io_.ReadSlots(key, 3);
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE((*now)[1].up) << "the late target is suspected";
  EXPECT_TRUE((*now)[0].up && (*now)[2].up) << "no target that was not asked is suspected";
}

}  // namespace
}  // namespace penstock
