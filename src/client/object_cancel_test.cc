// object_cancel_test.cc — ObjectImpl over a fake transport: cancellation, deadlines and late
// transfers never touch a buffer that was given back.
#include "client/object_impl_test_fixture.h"

namespace penstock::object_test {
namespace {

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
}  // namespace penstock::object_test
