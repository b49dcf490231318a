// object_impl_test_fixture.h — ObjectImplTest: ObjectImpl over a fake transport (no servers;
// replies held, failed or delayed on demand), shared by the object_*_test.cc files.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "client/disjoint_writes.h"
#include "client/fake_shard_transport.h"
#include "client/object_impl.h"
#include "client/stripe_pipeline.h"
#include "common/await.h"
#include "penstock/mgmt.pb.h"

namespace penstock::object_test {


constexpr uint64_t kStripe = 4096;

// A scheme from its text, with an optional write quorum after '@' ("rep:2@1": acknowledged on
// one durable copy, the degraded writes these tests exercise; without: the default quorum).
inline Redundancy ParseScheme(const std::string& text) {
  const size_t at = text.find('@');
  Redundancy r = *ParseRedundancy(text.substr(0, at));
  if (at != std::string::npos) r.min_durable = static_cast<uint32_t>(std::stoul(text.substr(at + 1)));
  return r;
}

// `scheme` acknowledged once K shards are durable (the lowest quorum there is).
inline std::string AtK(const std::string& scheme) {
  return scheme == "none" ? scheme : scheme + "@" + std::to_string(ParseScheme(scheme).k);
}

class ObjectImplTest : public ::testing::Test {
 protected:
  ObjectImplTest()
      : view_(nullptr),
        shards_(&fake_, &view_, std::chrono::milliseconds(200)),
        io_(&shards_, &view_, std::chrono::milliseconds(200)) {
    view_.Set(1, {{1, "uuid-1", "fake:1", true}, {2, "uuid-2", "fake:2", true}, {3, "uuid-3", "fake:3", true}});
  }

  // A new object `name` (data id next_id_ after the call), through `io` (default: io_).
  std::shared_ptr<Object> NewObject(const std::string& name, const std::string& redundancy = "none",
                                    StripeIo* io = nullptr) {
    if (io == nullptr) io = &io_;
    ObjectHead h;
    h.name = name;
    h.stripe_unit = kStripe;
    h.data_hi = ++next_id_;
    h.data_lo = 7;
    WireShardKey head_key{1, next_id_, 1, UINT64_MAX, 0, 0};
    red_ = ParseScheme(redundancy);
    EXPECT_TRUE(io->WriteHead(red_, head_key, EncodeObjectHead(h), NewVersion()).ok());  // as Open(create) does
    return std::make_shared<ObjectImpl>(io, &tracker_, 1, red_, head_key, h);
  }

  // Stripes of `redundancy` (also red_ from now on) with this fixture's stripe unit.
  StripeGeometry Scheme(const std::string& redundancy) {
    red_ = ParseScheme(redundancy);
    return StripeGeometry::For(red_, kStripe);
  }

  // Writes `count` pieces of 20 bytes, 50 bytes apart, into stripe 0 of `obj` at once (the
  // first one's lease reply held, so the rest queue behind it; pattern seeds from `seed`), and
  // into `data` as they should land; expects all to succeed, then drains.
  void WriteAStreamIntoOneStripe(Object& obj, std::vector<std::byte>& data, int count, int seed) {
    std::vector<std::vector<std::byte>> pieces;
    pieces.reserve(count);
    CompletionQueue cq;
    fake_.Hold();
    for (int i = 0; i < count; ++i) {
      pieces.push_back(Bytes(20, seed + i));
      obj.WriteAsync(i * 50, {{pieces.back().data(), pieces.back().size()}}, cq, i);
      std::copy(pieces.back().begin(), pieces.back().end(), data.begin() + i * 50);
    }
    fake_.Release();
    auto c = cq.Wait(count, std::chrono::seconds(10));
    ASSERT_EQ(c.size(), static_cast<size_t>(count));
    for (const auto& done : c) ASSERT_TRUE(done.status.ok()) << done.status.ToString();
    fake_.Drain();
  }

  // Another open of the object NewObject made last (as a second client would have).
  std::shared_ptr<Object> SecondHandle() {
    ObjectHead h;
    h.name = "second";
    h.stripe_unit = kStripe;
    h.data_hi = next_id_;
    h.data_lo = 7;
    return std::make_shared<ObjectImpl>(&io_, &tracker_, 1, red_, WireShardKey{1, next_id_, 1, UINT64_MAX, 0, 0}, h);
  }

  // Writes `before` to every slot of `key`'s stripe, then `after` with slot `missing`'s target
  // down: a degraded write, that shard keeps `before`. Expects both to succeed.
  void WriteMissing(const StripeGeometry& g, const WireShardKey& key, uint32_t missing,
                    std::shared_ptr<const AlignedBuffer> before, std::shared_ptr<const AlignedBuffer> after) {
    auto slots = io_.Slots(key, g.red.width());
    ASSERT_TRUE(slots.ok());
    ASSERT_TRUE(io_.WriteSync(g, key, before, NewVersion()).ok());
    fake_.Kill((*slots)[missing].address, Unavailable("fake: down"));
    ASSERT_TRUE(io_.WriteSync(g, key, after, NewVersion()).ok());
    fake_.Revive((*slots)[missing].address);
    fake_.Drain();
  }

  // mgmt's next map, as a push or fetch brings it: the `stale` targets missed a write to
  // container 1.
  void MarkMissedWrite(const std::vector<TargetRef>& stale) {
    std::vector<TargetRef> marked = view_.targets();
    for (TargetRef& t : marked) {
      for (const TargetRef& s : stale) {
        if (t.id == s.id) t.recovering_for = {1};
      }
    }
    view_.Set(view_.epoch() + 1, marked);
  }

  // Reads the stripe `key` while `good` stalls (its answer comes after the straggler delay):
  // once the read is placed and the `stale` copies answered, mgmt's next map marks them as
  // having missed a write; `good` resumes 600 ms later. The read's result.
  Result<ShardData> ReadWhileTheMapMoves(const StripeGeometry& g, const WireShardKey& key, const TargetRef& good,
                                         const std::vector<TargetRef>& stale) {
    fake_.Stall(good.address);
    std::promise<Result<ShardData>> got;
    io_.Read(g, key, 0, kStripe, [&](Result<ShardData> r) { got.set_value(std::move(r)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // placed; the stale copies answered
    MarkMissedWrite(stale);
    std::thread resume([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      fake_.Unstall(good.address);
    });
    auto r = got.get_future().get();
    resume.join();
    return r;
  }

  // A read that ran while the good copy stalled and the map changed: it may fail (retryably)
  // within this test's short retry budget (the good copy is suspected after its late answer);
  // if it answers, it answers `want`, never what a stale copy holds.
  static void ExpectNewBytesOrRetryable(const Result<ShardData>& r, std::span<const std::byte> want) {
    if (!r.ok()) {
      EXPECT_TRUE(r.status().retryable()) << r.status().ToString();
      return;
    }
    ASSERT_EQ(r->data.size(), want.size());
    EXPECT_EQ(std::memcmp(r->data.data(), want.data(), want.size()), 0) << "answered with a copy that missed a write";
  }

  // A stripe unit of Bytes, as a write takes it.
  static std::shared_ptr<const AlignedBuffer> Unit(uint32_t seed) {
    return std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(Bytes(kStripe, seed)));
  }

  static std::vector<std::byte> Bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> v(n);
    for (auto& b : v) b = std::byte{static_cast<unsigned char>(rng())};
    return v;
  }

  testing::FakeShardTransport fake_;
  ClusterView view_;
  ShardClient shards_;
  StripeIo io_;
  OpTracker tracker_;
  Redundancy red_;
  uint64_t next_id_ = 100;
};

class ObjectImplRedundancyTest : public ObjectImplTest, public ::testing::WithParamInterface<std::string> {};

}  // namespace penstock::object_test
