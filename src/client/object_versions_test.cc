// object_versions_test.cc — ObjectImpl over a fake transport: versions, quorums, map confirmation,
// stale and corrupt copies, deletes and truncates.
#include "client/object_impl_test_fixture.h"

namespace penstock::object_test {
namespace {

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

}  // namespace
}  // namespace penstock::object_test
