// ObjectImpl over a fake transport: no servers, replies held, failed or delayed on demand.
#include "client/object_impl.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include <cstring>
#include <random>
#include <thread>

#include "client/disjoint_writes.h"
#include "common/await.h"
#include "client/fake_shard_transport.h"
#include "client/stripe_pipeline.h"
#include "penstock/mgmt.pb.h"

namespace penstock {
namespace {

constexpr uint64_t kStripe = 4096;

// A scheme from its text, with an optional write quorum after '@' ("rep:2@1": acknowledged on
// one durable copy, the degraded writes these tests exercise; without: the default quorum).
Redundancy ParseScheme(const std::string& text) {
  const size_t at = text.find('@');
  Redundancy r = *ParseRedundancy(text.substr(0, at));
  if (at != std::string::npos) r.min_durable = static_cast<uint32_t>(std::stoul(text.substr(at + 1)));
  return r;
}

// `scheme` acknowledged once K shards are durable (the lowest quorum there is).
std::string AtK(const std::string& scheme) {
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

INSTANTIATE_TEST_SUITE_P(Schemes, ObjectImplRedundancyTest, ::testing::Values("none", "rep:2", "ec:2+1"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST_P(ObjectImplRedundancyTest, RandomRangesMatchModel) {
  auto obj = NewObject("model", GetParam());
  std::vector<std::byte> model;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    uint64_t off = rng() % (20 * kStripe);
    uint64_t len = 1 + rng() % (3 * kStripe);
    if (rng() % 2) {
      auto d = Bytes(len, static_cast<uint32_t>(i));
      ASSERT_TRUE(obj->Write(off, d).ok());
      if (model.size() < off + len) model.resize(off + len, std::byte{0});
      std::memcpy(model.data() + off, d.data(), len);
    } else {
      std::vector<std::byte> out(len);
      auto n = obj->Read(off, out);
      ASSERT_TRUE(n.ok());
      uint64_t expect = off >= model.size() ? 0 : std::min<uint64_t>(len, model.size() - off);
      ASSERT_EQ(*n, expect);
      ASSERT_EQ(0, std::memcmp(out.data(), model.data() + off, expect)) << "op " << i;
    }
    if (i % 500 == 499) {  // shrink now and then
      uint64_t to = rng() % (model.size() + 1);
      ASSERT_TRUE(obj->Truncate(to).ok());
      model.resize(to);
    }
  }
  EXPECT_EQ(obj->size(), model.size());
}

// A transient failure (a target restarting) is retried and the operation succeeds; one that
// outlasts the retry budget (the fixture's 200 ms) fails only its own operation, naming the
// target; a permanent error fails at once.
TEST_F(ObjectImplTest, TransientErrorsAreRetriedOthersFailOnlyTheirOperation) {
  auto obj = NewObject("err");
  const auto data = Bytes(3 * kStripe, 1);
  ASSERT_TRUE(obj->Write(0, data).ok());
  fake_.FailNext(ShardOp::kReadRange, Unavailable("target 2 (fake:2) is restarting"), 2);
  fake_.FailNext(ShardOp::kWriteRange, Unavailable("target 2 (fake:2) is restarting"), 2);
  std::vector<std::byte> out(3 * kStripe);
  auto r = obj->Read(0, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin()));
  EXPECT_TRUE(obj->Write(10, Bytes(10, 2)).ok());
  EXPECT_GE(io_.stats().transient_retries.load(), 4u);

  for (const char* addr : {"fake:1", "fake:2", "fake:3"}) fake_.Kill(addr, Unavailable(std::string(addr) + " is gone"));
  const auto before = io_.stats().transient_retries.load();
  r = obj->Read(0, out);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("is gone"), std::string::npos);
  EXPECT_GT(io_.stats().transient_retries.load(), before + 2);  // it waited for them
  for (const char* addr : {"fake:1", "fake:2", "fake:3"}) fake_.Revive(addr);
  EXPECT_TRUE(obj->Read(0, out).ok());
  fake_.FailNext(ShardOp::kWriteRange, DataLoss("disk says no"));
  const auto retries = io_.stats().transient_retries.load();
  EXPECT_EQ(obj->Write(10, Bytes(10, 2)).code(), StatusCode::kDataLoss);
  EXPECT_EQ(io_.stats().transient_retries.load(), retries);
}

// Reads of one piece per stripe are received straight into the caller's buffers (no copy in
// the client), for every scheme; reads of several nearby ranges share a request and a copy.
TEST_P(ObjectImplRedundancyTest, ReadsArePlacedIntoTheCallersBuffers) {
  auto obj = NewObject("placed", GetParam());
  const auto data = Bytes(5 * kStripe + 100, 4);
  ASSERT_TRUE(obj->Write(0, data).ok());
  const uint64_t before = fake_.placed_bytes();
  std::vector<std::byte> a(3 * kStripe), b(2 * kStripe + 100);  // scatter over two buffers
  CompletionQueue cq;
  obj->ReadAsync(0, {{a.data(), a.size()}, {b.data(), b.size()}}, cq, 1);
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  ASSERT_TRUE(c[0].status.ok()) << c[0].status.ToString();
  EXPECT_EQ(c[0].bytes, data.size());
  EXPECT_EQ(0, std::memcmp(a.data(), data.data(), a.size()));
  EXPECT_EQ(0, std::memcmp(b.data(), data.data() + a.size(), b.size()));
  EXPECT_EQ(fake_.placed_bytes() - before, data.size());  // every byte placed, none copied

  // Unaligned, across a stripe boundary, and past the end (short, the tail untouched).
  std::vector<std::byte> out(kStripe + 50, std::byte{0x77});
  auto n = obj->Read(5 * kStripe - 1000, out);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1100u);
  EXPECT_EQ(0, std::memcmp(out.data(), data.data() + 5 * kStripe - 1000, 1100));
}

// A protected stripe's write lease is never asked of a target that is not up (down in the map,
// or suspected: asked again over the same token, its late first grant's release would end the
// second): with every slot so, the lease waits for that to change within its policy, then fails.
TEST_F(ObjectImplTest, AStripeLeaseIsNeverAskedOfATargetThatIsNotUp) {
  const StripeGeometry g = Scheme("rep:2");
  const WireShardKey key{1, 567, 1, 0, 0, 0};
  auto slots = io_.Slots(key, 2);
  ASSERT_TRUE(slots.ok());
  std::vector<TargetRef> down = view_.targets();
  for (TargetRef& t : down) {
    if (t.id == (*slots)[0].id || t.id == (*slots)[1].id) t.up = false;
  }
  view_.Set(view_.epoch() + 1, down);
  const int locks = fake_.calls(ShardOp::kLockStripe);
  auto r = Await<Result<StripeLease>>([&](auto done) {
    io_.LockStripe(g, key, 42, RetryPolicy{std::chrono::steady_clock::now() + std::chrono::milliseconds(100), {}},
                   std::move(done));
  });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("is up to grant its write lease"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(fake_.calls(ShardOp::kLockStripe), locks) << "a lease was asked of a target that is not up";
}

// One Object's two holdings of a stripe's write lease exclude each other, as two clients' do: a
// truncate that cuts a stripe waits for a write of it that holds the lease (its replies held
// here) instead of sharing the lease, then goes on once the write has released it.
TEST_F(ObjectImplTest, ATruncateAndAWriteOfOneStripeTakeTurnsAtItsLease) {
  ShardClient shards(&fake_, &view_, std::chrono::milliseconds(5000));
  StripeIo io(&shards, &view_, std::chrono::milliseconds(2000));
  auto obj = NewObject("turns", "rep:2", &io);
  const auto data = Bytes(2 * kStripe, 96);
  ASSERT_TRUE(obj->Write(0, data).ok());
  fake_.Drain();
  const int conflicts = fake_.lease_conflicts();
  fake_.Hold();  // requests are served at once (the write's lease is granted), replies wait
  CompletionQueue cq;
  auto piece = Bytes(100, 97);
  obj->WriteAsync(kStripe + 500, {{piece.data(), piece.size()}}, cq, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::promise<Status> truncated;
  std::thread truncate([&] { truncated.set_value(obj->Truncate(kStripe + 200)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_GT(fake_.lease_conflicts(), conflicts) << "the truncate shared the write's lease";
  fake_.Release();
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].status.ok()) << c[0].status.ToString();
  Status t = truncated.get_future().get();
  truncate.join();
  ASSERT_TRUE(t.ok()) << t.ToString();
  // The write went first (it held the lease), then the cut: the first kStripe + 200 bytes.
  std::vector<std::byte> out(2 * kStripe);
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, kStripe + 200);
  EXPECT_EQ(0, std::memcmp(out.data(), data.data(), *n));
  fake_.Drain();
}

// Writes of one protected stripe queued behind each other hand its write lease on: each next
// one renews it instead of a release and a new lease, and (rep) patches over the version the
// one before left on every copy instead of asking the copies (kStat) again. After kLeaseWrites
// (64) writes the lease is released and taken anew, so other writers get their turn.
TEST_F(ObjectImplTest, QueuedWritesOfAStripeHandItsLeaseOn) {
  auto obj = NewObject("chain", "rep:2");
  auto data = Bytes(kStripe, 40);
  ASSERT_TRUE(obj->Write(0, data).ok());
  fake_.Drain();
  const int locks = fake_.calls(ShardOp::kLockStripe), unlocks = fake_.calls(ShardOp::kUnlockStripe);
  const int stats = fake_.calls(ShardOp::kStat);
  const uint64_t known = io_.stats().known_version_patches;
  constexpr int kWrites = 70;
  WriteAStreamIntoOneStripe(*obj, data, kWrites, 41);
  const int grants = fake_.calls(ShardOp::kUnlockStripe) - unlocks;  // each grant is released once
  EXPECT_GE(grants, 2) << "the lease was never given up for other writers";
  EXPECT_LT(grants, 10) << "the lease was released and taken again between queued writes";
  EXPECT_EQ(fake_.calls(ShardOp::kLockStripe) - locks, kWrites);  // grants and renewals
  EXPECT_EQ(fake_.calls(ShardOp::kStat) - stats, 2 * grants);    // both copies, once a grant
  EXPECT_EQ(io_.stats().known_version_patches - known, static_cast<uint64_t>(kWrites - grants));
  std::vector<std::byte> out(kStripe);
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, kStripe);
  EXPECT_EQ(out, data);
}

// A handed lease that lapsed meanwhile (here its target restarted and forgot it) is granted
// anew, not renewed: another writer may have written the stripe in between, so the next write
// asks the copies for their versions instead of patching over the version it knew (which the
// copies would refuse).
TEST_F(ObjectImplTest, AHandedLeaseThatLapsedForgetsWhatItKnew) {
  auto obj = NewObject("lapse", "rep:2");
  ASSERT_TRUE(obj->Write(0, Bytes(kStripe, 50)).ok());
  fake_.Drain();
  auto expected = Bytes(kStripe, 51);  // another client's write of the whole stripe
  const uint64_t id = next_id_;
  fake_.BeforeCall(ShardOp::kLockStripe, 2, [&] {  // as the second write renews the lease
    fake_.DropLeases();
    const uint64_t v = fake_.Version(1, id, 7, 0, 0) + 1000;
    for (uint32_t shard : {0u, 1u}) fake_.Put(1, id, 7, 0, shard, expected, v);
  });
  const uint64_t degraded = io_.stats().degraded_writes;
  auto a = Bytes(100, 52), b = Bytes(100, 53);
  CompletionQueue cq;
  fake_.Hold();
  obj->WriteAsync(0, {{a.data(), a.size()}}, cq, 1);
  obj->WriteAsync(2000, {{b.data(), b.size()}}, cq, 2);
  fake_.Release();
  auto c = cq.Wait(2, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 2u);
  for (const auto& done : c) ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  std::copy(b.begin(), b.end(), expected.begin() + 2000);
  std::vector<std::byte> out(kStripe);
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, expected);
  EXPECT_EQ(io_.stats().degraded_writes, degraded);
  fake_.Drain();
}

// The chain's bound counts from the lease's first grant even where targets never say
// "renewed" (from before LockReplyHeader): the lease is still given up after kLeaseWrites writes.
TEST_F(ObjectImplTest, TheLeaseChainIsBoundedWithTargetsThatNeverSayRenewed) {
  auto obj = NewObject("legacy", "rep:2");
  auto data = Bytes(kStripe, 60);
  ASSERT_TRUE(obj->Write(0, data).ok());
  fake_.Drain();
  fake_.set_legacy_leases(true);
  const int unlocks = fake_.calls(ShardOp::kUnlockStripe);
  WriteAStreamIntoOneStripe(*obj, data, 70, 61);
  EXPECT_GE(fake_.calls(ShardOp::kUnlockStripe) - unlocks, 2) << "one Object held the lease for the whole stream";
  fake_.set_legacy_leases(false);
  std::vector<std::byte> out(kStripe);
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, data);
}

// A write whose operation ended (cancelled here) while its merged batch waited for the stripe's
// lease does not land: nothing of it had been sent. The others of the batch go.
TEST_F(ObjectImplTest, AWriteCancelledWhileItsMergedBatchWaitsForTheLeaseDoesNotLand) {
  auto obj = NewObject("merged", "rep:2");
  auto expected = Bytes(kStripe, 70);
  ASSERT_TRUE(obj->Write(0, expected).ok());
  fake_.Drain();
  const uint64_t id = next_id_;
  const int conflicts = fake_.lease_conflicts();
  // As the merged batch renews the lease, another client holds it.
  fake_.BeforeCall(ShardOp::kLockStripe, 2, [&] { fake_.LeaseAs(1, id, 7, 0, 0xF00D); });
  auto first = Bytes(100, 71), a = Bytes(100, 72), b = Bytes(100, 73);
  CompletionQueue cq;
  fake_.Hold();  // the first write's lease reply waits: a and b queue behind it, to merge
  obj->WriteAsync(0, {{first.data(), first.size()}}, cq, 1);
  OpId ida = obj->WriteAsync(200, {{a.data(), a.size()}}, cq, 2);
  obj->WriteAsync(300, {{b.data(), b.size()}}, cq, 3);
  fake_.Release();
  for (int i = 0; i < 500 && fake_.lease_conflicts() == conflicts; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GT(fake_.lease_conflicts(), conflicts) << "the batch never met the other client's lease";
  EXPECT_TRUE(obj->Cancel(ida));
  fake_.LeaseAs(1, id, 7, 0, 0);  // the other client is done
  auto c = cq.Wait(3, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 3u);
  for (const auto& done : c) {
    if (done.user_data == 2) {
      EXPECT_EQ(done.status.code(), StatusCode::kCancelled);
    } else {
      EXPECT_TRUE(done.status.ok()) << done.status.ToString();
    }
  }
  fake_.Drain();
  std::copy(first.begin(), first.end(), expected.begin());
  std::copy(b.begin(), b.end(), expected.begin() + 300);
  std::vector<std::byte> out(kStripe);
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, expected) << "the cancelled write's bytes landed";
}

// The versions a handed lease knows go stale when the stripe changes without the lease (a
// truncate in another client deletes it): the copies refuse the patch, and the write asks them
// what they hold instead of failing.
TEST_F(ObjectImplTest, AChainedWriteAfterATruncateElsewhereAsksTheCopiesAgain) {
  auto obj = NewObject("cut", "rep:2");
  ASSERT_TRUE(obj->Write(0, Bytes(kStripe, 80)).ok());
  fake_.Drain();
  const uint64_t id = next_id_;
  fake_.BeforeCall(ShardOp::kLockStripe, 2, [&] {  // as the second write renews the lease
    for (uint32_t shard : {0u, 1u}) fake_.Erase(1, id, 7, 0, shard);
  });
  auto a = Bytes(100, 81), b = Bytes(100, 82);
  CompletionQueue cq;
  fake_.Hold();
  obj->WriteAsync(0, {{a.data(), a.size()}}, cq, 1);
  obj->WriteAsync(2000, {{b.data(), b.size()}}, cq, 2);  // not touching: a write of its own
  fake_.Release();
  auto c = cq.Wait(2, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 2u);
  for (const auto& done : c) EXPECT_TRUE(done.status.ok()) << done.user_data << ": " << done.status.ToString();
  fake_.Drain();
  // What the cut left: b's bytes alone, after zeros.
  std::vector<std::byte> held = fake_.Stored(1, id, 7, 0, 0);
  ASSERT_EQ(held.size(), 2100u);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), held.begin() + 2000));
  EXPECT_TRUE(std::all_of(held.begin(), held.begin() + 2000, [](std::byte x) { return x == std::byte{0}; }));
}

// A cancelled read whose reply is being received into its buffer completes only once that
// transfer has ended: the caller gets its memory back exactly with the completion.
TEST_F(ObjectImplTest, CancelWaitsForATransferIntoTheBuffer) {
  auto obj = NewObject("lent");
  const auto data = Bytes(2 * kStripe, 5);
  ASSERT_TRUE(obj->Write(0, data).ok());
  CompletionQueue cq;
  std::vector<std::byte> buf(2 * kStripe, std::byte{0xAA});
  fake_.HoldPlacements();
  OpId id = obj->ReadAsync(0, {{buf.data(), buf.size()}}, cq, 1);
  for (int i = 0; i < 1000 && fake_.placements_held() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(fake_.placements_held(), 2u);
  EXPECT_TRUE(obj->Cancel(id));
  EXPECT_TRUE(cq.Wait(1, std::chrono::milliseconds(100)).empty());  // the buffer is still lent
  EXPECT_FALSE(obj->Cancel(id));
  fake_.ReleasePlacements();
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kCancelled);
  std::fill(buf.begin(), buf.end(), std::byte{0xBB});
  fake_.Drain();
  for (auto x : buf) ASSERT_EQ(x, std::byte{0xBB});
  EXPECT_TRUE(cq.Poll().empty());
}

// rep:2 whose first replica's transfer is still running when the read goes on without it
// (straggler): the other replica's bytes are copied in only after that transfer ended, so a
// late transfer never overwrites the answer, and the op completes after it.
TEST_F(ObjectImplTest, LateReplicaTransferNeverOverwritesTheAnswer) {
  auto obj = NewObject("late", "rep:2");
  const auto data = Bytes(kStripe, 6);
  ASSERT_TRUE(obj->Write(0, data).ok());
  // The replica read first (slot 0) gets other bytes, with an older version.
  WireShardKey key{1, next_id_, 7, 0, 0, 0};
  const auto stale = Bytes(kStripe, 7);
  Result<std::vector<TargetRef>> slots = io_.Slots(key, 2);
  ASSERT_TRUE(slots.ok());
  ASSERT_TRUE(shards_.WriteTo((*slots)[0], key, stale, 1, false).ok());
  CompletionQueue cq;
  std::vector<std::byte> buf(kStripe);
  fake_.HoldPlacements();
  obj->ReadAsync(0, {{buf.data(), buf.size()}}, cq, 1);
  // The stale replica's transfer is held; after the straggler time the newer replica answers.
  EXPECT_TRUE(cq.Wait(1, std::chrono::milliseconds(600)).empty());
  ASSERT_EQ(fake_.placements_held(), 1u);
  fake_.ReleasePlacements();
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  ASSERT_TRUE(c[0].status.ok()) << c[0].status.ToString();
  EXPECT_EQ(0, std::memcmp(buf.data(), data.data(), kStripe));
}

// An unprotected write is sent from the caller's buffer: cancelled while its stripe write is
// in flight, it completes only once that write ended (the buffer is the caller's again then).
TEST_F(ObjectImplTest, CancelledWriteCompletesAfterItsSendsFromTheBuffer) {
  auto obj = NewObject("lent-write");
  const auto data = Bytes(2 * kStripe, 8);
  CompletionQueue cq;
  fake_.Hold();
  OpId id = obj->WriteAsync(0, {{const_cast<std::byte*>(data.data()), data.size()}}, cq, 1);
  EXPECT_TRUE(obj->Cancel(id));
  EXPECT_TRUE(cq.Wait(1, std::chrono::milliseconds(100)).empty());  // still lent to the sends
  fake_.Release();
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kCancelled);
  fake_.Drain();
  EXPECT_TRUE(cq.Poll().empty());
  // Sent from the caller's memory, the bytes landed in its stripes all the same (the object's
  // size was not extended: the write was cancelled before that).
  for (uint64_t stripe = 0; stripe < 2; ++stripe) {
    const auto begin = data.begin() + static_cast<std::ptrdiff_t>(stripe * kStripe);
    EXPECT_EQ(fake_.Stored(1, next_id_, 7, stripe, 0), std::vector<std::byte>(begin, begin + kStripe)) << stripe;
  }
}

// A protected stripe written whole is sent from the caller's buffer too (no copy): cancelled
// while it waits for its stripe's lease, the write completes only once the buffer is the
// caller's again, and nothing of it lands.
TEST_P(ObjectImplRedundancyTest, CancelledWholeWriteCompletesOnlyOnceItsBufferIsReturned) {
  auto obj = NewObject("lent-whole", GetParam());
  const auto data = Bytes(kStripe, 9);
  CompletionQueue cq;
  fake_.Hold();  // the lease reply (protected) or the write's reply (none) waits
  OpId id = obj->WriteAsync(0, {{const_cast<std::byte*>(data.data()), data.size()}}, cq, 1);
  EXPECT_TRUE(obj->Cancel(id));
  EXPECT_TRUE(cq.Wait(1, std::chrono::milliseconds(100)).empty());  // still lent
  fake_.Release();
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kCancelled);
  fake_.Drain();
  EXPECT_TRUE(cq.Poll().empty());
}

// A protected whole-stripe write sent from the caller's buffer and decided on its quorum while
// one shard's request still runs (a straggler past the straggler delay): the straggler's
// request is given up (CallAbandon), and the completion comes only once it ended, so no
// transfer reads the caller's memory after the caller got it back; the caller's bytes are what
// every copy or cell holds.
TEST_F(ObjectImplTest, AWholeWriteFromTheCallersBufferCompletesAfterItsStragglers) {
  for (const char* scheme : {"rep:3@2", "ec:2+1@2"}) {
    SCOPED_TRACE(scheme);
    // A fresh StripeIo: no target is suspected yet.
    StripeIo io(&shards_, &view_, std::chrono::milliseconds(200));
    auto obj = NewObject(std::string("straggled-") + scheme, scheme, &io);
    auto slots = io.Slots(WireShardKey{1, next_id_, 7, 0, 0, 0}, red_.width());
    ASSERT_TRUE(slots.ok());
    const std::string late = slots->back().address;  // not the lease's target (slot 0)
    std::vector<std::byte> data = Bytes(kStripe, 10);
    const std::vector<std::byte> wrote = data;
    CompletionQueue cq;
    fake_.Stall(late);
    obj->WriteAsync(0, {{data.data(), data.size()}}, cq, 1);
    auto c = cq.Wait(1, std::chrono::seconds(10));  // the late target still stalls
    ASSERT_EQ(c.size(), 1u);
    EXPECT_TRUE(c[0].status.ok()) << c[0].status.ToString();
    EXPECT_EQ(fake_.stalled_calls(late), 0u) << "completed while a request could read the buffer";
    EXPECT_GT(io.stats().degraded_writes.load(), 0u);
    fake_.Unstall(late);
    std::fill(data.begin(), data.end(), std::byte{0xEE});  // the caller's memory again
    fake_.Drain();
    std::vector<std::byte> out(kStripe);
    auto n = obj->Read(0, out);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(out, wrote);
    const uint32_t shard = static_cast<uint32_t>(red_.width() - 1);
    auto stored = fake_.Stored(1, next_id_, 7, 0, shard);
    if (red_.kind == Redundancy::Kind::kReplicate) {
      EXPECT_EQ(stored, wrote);
    }
    EXPECT_FALSE(stored.empty());
  }
}

TEST_F(ObjectImplTest, CancelledReadNeverTouchesTheBufferAgain) {
  auto obj = NewObject("cancel");
  ASSERT_TRUE(obj->Write(0, Bytes(4 * kStripe, 3)).ok());
  CompletionQueue cq;
  std::vector<std::byte> buf(4 * kStripe, std::byte{0xAA});
  fake_.Hold();
  OpId id = obj->ReadAsync(0, {{buf.data(), buf.size()}}, cq, 1);
  EXPECT_TRUE(obj->Cancel(id));
  auto c = cq.Poll();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kCancelled);
  std::fill(buf.begin(), buf.end(), std::byte{0xBB});  // the caller reuses its buffer at once
  fake_.Release();
  fake_.Drain();
  for (auto b : buf) ASSERT_EQ(b, std::byte{0xBB});
  EXPECT_TRUE(cq.Poll().empty());  // exactly one completion
  EXPECT_FALSE(obj->Cancel(id));
}

TEST_F(ObjectImplTest, DeadlinePassesWhileRepliesAreHeld) {
  auto obj = NewObject("deadline");
  ASSERT_TRUE(obj->Write(0, Bytes(kStripe, 4)).ok());
  CompletionQueue cq;
  std::vector<std::byte> buf(kStripe);
  fake_.Hold();
  obj->ReadAsync(0, {{buf.data(), buf.size()}}, cq, 5,
                 std::chrono::steady_clock::now() + std::chrono::milliseconds(30));
  auto c = cq.Wait(1, std::chrono::seconds(5));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kDeadlineExceeded);
  fake_.Release();
  fake_.Drain();
  EXPECT_TRUE(cq.Poll().empty());
}

TEST_F(ObjectImplTest, OverlappingWritesApplyInSubmissionOrder) {
  auto obj = NewObject("order");
  ASSERT_TRUE(obj->Write(0, std::vector<std::byte>(kStripe, std::byte{1})).ok());
  CompletionQueue cq;
  std::vector<std::byte> a(100, std::byte{2}), b(100, std::byte{3});
  fake_.Hold();  // both partial writes queue behind each other on the same stripe
  obj->WriteAsync(50, {{a.data(), a.size()}}, cq, 1);
  obj->WriteAsync(100, {{b.data(), b.size()}}, cq, 2);
  fake_.Release();
  auto done = cq.Wait(2, std::chrono::seconds(5));
  ASSERT_EQ(done.size(), 2u);
  std::vector<std::byte> out(kStripe);
  ASSERT_TRUE(obj->Read(0, out).ok());
  EXPECT_EQ(out[49], std::byte{1});
  EXPECT_EQ(out[50], std::byte{2});
  EXPECT_EQ(out[99], std::byte{2});
  EXPECT_EQ(out[100], std::byte{3});
  EXPECT_EQ(out[199], std::byte{3});
  EXPECT_EQ(out[200], std::byte{1});
}

TEST_F(ObjectImplTest, BatchCoalescesNearbyReads) {
  auto obj = NewObject("batch");
  auto data = Bytes(2 * kStripe, 6);
  ASSERT_TRUE(obj->Write(0, data).ok());
  const int before = fake_.calls(ShardOp::kReadRange);
  std::vector<IoRequest> batch(16);
  std::vector<std::vector<std::byte>> bufs(16, std::vector<std::byte>(256));
  for (int i = 0; i < 16; ++i) {  // 8 pieces in each of the two stripes
    batch[i].offset = static_cast<uint64_t>(i) * 512;
    batch[i].iov = {{bufs[i].data(), 256}};
    batch[i].user_data = static_cast<uint64_t>(i);
  }
  CompletionQueue cq;
  obj->Submit(batch, cq);
  auto done = cq.Wait(16, std::chrono::seconds(5));
  ASSERT_EQ(done.size(), 16u);
  for (auto& c : done) {
    ASSERT_TRUE(c.status.ok());
    EXPECT_EQ(0, std::memcmp(bufs[c.user_data].data(), data.data() + c.user_data * 512, 256));
  }
  EXPECT_EQ(fake_.calls(ShardOp::kReadRange) - before, 2);  // one request per stripe
}

TEST_F(ObjectImplTest, SizeGrowsOnlyAfterDataIsDurable) {
  auto obj = NewObject("grow");
  CompletionQueue cq;
  auto d = Bytes(3 * kStripe, 8);
  fake_.Hold();
  obj->WriteAsync(0, {{d.data(), d.size()}}, cq, 1);
  EXPECT_EQ(obj->size(), 0u);  // nothing durable yet
  fake_.Release();
  ASSERT_EQ(cq.Wait(1, std::chrono::seconds(5)).size(), 1u);
  EXPECT_EQ(obj->size(), 3 * kStripe);
  ASSERT_TRUE(obj->Refresh().ok());  // the head on the "target" says so too
  EXPECT_EQ(obj->size(), 3 * kStripe);
}


// Writes of one stripe queued behind another whose ranges touch (adjacent or overlapping) land
// as one stripe write of their union, later bytes over earlier ones, and each completes; a
// write that does not touch them waits for its own turn. (Unprotected writes from one caller
// buffer, sent from it when alone, are copied into the merged one.)
TEST_P(ObjectImplRedundancyTest, QueuedWritesThatTouchLandAsOne) {
  auto obj = NewObject("merge", GetParam());
  auto expected = Bytes(kStripe, 60);
  ASSERT_TRUE(obj->Write(0, expected).ok());
  fake_.Drain();
  struct Piece {
    uint64_t offset;
    std::vector<std::byte> bytes;
  };
  std::vector<Piece> pieces;
  pieces.push_back({0, Bytes(100, 61)});  // runs at once; the rest queue behind it
  for (int i = 1; i <= 8; ++i) pieces.push_back({100u * i, Bytes(100, 61 + i)});
  pieces.push_back({150, Bytes(200, 70)});   // overlaps two of them: its bytes win
  pieces.push_back({60, Bytes(60, 71)});     // reaches into the first of them from before it
  pieces.push_back({3000, Bytes(100, 72)});  // touches none: a write of its own
  const uint64_t merged = io_.stats().merged_writes;
  CompletionQueue cq;
  fake_.Hold();
  for (size_t i = 0; i < pieces.size(); ++i) {
    obj->WriteAsync(pieces[i].offset, {{pieces[i].bytes.data(), pieces[i].bytes.size()}}, cq, i);
    std::copy(pieces[i].bytes.begin(), pieces[i].bytes.end(), expected.begin() + pieces[i].offset);
  }
  fake_.Release();
  auto c = cq.Wait(pieces.size(), std::chrono::seconds(10));
  ASSERT_EQ(c.size(), pieces.size());
  for (const auto& done : c) ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(io_.stats().merged_writes - merged, 9u);
  std::vector<std::byte> out(kStripe);
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, kStripe);
  EXPECT_EQ(out, expected);
  fake_.Drain();
}

// Two Objects (as in two clients) on one object, each written by two threads at disjoint
// ranges that share stripes: the stripe write leases make their read-modify-writes take turns,
// so every range holds its writer's last bytes in the end (no update lost).
TEST_P(ObjectImplRedundancyTest, ConcurrentWritersFromTwoObjectsLoseNoUpdate) {
  auto a = NewObject("shared", GetParam());
  auto b = SecondHandle();
  const uint64_t kPiece = 300;
  auto w = testing::WriteDisjointPieces(*a, *b, kPiece, 3 * kStripe / kPiece, 4, 60);
  EXPECT_EQ(w.failures, 0);
  std::vector<std::byte> out(3 * kStripe);
  ASSERT_TRUE(a->Refresh().ok());
  auto n = a->Read(0, out);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, w.furthest);  // neither Object's size update shrank the other's
  EXPECT_EQ(testing::LostPieces(w, out, kPiece), 0u) << "pieces whose last write was lost";
  // Protected stripes: the writers did meet at the lease (none stripes take none: each write is
  // one atomic shard operation; only size updates lease the head).
  if (GetParam() != "none") {
    EXPECT_GT(fake_.lease_conflicts(), 0);
  }
}

// A protected object keeps working with one target dead (writes degrade, reads decode) and
// with the map saying it is down; what was written degraded reads back after it returns.
TEST_P(ObjectImplRedundancyTest, OneDeadTargetIsAbsorbed) {
  if (GetParam() == "none") GTEST_SKIP() << "no redundancy";
  auto obj = NewObject("dead", AtK(GetParam()));
  auto before = Bytes(6 * kStripe, 11);
  ASSERT_TRUE(obj->Write(0, before).ok());
  fake_.Kill("fake:2", Unavailable("fake: target 2 is dead"));
  std::vector<std::byte> out(before.size());
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, before);
  auto after = Bytes(6 * kStripe, 12);
  Status w = obj->Write(kStripe / 2, after);  // partial stripes: read-modify-write, degraded
  ASSERT_TRUE(w.ok()) << w.ToString();
  std::vector<std::byte> model = before;
  model.resize(kStripe / 2 + after.size());
  std::memcpy(model.data() + kStripe / 2, after.data(), after.size());
  // Now the map knows: target 2 is down.
  view_.Set(2, {{1, "uuid-1", "fake:1", true}, {2, "uuid-2", "fake:2", false}, {3, "uuid-3", "fake:3", true}});
  out.assign(model.size(), std::byte{0});
  n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, model);
  EXPECT_GT(io_.stats().degraded_writes.load(), 0u);
  // Another target dies too: more than the scheme tolerates, a clear error and no wrong bytes.
  fake_.Kill("fake:1", Unavailable("fake: target 1 is dead"));
  std::fill(out.begin(), out.end(), std::byte{0x5A});
  n = obj->Read(0, out);
  EXPECT_FALSE(n.ok());
  fake_.Revive("fake:1");
  fake_.Revive("fake:2");
  view_.Set(3, {{1, "uuid-1", "fake:1", true}, {2, "uuid-2", "fake:2", true}, {3, "uuid-3", "fake:3", true}});
  out.assign(model.size(), std::byte{0});
  n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, model);
}

// Writes of part of a stripe unit patch none and rep shards in place: only the written bytes
// travel (kWriteRange), nothing is read first. ec patches ranges inside one cell of a full unit
// (ObjectImplTest.EcRangeWritesKeepParityRight).
TEST_P(ObjectImplRedundancyTest, PartialWritesPatchShardsWithoutReadingThem) {
  auto obj = NewObject("patch", GetParam());
  std::vector<std::byte> model = Bytes(3 * kStripe, 31);
  ASSERT_TRUE(obj->Write(0, model).ok());
  fake_.Drain();
  const int reads = fake_.data_reads();
  const int ranges = fake_.calls(ShardOp::kWriteRange);
  std::mt19937_64 rng(32);
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = 1 + rng() % (kStripe / 2);
    const uint64_t off = rng() % (model.size() + kStripe / 2);  // sometimes past the end
    auto d = Bytes(len, 100 + static_cast<uint32_t>(i));
    ASSERT_TRUE(obj->Write(off, d).ok());
    if (model.size() < off + len) model.resize(off + len, std::byte{0});
    std::memcpy(model.data() + off, d.data(), len);
  }
  fake_.Drain();
  if (GetParam() == "ec:2+1") {  // ranges inside one cell of a full unit are patched
    EXPECT_GT(fake_.calls(ShardOp::kWriteRange), ranges);
  } else {
    EXPECT_EQ(fake_.data_reads(), reads);
    EXPECT_GE(fake_.calls(ShardOp::kWriteRange) - ranges, 40 * static_cast<int>(red_.width()));
  }
  std::vector<std::byte> out(model.size());
  auto n = obj->Read(0, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, model.size());
  EXPECT_EQ(out, model);
}

// A write inside one ec cell of a full unit reads and writes only that range of the cell and
// of the parity (every other cell gets the new version): parity stays right, which a read with
// each data cell lost in turn (decoded from parity) proves.
TEST_F(ObjectImplTest, EcRangeWritesKeepParityRight) {
  auto obj = NewObject("ec-range", "ec:2+1");
  std::vector<std::byte> model = Bytes(2 * kStripe, 51);
  ASSERT_TRUE(obj->Write(0, model).ok());
  fake_.Drain();
  const int whole = fake_.calls(ShardOp::kWrite), ranges = fake_.calls(ShardOp::kWriteRange);
  std::mt19937_64 rng(52);
  const uint64_t cell = red_.cell_size(kStripe);
  int patched = 0;
  for (int i = 0; i < 30; ++i) {
    const uint64_t len = 1 + rng() % 200, off = rng() % (model.size() - len);
    if ((off % kStripe) / cell != ((off + len - 1) % kStripe) / cell || off / kStripe != (off + len - 1) / kStripe) {
      continue;  // spans cells: a whole-unit write
    }
    ++patched;
    auto d = Bytes(len, 200 + static_cast<uint32_t>(i));
    ASSERT_TRUE(obj->Write(off, d).ok());
    std::memcpy(model.data() + off, d.data(), len);
  }
  fake_.Drain();
  ASSERT_GT(patched, 10);
  EXPECT_EQ(fake_.calls(ShardOp::kWrite), whole);  // no unit was rewritten
  EXPECT_EQ(fake_.calls(ShardOp::kWriteRange) - ranges, 3 * patched);
  std::vector<std::byte> out(model.size());
  ASSERT_TRUE(obj->Read(0, out).ok());
  EXPECT_EQ(out, model);
  for (const char* dead : {"fake:1", "fake:2", "fake:3"}) {  // each cell decoded from the others
    fake_.Kill(dead, Unavailable("fake: dead"));
    std::fill(out.begin(), out.end(), std::byte{0});
    auto n = obj->Read(0, out);
    ASSERT_TRUE(n.ok()) << dead << ": " << n.status().ToString();
    EXPECT_EQ(out, model) << "with " << dead << " dead";
    fake_.Revive(dead);
  }
}

// A target that stops answering (a gray failure) delays a range write by about the straggler
// delay, not the transport timeout, whichever slot it holds: the first grants the stripe's write
// lease (a lease target that does not answer is suspected and the next slot asked); for the
// second, rep suspects the copy that does not tell its version and patches the others, and ec
// reads and rewrites the unit without the stalled cell.
TEST_P(ObjectImplRedundancyTest, RangeWritesGoOnWithoutAStalledTarget) {
  if (GetParam() == "none") GTEST_SKIP() << "no redundancy";
  for (uint32_t slot : {0u, 1u}) {
    SCOPED_TRACE("stalled slot " + std::to_string(slot));
    // A retry budget (2 s) longer than the straggler delay (200 ms), as clients have; a fresh
    // StripeIo, so no target is suspected yet.
    ShardClient shards(&fake_, &view_, std::chrono::milliseconds(2000));
    StripeIo io(&shards, &view_, std::chrono::milliseconds(200));
    auto obj = NewObject("stalled", AtK(GetParam()), &io);
    std::vector<std::byte> model = Bytes(2 * kStripe, 81);
    ASSERT_TRUE(obj->Write(0, model).ok());
    fake_.Drain();
    auto slots = io.Slots(WireShardKey{1, next_id_, 7, 1, 0, 0}, red_.width());
    ASSERT_TRUE(slots.ok());
    const std::string stalled = (*slots)[slot].address;
    fake_.Stall(stalled);
    auto d = Bytes(100, 82);
    const auto t0 = std::chrono::steady_clock::now();
    Status w = obj->Write(kStripe + 50, d);
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(w.ok()) << w.ToString();
    EXPECT_LT(took, std::chrono::seconds(5));  // the transport timeout would be far longer
    std::memcpy(model.data() + kStripe + 50, d.data(), d.size());
    std::vector<std::byte> out(model.size());
    auto n = obj->Read(0, out);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(out, model);
    EXPECT_GT(io.stats().degraded_writes.load(), 0u);
    fake_.Unstall(stalled);
    fake_.Drain();
  }
}

// The write quorum: a protected write is acknowledged only once quorum() shards are durable
// (by default K + 1), never on fewer; above it, a missing shard degrades the write as before.
TEST_F(ObjectImplTest, AWriteIsAcknowledgedOnlyOnItsQuorum) {
  struct Case {
    const char* scheme;
    int dead;  // slots whose targets are dead (the last ones)
    bool acknowledged;
  } cases[] = {
      {"rep:2", 1, false}, {"rep:3", 1, true}, {"rep:3", 2, false}, {"ec:2+1", 1, false},
      {"rep:2@1", 1, true}, {"ec:2+1@2", 1, true}, {"rep:3@3", 1, false},
  };
  uint64_t object = 600;
  for (const auto& c : cases) {
    const StripeGeometry g = Scheme(c.scheme);
    const WireShardKey key{1, ++object, 1, 0, 0, 0};
    auto slots = io_.Slots(key, g.red.width());
    ASSERT_TRUE(slots.ok());
    for (int d = 0; d < c.dead; ++d) {
      fake_.Kill((*slots)[g.red.width() - 1 - d].address, Unavailable("fake: dead"));
    }
    const uint64_t degraded = io_.stats().degraded_writes.load();
    auto data = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(Bytes(kStripe, 60)));
    Status w = io_.WriteSync(g, key, data, NewVersion());
    EXPECT_EQ(w.ok(), c.acknowledged) << c.scheme << " with " << c.dead << " dead: " << w.ToString();
    if (c.acknowledged) {
      EXPECT_EQ(io_.stats().degraded_writes.load(), degraded + 1) << c.scheme;
    } else {
      EXPECT_EQ(w.code(), StatusCode::kUnavailable) << c.scheme;
      EXPECT_NE(w.message().find("write quorum"), std::string::npos) << w.message();
    }
    for (const auto& t : *slots) fake_.Revive(t.address);
  }
}

// Object heads are written to a quorum too: as many faults covered once acknowledged as the
// data's quorum covers.
TEST(HeadRedundancyTest, HeadsCoverAsManyFaultsAsTheDataQuorum) {
  auto head = [](const char* text, uint32_t min_durable) {
    Redundancy r = *ParseRedundancy(text);
    r.min_durable = min_durable;
    return HeadRedundancy(r);
  };
  EXPECT_EQ(head("rep:3", 0).quorum(), 2u);
  EXPECT_EQ(head("rep:3", 3).quorum(), 3u);
  EXPECT_EQ(head("rep:2", 1).quorum(), 1u);
  EXPECT_EQ(head("ec:4+2", 0).quorum(), 2u);
  EXPECT_EQ(head("ec:4+2", 6).quorum(), 3u);
  EXPECT_EQ(head("ec:4+2", 4).quorum(), 1u);
  EXPECT_EQ(head("ec:4+2", 0).width(), 3u);
}

// A replica that missed a write (its shard write failed) is never patched by a later range
// write: it refuses (older version), the write is acknowledged degraded, and reads never
// return its stale bytes.
TEST_F(ObjectImplTest, StaleReplicaIsNeverPatched) {
  auto obj = NewObject("stale", "rep:2@1");
  std::vector<std::byte> model = Bytes(kStripe, 41);
  ASSERT_TRUE(obj->Write(0, model).ok());
  fake_.Drain();
  fake_.FailNext(ShardOp::kWriteRange, Internal("fake: disk error"));
  auto b = Bytes(100, 42);
  ASSERT_TRUE(obj->Write(10, b).ok());  // degraded: one copy
  std::memcpy(model.data() + 10, b.data(), b.size());
  // Which copy is stale: the one whose version did not move.
  const uint64_t v0 = fake_.Version(1, next_id_, 7, 0, 0), v1 = fake_.Version(1, next_id_, 7, 0, 1);
  ASSERT_NE(v0, v1);
  const uint32_t stale = v0 < v1 ? 0 : 1;
  const uint64_t stale_version = std::min(v0, v1);
  const uint64_t degraded = io_.stats().degraded_writes.load();
  auto c = Bytes(200, 43);
  ASSERT_TRUE(obj->Write(500, c).ok());  // the stale copy refuses: degraded again
  std::memcpy(model.data() + 500, c.data(), c.size());
  fake_.Drain();
  EXPECT_EQ(fake_.Version(1, next_id_, 7, 0, stale), stale_version);
  EXPECT_GT(io_.stats().degraded_writes.load(), degraded);
  std::vector<std::byte> out(model.size());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(obj->Read(0, out).ok());
    EXPECT_EQ(out, model);
  }
}

// A writer whose clock is behind the one that wrote the stripe still patches it to a higher
// version: a lower one would make the copy that missed the patch look newer, and reads (and
// repair) would take its stale bytes.
TEST_F(ObjectImplTest, ARangeWriteFromASlowClockGoesAboveTheStoredVersion) {
  for (const char* scheme : {"rep:2", "ec:2+1"}) {
    const StripeGeometry g = Scheme(AtK(scheme));
    const WireShardKey key{1, 555, static_cast<uint64_t>(scheme[0]), 0, 0, 0};
    std::vector<std::byte> model = Bytes(kStripe, 50);
    const uint64_t ahead = NewVersion() + 3'600'000'000ull;  // written by a clock an hour ahead
    ASSERT_TRUE(io_.WriteSync(g, key, std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(model)), ahead).ok());
    fake_.Drain();
    if (g.red.kind != Redundancy::Kind::kErasure) fake_.FailNext(ShardOp::kWriteRange, Internal("fake: disk error"));
    auto patch = Bytes(100, 51);
    std::memcpy(model.data() + 10, patch.data(), patch.size());
    Status s = Await<Status>([&](auto done) {
      io_.WriteRange(g, key, 10, std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(patch)), NewVersion(),
                     std::move(done));
    });
    ASSERT_TRUE(s.ok()) << scheme << ": " << s.ToString();
    fake_.Drain();
    auto got = io_.ReadSync(g, key, 0, model.size());
    ASSERT_TRUE(got.ok()) << scheme << ": " << got.status().ToString();
    EXPECT_GT(got->version, ahead) << scheme;
    ASSERT_GE(got->data.size(), model.size());
    EXPECT_EQ(std::memcmp(got->data.data(), model.data(), model.size()), 0) << scheme;
  }
}

// A replica that missed a write never answers on its own once another replica told of a newer
// version, even when the newer ones fail their reads: the read fails (retryably) rather than
// return the old bytes.
TEST_F(ObjectImplTest, AReplicaOlderThanOneAnotherToldOfIsNotAnAnswer) {
  const StripeGeometry g = Scheme("rep:3");
  const WireShardKey key{1, 556, 1, 0, 0, 0};
  auto v1 = Unit(60);
  auto v2 = Unit(61);
  WriteMissing(g, key, 2, v1, v2);  // slot 2 keeps v1
  // Slot 0's data read fails, then slot 1's (their stats answer: v2); slot 2 holds v1 only.
  fake_.FailNext(ShardOp::kRead, Unavailable("fake: read failed"), 2);
  fake_.FailNext(ShardOp::kReadRange, Unavailable("fake: read failed"), 2);
  auto got = io_.ReadSync(g, key, 0, kStripe);
  ASSERT_FALSE(got.ok()) << "returned the bytes of a replica that missed a write (v2: "
                         << (std::memcmp(got->data.data(), v2->data(), kStripe) == 0) << ")";
  EXPECT_TRUE(got.status().retryable()) << got.status().ToString();
  fake_.FailNext(ShardOp::kRead, OkStatus(), 0);
  fake_.FailNext(ShardOp::kReadRange, OkStatus(), 0);
  auto again = io_.ReadSync(g, key, 0, kStripe);  // the failures were passing
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(std::memcmp(again->data.data(), v2->data(), kStripe), 0);
}

// A replica read whose other copies' versions are late (a gray failure) does not answer from
// the one copy that came when the cluster map changed meanwhile: mgmt marks a copy that missed
// an acknowledged write before the write is acknowledged, and this reader's map may not have
// had the mark yet. The read is placed again with the new map, which skips that copy, and
// waits for the good one.
TEST_F(ObjectImplTest, AReplicaReadWithoutTheOtherVersionsWaitsForTheMapToBeConfirmed) {
  const StripeGeometry g = Scheme("rep:2@1");
  const WireShardKey key{1, 559, 1, 0, 0, 0};
  auto v1 = Unit(90);
  auto v2 = Unit(91);
  auto slots = io_.Slots(key, 2);
  ASSERT_TRUE(slots.ok());
  WriteMissing(g, key, 0, v1, v2);  // slot 0 (read first) keeps v1; this view has no mark of it
  auto r = ReadWhileTheMapMoves(g, key, (*slots)[1], {(*slots)[0]});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(std::memcmp(r->data.data(), v1->data(), kStripe), 0) << "answered with the bytes of a copy that missed a write";
  EXPECT_EQ(std::memcmp(r->data.data(), v2->data(), kStripe), 0);
  EXPECT_GE(io_.stats().map_confirmations.load(), 1u);
  EXPECT_GE(io_.stats().stale_map_retries.load(), 1u);
}

// The same for object heads: a head copy that missed a rewrite does not answer alone while the
// good copy is late and the map changed meanwhile.
TEST_F(ObjectImplTest, AHeadReadWithoutTheOtherVersionWaitsForTheMapToBeConfirmed) {
  red_ = ParseScheme("rep:2@1");
  const WireShardKey key{1, 561, 1, UINT64_MAX, 0, 0};
  auto slots = io_.Slots(key, HeadRedundancy(red_).width());
  ASSERT_TRUE(slots.ok());
  const TargetRef stale = (*slots)[0], good = (*slots)[1];
  const std::vector<std::byte> v1 = Bytes(300, 1), v2 = Bytes(300, 2);
  ASSERT_TRUE(io_.WriteHead(red_, key, v1, NewVersion()).ok());
  fake_.Kill(stale.address, Unavailable("fake: down"));
  ASSERT_TRUE(io_.WriteHead(red_, key, v2, NewVersion()).ok());  // the stale copy keeps v1
  fake_.Revive(stale.address);
  fake_.Drain();
  fake_.Stall(good.address);
  std::promise<Result<ShardData>> got;
  std::thread reader([&] { got.set_value(io_.ReadHead(red_, key)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  MarkMissedWrite({stale});
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  fake_.Unstall(good.address);
  auto r = got.get_future().get();
  reader.join();
  ExpectNewBytesOrRetryable(r, v2);
  EXPECT_GE(io_.stats().map_confirmations.load(), 1u);
}

// The same for ec: with M >= K, the cells that missed an acknowledged write can be K and
// answer first. A read that decides on their version while the other cells' versions are late
// does not answer when the map changed meanwhile; placed again, it skips them.
TEST_F(ObjectImplTest, AnEcReadWithoutEveryVersionWaitsForTheMapToBeConfirmed) {
  const StripeGeometry g = Scheme("ec:1+2@1");
  const WireShardKey key{1, 562, 1, 0, 0, 0};
  auto v1 = Unit(93);
  auto v2 = Unit(94);
  auto slots = io_.Slots(key, 3);
  ASSERT_TRUE(slots.ok());
  const TargetRef stale0 = (*slots)[0], stale1 = (*slots)[1], good = (*slots)[2];
  ASSERT_TRUE(io_.WriteSync(g, key, v1, NewVersion()).ok());
  fake_.Kill(stale0.address, Unavailable("fake: down"));
  fake_.Kill(stale1.address, Unavailable("fake: down"));
  ASSERT_TRUE(io_.WriteSync(g, key, v2, NewVersion()).ok());  // K = 1: slot 2 alone holds v2
  fake_.Revive(stale0.address);
  fake_.Revive(stale1.address);
  fake_.Drain();
  auto r = ReadWhileTheMapMoves(g, key, good, {stale0, stale1});
  ExpectNewBytesOrRetryable(r, v2->span());
  EXPECT_GE(io_.stats().map_confirmations.load(), 1u);
}

// A stripe never written reads as absent (sparse) while one of its targets is down: the others'
// answers leave fewer places than K for it to be.
TEST_F(ObjectImplTest, AnEcStripeNeverWrittenReadsAsAbsentWithATargetDown) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 563, 1, 0, 0, 0};
  auto slots = io_.Slots(key, 3);
  ASSERT_TRUE(slots.ok());
  fake_.Kill((*slots)[0].address, Unavailable("fake: down"));
  auto r = io_.ReadSync(g, key, 0, kStripe);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  fake_.Revive((*slots)[0].address);
  fake_.Drain();
}

// An unprotected stripe's delete never blocks its caller (its retries run on the timer thread,
// where a blocking call would hold up every straggler timer): with its target stalled, Delete
// returns before the reply comes; the delete completes when it does.
TEST_F(ObjectImplTest, AnUnprotectedDeleteNeverBlocksItsCaller) {
  const StripeGeometry g = Scheme("none");
  const WireShardKey key{1, 564, 1, 0, 0, 0};
  ASSERT_TRUE(io_.WriteSync(g, key, Unit(93), NewVersion()).ok());
  auto slots = io_.Slots(key, 1);
  ASSERT_TRUE(slots.ok());
  fake_.Stall((*slots)[0].address);
  std::atomic<bool> unstalled{false};
  std::thread resume([&] {  // so that a blocking Delete returns too (and the test fails, not hangs)
    std::this_thread::sleep_for(std::chrono::seconds(1));
    unstalled = true;
    fake_.Unstall((*slots)[0].address);
  });
  std::promise<Status> deleted;
  io_.Delete(g, key, [&](Status s) { deleted.set_value(std::move(s)); }, /*everywhere=*/true);
  EXPECT_FALSE(unstalled.load()) << "Delete waited for the target's reply";
  Status s = deleted.get_future().get();
  resume.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(fake_.Has(1, 564, 1, 0, 0));
}

// Its transient failures are waited out (within the client's retry budget), not returned.
TEST_F(ObjectImplTest, AnUnprotectedDeleteWaitsOutTransientFailures) {
  const StripeGeometry g = Scheme("none");
  const WireShardKey key{1, 565, 1, 0, 0, 0};
  ASSERT_TRUE(io_.WriteSync(g, key, Unit(94), NewVersion()).ok());
  ShardClient shards(&fake_, &view_, std::chrono::milliseconds(2000));
  StripeIo io(&shards, &view_, std::chrono::milliseconds(200));
  fake_.FailNext(ShardOp::kDelete, Unavailable("fake: busy"), 2);
  Status s = io.DeleteSync(g, key, /*everywhere=*/true);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(fake_.Has(1, 565, 1, 0, 0));
}

// A delete that must reach every copy (truncate) fails when a target does not confirm within
// the straggler delay, naming it, and suspects it: the retry fails at once instead of waiting
// for it again.
TEST_F(ObjectImplTest, ADeleteThatMustReachEveryCopySuspectsALateTarget) {
  const StripeGeometry g = Scheme("rep:2");
  const WireShardKey key{1, 566, 1, 0, 0, 0};
  ASSERT_TRUE(io_.WriteSync(g, key, Unit(95), NewVersion()).ok());
  auto slots = io_.Slots(key, 2);
  ASSERT_TRUE(slots.ok());
  const TargetRef late = (*slots)[1];
  fake_.Stall(late.address);
  Status s = io_.DeleteSync(g, key, /*everywhere=*/true);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("target(s) " + std::to_string(late.id) + " (shard 1)"), std::string::npos)
      << s.ToString();
  auto now = io_.Slots(key, 2);
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE((*now)[1].up) << "the late target is not suspected";
  Status again = io_.DeleteSync(g, key, /*everywhere=*/true);  // refused before anything is sent
  EXPECT_EQ(again.code(), StatusCode::kUnavailable) << again.ToString();
  EXPECT_NE(again.message().find("is down"), std::string::npos) << "the retry waited again: " << again.ToString();
  fake_.Unstall(late.address);
  fake_.Drain();
}

// With every copy's version in, nothing is confirmed: healthy reads never ask mgmt.
TEST_F(ObjectImplTest, AReplicaReadWithEveryVersionInAsksNoConfirmation) {
  const StripeGeometry g = Scheme("rep:3");
  const WireShardKey key{1, 560, 1, 0, 0, 0};
  auto v = Unit(92);
  ASSERT_TRUE(io_.WriteSync(g, key, v, NewVersion()).ok());
  for (int i = 0; i < 5; ++i) {
    auto r = io_.ReadSync(g, key, 0, kStripe);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(std::memcmp(r->data.data(), v->data(), kStripe), 0);
  }
  EXPECT_EQ(io_.stats().map_confirmations.load(), 0u);
}

// A read of an ec stripe past its data cells ends there (short), as replica and unprotected
// reads end at the shard's end: it never reads a parity cell as data.
TEST_F(ObjectImplTest, AnEcReadPastTheStripeEndsAtItsData) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 558, 1, 0, 0, 0};
  auto v = Unit(80);
  ASSERT_TRUE(io_.WriteSync(g, key, v, NewVersion()).ok());
  auto all = io_.ReadSync(g, key, 0, UINT64_MAX);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->data.size(), kStripe);
  EXPECT_EQ(std::memcmp(all->data.data(), v->data(), kStripe), 0);
  auto tail = io_.ReadSync(g, key, kStripe - 10, 4 * kStripe);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  ASSERT_EQ(tail->data.size(), 10u);
  EXPECT_EQ(std::memcmp(tail->data.data(), v->data() + kStripe - 10, 10), 0);
  auto past = io_.ReadSync(g, key, 2 * kStripe, 5);
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  EXPECT_TRUE(past->data.empty());
}

// With M >= K the cells that missed a write can be K themselves: a degraded read must not
// decode their old version while the replies to come could still give the newer one K.
TEST_F(ObjectImplTest, ADegradedEcReadWaitsForANewerVersionThatCouldStillWin) {
  const StripeGeometry g = Scheme("ec:1+1@1");
  const WireShardKey key{1, 557, 1, 0, 0, 0};
  auto v1 = Unit(70);
  auto v2 = Unit(71);
  WriteMissing(g, key, 0, v1, v2);  // cell 0 keeps v1
  for (int i = 0; i < 20; ++i) {  // the stale cell's reply comes first (it is asked first)
    auto got = io_.ReadSync(g, key, 0, kStripe);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(std::memcmp(got->data.data(), v2->data(), kStripe), 0) << "read " << i << " decoded the old version";
  }
}

// The targets a degraded write went without are left alone by this client's reads of that
// container as soon as mgmt has recorded them, not only once its map shows it.
TEST_F(ObjectImplTest, ReportedTargetsAreLeftAloneBeforeTheMapShowsThem) {
  const StripeGeometry g = Scheme("rep:3");
  const WireShardKey key{1, 558, 1, 0, 0, 0};
  auto slots = io_.Slots(key, 3);
  ASSERT_TRUE(slots.ok());
  std::atomic<int> reports{0};
  io_.set_report_degraded([&](uint64_t container, const std::vector<uint32_t>& ids) -> Result<uint64_t> {
    EXPECT_EQ(container, 1u);
    EXPECT_EQ(ids, std::vector<uint32_t>{(*slots)[2].id});
    ++reports;
    return view_.epoch() + 1;  // recorded in a map this client has not seen yet
  });
  auto v2 = Unit(81);
  WriteMissing(g, key, 2, Unit(80), v2);
  EXPECT_EQ(reports.load(), 1);
  auto reading = io_.ReadSlots(key, 3);
  ASSERT_TRUE(reading.ok());
  EXPECT_TRUE((*reading)[0].up && (*reading)[1].up);
  EXPECT_FALSE((*reading)[2].up);
  EXPECT_TRUE((*reading)[2].MissedWritesIn(1));  // not even a last resort
  auto other = io_.ReadSlots(WireShardKey{2, 558, 1, 0, 0, 0}, 3);  // another container
  ASSERT_TRUE(other.ok());
  for (const TargetRef& t : *other) EXPECT_TRUE(t.up) << t.id;
  // Both others fail their reads: the stale copy is not read instead.
  fake_.FailNext(ShardOp::kRead, Unavailable("fake: read failed"), 2);
  fake_.FailNext(ShardOp::kReadRange, Unavailable("fake: read failed"), 2);
  auto got = io_.ReadSync(g, key, 0, kStripe);
  EXPECT_TRUE(!got.ok() || std::memcmp(got->data.data(), v2->data(), kStripe) == 0);
  fake_.FailNext(ShardOp::kRead, OkStatus(), 0);
  fake_.FailNext(ShardOp::kReadRange, OkStatus(), 0);
  // Once the map has that epoch, it speaks for itself.
  view_.Set(view_.epoch() + 1, view_.targets());
  reading = io_.ReadSlots(key, 3);
  ASSERT_TRUE(reading.ok());
  EXPECT_TRUE((*reading)[2].up);
}

// Degraded writes report the targets they missed to mgmt coalesced per container: while one
// report is in flight, the misses that come meanwhile wait for the next, which carries them
// all; every write is acknowledged only after a report sent after its miss.
TEST_F(ObjectImplTest, ReportsOfMissedTargetsAreCoalesced) {
  auto obj = NewObject("storm", "rep:2@1");
  ASSERT_TRUE(obj->Write(0, Bytes(20 * kStripe, 30)).ok());
  fake_.Drain();
  const WireShardKey first{1, next_id_, 7, 0, 0, 0};
  auto slots = io_.Slots(first, 2);
  ASSERT_TRUE(slots.ok());
  // Kill one target; every stripe with a slot on it goes on without it.
  const TargetRef victim = (*slots)[1];
  fake_.Kill(victim.address, Unavailable("fake: down"));
  std::mutex mu;
  std::vector<std::vector<uint32_t>> reports;
  io_.set_report_degraded([&](uint64_t, const std::vector<uint32_t>& ids) -> Result<uint64_t> {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // mgmt takes its time
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(ids);
    return view_.epoch();
  });
  const uint64_t sent = io_.stats().missed_reports, degraded = io_.stats().degraded_writes;
  std::vector<std::vector<std::byte>> pieces;
  pieces.reserve(20);
  CompletionQueue cq;
  for (int i = 0; i < 20; ++i) {  // one piece of each stripe: 20 writes at once
    pieces.push_back(Bytes(100, 31 + i));
    obj->WriteAsync(i * kStripe + 10, {{pieces.back().data(), pieces.back().size()}}, cq, i);
  }
  auto c = cq.Wait(20, std::chrono::seconds(20));
  ASSERT_EQ(c.size(), 20u);
  for (const auto& done : c) ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  const uint64_t missed = io_.stats().degraded_writes - degraded;
  EXPECT_GE(missed, 5u) << "too few stripes had a slot on the killed target for this test";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(io_.stats().missed_reports - sent, reports.size());
  EXPECT_LT(reports.size(), missed / 2) << "each degraded write called mgmt on its own";
  for (const auto& ids : reports) EXPECT_EQ(ids, std::vector<uint32_t>{victim.id});
  fake_.Revive(victim.address);
}

// Truncate deletes the stripes past the new end on every copy or fails: a copy left on a down
// target would come back as the old bytes of a hole once the object grows again.
TEST_F(ObjectImplTest, TruncateReachesEveryCopyOrFails) {
  auto obj = NewObject("cut", "rep:2");
  ASSERT_TRUE(obj->Write(0, Bytes(3 * kStripe, 90)).ok());
  fake_.Drain();
  const WireShardKey third{1, next_id_, 7, 2, 0, 0};
  auto slots = io_.Slots(third, 2);
  ASSERT_TRUE(slots.ok());
  auto mark = [&](bool up) {  // the map says the target of the third stripe's second copy is down / up
    std::vector<TargetRef> targets = view_.targets();
    for (TargetRef& t : targets) {
      if (t.id == (*slots)[1].id) t.up = up;
    }
    view_.Set(view_.epoch() + 1, targets);
  };
  mark(false);
  Status cut = obj->Truncate(kStripe);
  EXPECT_EQ(cut.code(), StatusCode::kUnavailable) << cut.ToString();
  mark(true);
  ASSERT_TRUE(obj->Truncate(kStripe).ok());
  // Grown again past the third stripe: the hole reads as zeros.
  ASSERT_TRUE(obj->Write(4 * kStripe, Bytes(10, 91)).ok());
  std::vector<std::byte> hole(kStripe);
  ASSERT_TRUE(obj->Read(2 * kStripe, hole).ok());
  EXPECT_EQ(hole, std::vector<std::byte>(kStripe));
}

// A write that failed part way (never acknowledged) left its version on fewer than K cells: the
// fast path does not return those bytes (a later read of more cells would decode the old ones).
TEST_F(ObjectImplTest, AnEcVersionFewerThanKCellsHoldIsNotRead) {
  const StripeGeometry g = Scheme("ec:2+1");
  const WireShardKey key{1, 559, 1, 0, 0, 0};
  auto slots = io_.Slots(key, 3);
  ASSERT_TRUE(slots.ok());
  auto v1 = Unit(100);
  auto v2 = Unit(101);
  const uint64_t first = NewVersion();
  ASSERT_TRUE(io_.WriteSync(g, key, v1, first).ok());
  fake_.Drain();
  fake_.Kill((*slots)[1].address, Internal("fake: disk error"));
  fake_.Kill((*slots)[2].address, Internal("fake: disk error"));
  EXPECT_FALSE(io_.WriteSync(g, key, v2, NewVersion()).ok());  // only cell 0 took it
  fake_.Revive((*slots)[1].address);
  fake_.Revive((*slots)[2].address);
  fake_.Drain();
  auto got = io_.ReadSync(g, key, 0, g.cell);  // cell 0 alone
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->version, first);
  EXPECT_EQ(std::memcmp(got->data.data(), v1->data(), g.cell), 0);
}

// A shard failing its checksum: the read decodes around it and writes it back, so the next read
// needs no parity.
TEST_F(ObjectImplTest, CorruptCellIsDecodedAndRepairedByTheRead) {
  auto obj = NewObject("corrupt", "ec:2+1");
  auto data = Bytes(kStripe, 21);
  ASSERT_TRUE(obj->Write(0, data).ok());
  fake_.Drain();
  fake_.Corrupt(1, next_id_, 7, 0, 0);
  std::vector<std::byte> out(kStripe);
  ASSERT_TRUE(obj->Read(0, out).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(io_.stats().read_repairs.load(), 1u);
  fake_.Drain();
  const int before = fake_.calls(ShardOp::kReadRange);
  const uint64_t degraded = io_.stats().degraded_reads.load();
  ASSERT_TRUE(obj->Read(0, out).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(fake_.calls(ShardOp::kReadRange) - before, 2);  // the two data cells, no parity
  EXPECT_EQ(io_.stats().degraded_reads.load(), degraded);
}

// A replica failing its checksum is read from another and rewritten.
TEST_F(ObjectImplTest, CorruptReplicaIsRepairedByTheRead) {
  auto obj = NewObject("corrupt-rep", "rep:3");
  auto data = Bytes(kStripe, 22);
  ASSERT_TRUE(obj->Write(0, data).ok());
  fake_.Drain();
  fake_.Corrupt(1, next_id_, 7, 0, 0);
  std::vector<std::byte> out(kStripe);
  ASSERT_TRUE(obj->Read(0, out).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(io_.stats().read_repairs.load(), 1u);
}

// Two writers (two opens of one object, as two clients would have) hammer the same ec stripes
// with partial writes: on every shard the newest version wins, so no stripe is left torn (cells
// of different versions) and reads need no decoding.
TEST_F(ObjectImplTest, ConcurrentWritersNeverTearAStripe) {
  auto a = NewObject("shared", "ec:2+1");
  const uint64_t data_hi = next_id_;
  auto b = SecondHandle();
  ASSERT_TRUE(a->Write(0, Bytes(4 * kStripe, 1)).ok());
  auto hammer = [&](std::shared_ptr<Object> o, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 300; ++i) {
      const uint64_t off = rng() % (4 * kStripe - 600);
      Status st = o->Write(off, Bytes(1 + rng() % 500, seed + static_cast<uint32_t>(i)));
      // A writer that lost a race on some shard is told so (ABORTED, retryable); never torn.
      ASSERT_TRUE(st.ok() || st.code() == StatusCode::kAborted) << st.ToString();
    }
  };
  std::thread ta(hammer, a, 100), tb(hammer, b, 200);
  ta.join();
  tb.join();
  fake_.Drain();
  for (uint64_t s = 0; s < 4; ++s) {
    const uint64_t v = fake_.Version(1, data_hi, 7, s, 0);
    ASSERT_NE(v, 0u);
    EXPECT_EQ(fake_.Version(1, data_hi, 7, s, 1), v) << "stripe " << s;
    EXPECT_EQ(fake_.Version(1, data_hi, 7, s, 2), v) << "stripe " << s;
  }
  const uint64_t degraded = io_.stats().degraded_reads.load();
  std::vector<std::byte> out(4 * kStripe);
  ASSERT_TRUE(a->Read(0, out).ok());
  EXPECT_EQ(io_.stats().degraded_reads.load(), degraded);
}

}  // namespace
}  // namespace penstock

namespace penstock {
namespace {

// A handle to an object that another client has since replaced or deleted must not bring the
// old version back by truncating it (the head is rewritten over the stored one, under its lease).
TEST_F(ObjectImplTest, TruncateThroughAStaleHandleDoesNotRevertAPutOrUndoADelete) {
  for (const char* scheme : {"none", "rep:2"}) {
    auto a = NewObject("t", scheme);
    ASSERT_TRUE(a->Write(0, Bytes(3 * kStripe, 1)).ok());
    const WireShardKey head_key{1, next_id_, 1, UINT64_MAX, 0, 0};
    ObjectHead replaced;  // as another client's put writes it: new data, new size
    replaced.name = "t";
    replaced.stripe_unit = kStripe;
    replaced.size = 5;
    replaced.data_hi = 999;
    replaced.data_lo = 9;
    ASSERT_TRUE(io_.WriteHead(red_, head_key, EncodeObjectHead(replaced), NewVersion()).ok());
    EXPECT_EQ(a->Truncate(kStripe).code(), StatusCode::kAborted) << scheme;
    auto stored = io_.ReadHead(red_, head_key);
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(*DecodeObjectHead(stored->data.span()), replaced) << scheme;

    ASSERT_TRUE(io_.DeleteHead(red_, head_key, NewVersion()).ok());
    EXPECT_EQ(a->Truncate(kStripe).code(), StatusCode::kNotFound) << scheme;
    EXPECT_EQ(io_.ReadHead(red_, head_key).status().code(), StatusCode::kNotFound) << scheme;
  }
}

// A source whose read of one offset first waits (a stalled pipe).
class StallingSource : public ObjectSource {
 public:
  StallingSource(uint64_t stall_at, std::chrono::milliseconds stall) : stall_at_(stall_at), stall_(stall) {}
  Status ReadAt(uint64_t offset, std::span<std::byte> out) override {
    if (offset == stall_at_) std::this_thread::sleep_for(stall_);
    std::memset(out.data(), 0x5a, out.size());
    return OkStatus();
  }

 private:
  uint64_t stall_at_;
  std::chrono::milliseconds stall_;
};

// Stripes no head names are deleted by repair once they sat unchanged for the map's orphan
// grace: a put whose stripes land further apart than a third of it gives up (its first stripes
// may be gone), and its head is not written past that window either.
TEST_F(ObjectImplTest, APutThatStallsLongerThanTheCommitWindowGivesUp) {
  v1::ClusterMap map;
  map.set_epoch(2);
  map.set_orphan_grace_ms(900);  // commit window 300 ms
  for (uint32_t id = 1; id <= 3; ++id) {
    v1::Target* t = map.add_targets();
    t->set_id(id);
    t->set_uuid("uuid-" + std::to_string(id));
    t->set_address("fake:" + std::to_string(id));
    t->set_state(v1::TARGET_STATE_UP);
  }
  view_.Apply(map);
  ASSERT_EQ(io_.commit_window(), std::chrono::milliseconds(300));
  for (const char* scheme : {"none", "rep:2"}) {
    const StripeLayout layout{1, 77, 7, 3 * kStripe, kStripe, *ParseRedundancy(scheme)};
    StallingSource brief(kStripe, std::chrono::milliseconds(50));
    std::chrono::steady_clock::time_point landed;
    const auto before = std::chrono::steady_clock::now();
    EXPECT_TRUE(WriteStripes(io_, layout, brief, 1, NewVersion(), {}, "o", &landed).ok()) << scheme;
    EXPECT_GT(landed, before + std::chrono::milliseconds(50));
    // One stripe in flight at a time, and four (the stall comes before the first reply is
    // taken: its landing time is when it came, not when the loop saw it).
    for (unsigned window : {1u, 4u}) {
      StallingSource stalled(kStripe, std::chrono::milliseconds(450));
      Status s = WriteStripes(io_, layout, stalled, window, NewVersion(), {}, "o", &landed);
      EXPECT_EQ(s.code(), StatusCode::kAborted) << scheme << " window " << window << ": " << s.ToString();
      EXPECT_NE(s.message().find("orphans"), std::string::npos) << s.ToString();
    }
    // The head: no attempt once the window is over.
    ObjectHead h;
    h.name = "o";
    Status head = io_.WriteHead(layout.red, WireShardKey{1, 78, 1, UINT64_MAX, 0, 0}, EncodeObjectHead(h), NewVersion(),
                                std::chrono::steady_clock::now() - std::chrono::milliseconds(1));
    EXPECT_EQ(head.code(), StatusCode::kDeadlineExceeded) << scheme;
  }
}

}  // namespace
}  // namespace penstock
