// object_lease_test.cc — ObjectImpl over a fake transport: stripe write leases (asked of up
// targets, taken in turn, handed on, lapsed, bounded).
#include "client/object_impl_test_fixture.h"

namespace penstock::object_test {
namespace {

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

}  // namespace
}  // namespace penstock::object_test
