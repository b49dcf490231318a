// object_impl_test.cc — ObjectImpl over a fake transport: reads and writes match a model,
// batching, retries, placement into the caller's buffers.
#include "client/object_impl_test_fixture.h"

namespace penstock::object_test {
namespace {

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

}  // namespace
}  // namespace penstock::object_test
