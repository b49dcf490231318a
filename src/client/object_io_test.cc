// Ranged, asynchronous and batched object I/O against an in-process cluster, checked against
// in-memory models of each object.
#include "penstock/object_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "client/disjoint_writes.h"
#include "client/test_cluster.h"

namespace penstock {
namespace {

using testing::RandomBytes;
constexpr uint64_t kStripe = 64 * 1024;

class ObjectIoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new testing::InProcessCluster(3);
    ASSERT_TRUE(cluster_->ok());
    ContainerProps p;
    p.stripe_unit = kStripe;
    ASSERT_TRUE(cluster_->client().CreateContainer("io", p).ok());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::shared_ptr<Object> Open(const std::string& name) {
    auto o = cluster_->client().Open("io", name, {.create = true});
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    return *o;
  }
  static testing::InProcessCluster* cluster_;
};

testing::InProcessCluster* ObjectIoTest::cluster_ = nullptr;

// The example at the top of penstock/object_io.h, as written there.
Status HeaderExample(Client* client, std::vector<std::byte>& out_bytes) {
  auto obj = client->Open("ckpt", "rank-7.bin", {.create = true}).value();
  std::vector<std::byte> a(1 << 20, std::byte{1}), b(1 << 20, std::byte{2});
  penstock::CompletionQueue cq;
  obj->WriteAsync(0, {{a.data(), a.size()}}, cq, /*user_data=*/1);  // both in flight at once
  obj->WriteAsync(a.size(), {{b.data(), b.size()}}, cq, /*user_data=*/2);
  for (const penstock::IoCompletion& c : cq.Wait(2, std::chrono::seconds(10))) {
    if (!c.status.ok()) return c.status;  // c.user_data says which
  }
  std::vector<std::byte> out(4096);
  obj->ReadAsync(a.size() - 2048, {{out.data(), out.size()}}, cq, /*user_data=*/3);
  std::vector<penstock::IoCompletion> done = cq.Wait(1, std::chrono::seconds(10));
  // done[0].bytes == 4096: 2 KiB of 1s, then 2 KiB of 2s
  if (done.size() != 1 || !done[0].status.ok() || done[0].bytes != 4096) return Internal("read");
  out_bytes = out;
  return OkStatus();
}

TEST_F(ObjectIoTest, TheHeaderExampleRunsAsWritten) {
  ContainerProps p;
  ASSERT_TRUE(cluster_->client().CreateContainer("ckpt", p).ok());
  std::vector<std::byte> out;
  ASSERT_TRUE(HeaderExample(&cluster_->client(), out).ok());
  std::vector<std::byte> want(2048, std::byte{1});
  want.resize(4096, std::byte{2});
  EXPECT_EQ(out, want);
}

// Writes and reads at random (unaligned) ranges, several objects, one thread per object.
TEST_F(ObjectIoTest, RandomRangesMatchModel) {
  const int kThreads = 4, kOps = 400;
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &mismatches, &errors] {
      auto obj = Open("model-" + std::to_string(t));
      std::vector<std::byte> model;
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < kOps; ++i) {
        uint64_t off = rng() % (600 * 1024);
        uint64_t len = 1 + rng() % (rng() % 4 == 0 ? 200 * 1024 : 5000);
        if (rng() % 2 == 0) {
          auto data = RandomBytes(len, static_cast<uint32_t>(rng()));
          if (!obj->Write(off, data).ok()) ++errors;
          if (model.size() < off + len) model.resize(off + len, std::byte{0});
          std::memcpy(model.data() + off, data.data(), len);
        } else {
          std::vector<std::byte> out(len, std::byte{0x55});
          auto n = obj->Read(off, out);
          if (!n.ok()) {
            ++errors;
            continue;
          }
          uint64_t expect = off >= model.size() ? 0 : std::min<uint64_t>(len, model.size() - off);
          if (*n != expect || std::memcmp(out.data(), model.data() + off, expect) != 0) ++mismatches;
        }
      }
      if (obj->size() != model.size()) ++mismatches;
      // A fresh handle sees the same bytes.
      auto again = cluster_->client().Open("io", "model-" + std::to_string(t));
      std::vector<std::byte> all(model.size());
      if (!again.ok() || (*again)->size() != model.size() || !(*again)->Read(0, all).ok() || all != model) {
        ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// The same against real engines with redundancy: partial writes are range writes (rep: each
// copy patched over the version all hold; ec: a range inside one cell patches that cell and
// the parity by the delta), checked against a model, with truncates, and read back through a
// fresh handle.
TEST_F(ObjectIoTest, RandomRangesMatchModelWithRedundancy) {
  for (const char* red : {"rep:2", "ec:2+1"}) {
    SCOPED_TRACE(red);
    const std::string container = std::string("io-") + (red[0] == 'r' ? "rep" : "ec");
    ContainerProps p;
    p.stripe_unit = kStripe;
    p.redundancy = *ParseRedundancy(red);
    ASSERT_TRUE(cluster_->client().CreateContainer(container, p).ok());
    auto opened = cluster_->client().Open(container, "model", {.create = true});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    auto obj = *opened;
    std::vector<std::byte> model;
    std::mt19937_64 rng(77);
    for (int i = 0; i < 300; ++i) {
      const uint64_t off = rng() % (400 * 1024);
      const uint64_t len = 1 + rng() % (rng() % 4 == 0 ? 100 * 1024 : 6000);
      if (rng() % 3 != 0) {
        auto data = RandomBytes(len, static_cast<uint32_t>(rng()));
        Status w = obj->Write(off, data);
        ASSERT_TRUE(w.ok()) << w.ToString();
        if (model.size() < off + len) model.resize(off + len, std::byte{0});
        std::memcpy(model.data() + off, data.data(), len);
      } else {
        std::vector<std::byte> out(len, std::byte{0x55});
        auto n = obj->Read(off, out);
        ASSERT_TRUE(n.ok()) << n.status().ToString();
        const uint64_t expect = off >= model.size() ? 0 : std::min<uint64_t>(len, model.size() - off);
        ASSERT_EQ(*n, expect) << "op " << i;
        ASSERT_EQ(0, std::memcmp(out.data(), model.data() + off, expect)) << "op " << i;
      }
      if (i % 100 == 99) {
        const uint64_t to = rng() % (model.size() + 1);
        ASSERT_TRUE(obj->Truncate(to).ok());
        model.resize(to);
      }
    }
    auto again = cluster_->client().Open(container, "model");
    ASSERT_TRUE(again.ok());
    ASSERT_EQ((*again)->size(), model.size());
    std::vector<std::byte> all(model.size());
    ASSERT_TRUE((*again)->Read(0, all).ok());
    EXPECT_TRUE(all == model);
  }
}

TEST_F(ObjectIoTest, SparseTruncateAppend) {
  auto obj = Open("sparse");
  auto data = RandomBytes(1000, 7);
  ASSERT_TRUE(obj->Write(5 * kStripe + 10, data).ok());
  EXPECT_EQ(obj->size(), 5 * kStripe + 1010);
  std::vector<std::byte> out(5 * kStripe + 1010, std::byte{1});
  ASSERT_EQ(*obj->Read(0, out), out.size());
  for (uint64_t i = 0; i < 5 * kStripe + 10; ++i) ASSERT_EQ(out[i], std::byte{0}) << i;
  EXPECT_EQ(0, std::memcmp(out.data() + 5 * kStripe + 10, data.data(), 1000));

  ASSERT_TRUE(obj->Truncate(5 * kStripe + 20).ok());
  EXPECT_EQ(obj->size(), 5 * kStripe + 20);
  ASSERT_TRUE(obj->Truncate(6 * kStripe).ok());  // grow again: the cut bytes read as zeros
  std::vector<std::byte> tail(kStripe);
  ASSERT_EQ(*obj->Read(5 * kStripe, tail), kStripe);
  EXPECT_EQ(0, std::memcmp(tail.data() + 10, data.data(), 10));
  for (uint64_t i = 20; i < kStripe; ++i) ASSERT_EQ(tail[i], std::byte{0}) << i;

  // Appends from several threads never overlap.
  ASSERT_TRUE(obj->Truncate(0).ok());
  std::vector<std::thread> threads;
  std::vector<uint64_t> offsets(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::byte> rec(3000, std::byte{static_cast<unsigned char>(t + 1)});
      offsets[t] = *obj->Append(rec);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(obj->size(), 8u * 3000);
  std::vector<std::byte> all(8 * 3000);
  ASSERT_TRUE(obj->Read(0, all).ok());
  for (int t = 0; t < 8; ++t) {
    for (int i = 0; i < 3000; ++i) ASSERT_EQ(all[offsets[t] + i], std::byte(t + 1));
  }
}

TEST_F(ObjectIoTest, ScatterGather) {
  auto obj = Open("sg");
  auto a = RandomBytes(70000, 1), b = RandomBytes(10, 2), c = RandomBytes(100000, 3);
  CompletionQueue cq;
  obj->WriteAsync(3, {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}}, cq, 9);
  auto done = cq.Wait(1, std::chrono::seconds(30));
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].status.ok()) << done[0].status.ToString();
  EXPECT_EQ(done[0].user_data, 9u);
  EXPECT_EQ(done[0].bytes, 170010u);
  std::vector<std::byte> x(3), y(90000), z(80010);
  obj->ReadAsync(0, {{x.data(), x.size()}, {y.data(), y.size()}, {z.data(), z.size()}}, cq, 10);
  done = cq.Wait(1, std::chrono::seconds(30));
  ASSERT_TRUE(done[0].status.ok());
  std::vector<std::byte> joined;
  for (auto* v : {&x, &y, &z}) joined.insert(joined.end(), v->begin(), v->end());
  std::vector<std::byte> expect(3, std::byte{0});
  for (auto* v : {&a, &b, &c}) expect.insert(expect.end(), v->begin(), v->end());
  EXPECT_EQ(joined, expect);
}

// 256 reads of 4 KiB in flight from one thread, then a batch of 1,000.
TEST_F(ObjectIoTest, ManyInFlightAndBatch) {
  auto obj = Open("inflight");
  auto data = RandomBytes(4 << 20, 11);
  ASSERT_TRUE(obj->Write(0, data).ok());
  CompletionQueue cq;
  std::vector<std::vector<std::byte>> bufs(256, std::vector<std::byte>(4096));
  std::mt19937 rng(5);
  std::vector<uint64_t> offs(256);
  for (int i = 0; i < 256; ++i) {
    offs[i] = rng() % ((4 << 20) - 4096);
    obj->ReadAsync(offs[i], {{bufs[i].data(), 4096}}, cq, static_cast<uint64_t>(i));
  }
  EXPECT_GT(cq.in_flight() + cq.Poll(0).size(), 0u);
  size_t got = 0;
  while (got < 256) {
    for (auto& c : cq.Wait(1, std::chrono::seconds(30))) {
      ASSERT_TRUE(c.status.ok()) << c.status.ToString();
      ASSERT_EQ(0, std::memcmp(bufs[c.user_data].data(), data.data() + offs[c.user_data], 4096));
      ++got;
    }
  }
  std::vector<IoRequest> batch(1000);
  std::vector<std::vector<std::byte>> small(1000, std::vector<std::byte>(512));
  for (int i = 0; i < 1000; ++i) {
    batch[i].kind = IoKind::kRead;
    batch[i].offset = static_cast<uint64_t>(i) * 4000;
    batch[i].iov = {{small[i].data(), 512}};
    batch[i].user_data = static_cast<uint64_t>(i);
  }
  auto ids = obj->Submit(batch, cq);
  EXPECT_EQ(ids.size(), 1000u);
  got = 0;
  while (got < 1000) {
    auto cs = cq.Wait(1, std::chrono::seconds(30));
    ASSERT_FALSE(cs.empty());
    for (auto& c : cs) {
      ASSERT_TRUE(c.status.ok());
      ASSERT_EQ(0, std::memcmp(small[c.user_data].data(), data.data() + c.user_data * 4000, 512));
      ++got;
    }
  }
}

// Reads over UCX land straight in the caller's (here registered) buffers: the client copies
// nothing; a batch of nearby small reads shares requests and is copied out of their replies.
TEST_F(ObjectIoTest, ReadsArriveInTheCallersBuffersWithoutACopy) {
  auto obj = Open("zero-copy");
  auto data = RandomBytes(8 * kStripe + 123, 21);
  ASSERT_TRUE(obj->Write(0, data).ok());
  std::vector<std::byte> out(data.size());
  auto reg = cluster_->client().RegisterMemory(out.data(), out.size());
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  const ReadPathStats before = cluster_->client().read_path_stats();
  CompletionQueue cq;
  const size_t half = 3 * kStripe + 7;  // two buffers, split inside a stripe
  obj->ReadAsync(0, {{out.data(), half}, {out.data() + half, out.size() - half}}, cq, 1);
  auto c = cq.Wait(1, std::chrono::seconds(30));
  ASSERT_EQ(c.size(), 1u);
  ASSERT_TRUE(c[0].status.ok()) << c[0].status.ToString();
  EXPECT_EQ(out, data);
  ReadPathStats after = cluster_->client().read_path_stats();
  EXPECT_EQ(after.bytes - before.bytes, data.size());
  EXPECT_EQ(after.placed - before.placed, data.size());
  EXPECT_EQ(after.copied, before.copied);
  reg->reset();  // unregistered; the memory is still usable
  std::vector<IoRequest> batch;
  std::vector<std::vector<std::byte>> small(16, std::vector<std::byte>(100));
  for (size_t i = 0; i < small.size(); ++i) {
    batch.push_back({IoKind::kRead, i * 200, {{small[i].data(), 100}}, i, std::nullopt});
  }
  obj->Submit(batch, cq);
  ASSERT_EQ(cq.Wait(small.size(), std::chrono::seconds(30)).size(), small.size());
  for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(0, std::memcmp(small[i].data(), data.data() + i * 200, 100));
  EXPECT_EQ(cluster_->client().read_path_stats().copied - after.copied, small.size() * 100);
}

// Two clients write disjoint small ranges that share stripes of one object, each from two
// threads: the stripe write leases (taken from the targets) make their read-modify-writes take
// turns and the head's size only grows, so every range ends with its writer's last bytes.
// Two clients, two threads each, writing disjoint ranges that share stripes: unprotected, and
// protected, where each client's writes of a stripe queue behind each other, hand its write
// lease on (renewals on real targets), and take turns at it with the other client's.
TEST_F(ObjectIoTest, TwoClientsWritingOneObjectLoseNoUpdate) {
  ClientOptions co;
  co.mgmt_address = cluster_->mgmt_address();
  co.timeout = std::chrono::milliseconds(5000);
  auto other = Client::Connect(co);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  for (const char* red : {"none", "rep:2", "ec:2+1"}) {
    SCOPED_TRACE(red);
    std::string container = "io";
    if (std::string(red) != "none") {
      container = std::string("two-") + (red[0] == 'r' ? "rep" : "ec");
      ContainerProps p;
      p.stripe_unit = kStripe;
      p.redundancy = *ParseRedundancy(red);
      ASSERT_TRUE(cluster_->client().CreateContainer(container, p).ok());
    }
    auto a = cluster_->client().Open(container, "two-clients", {.create = true});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = (*other)->Open(container, "two-clients");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    const uint64_t kPiece = 1000;
    auto w = testing::WriteDisjointPieces(**a, **b, kPiece, 2 * kStripe / kPiece, 4, 40);
    EXPECT_EQ(w.failures, 0);
    auto fresh = cluster_->client().Open(container, "two-clients");
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    EXPECT_EQ((*fresh)->size(), w.furthest);
    std::vector<std::byte> out(w.furthest);
    ASSERT_TRUE((*fresh)->Read(0, out).ok());
    EXPECT_EQ(testing::LostPieces(w, out, kPiece), 0u) << "ranges whose last write was lost";
  }
}

TEST_F(ObjectIoTest, CancellationAndDeadlines) {
  auto obj = Open("cancel");
  auto data = RandomBytes(2 << 20, 12);
  ASSERT_TRUE(obj->Write(0, data).ok());
  CompletionQueue cq;
  const int n = 400;
  std::vector<std::vector<std::byte>> bufs(n, std::vector<std::byte>(8192));
  std::vector<OpId> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(obj->ReadAsync(static_cast<uint64_t>(i) * 4096, {{bufs[i].data(), 8192}}, cq,
                                 static_cast<uint64_t>(i)));
  }
  std::vector<bool> cancelled(n, false);
  for (int i = 0; i < n; i += 2) cancelled[i] = obj->Cancel(ids[i]);
  // Some were cancelled in flight (else the kCancelled path below went untested).
  EXPECT_GT(std::count(cancelled.begin(), cancelled.end(), true), 0);
  std::vector<int> seen(n, 0);
  int total = 0;
  while (total < n) {
    auto cs = cq.Wait(1, std::chrono::seconds(30));
    ASSERT_FALSE(cs.empty());
    for (auto& c : cs) {
      ++seen[c.user_data];
      ++total;
      if (cancelled[c.user_data]) {
        EXPECT_EQ(c.status.code(), StatusCode::kCancelled);
      } else {
        ASSERT_TRUE(c.status.ok()) << c.status.ToString();
        EXPECT_EQ(0, std::memcmp(bufs[c.user_data].data(), data.data() + c.user_data * 4096, 8192));
      }
    }
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << i;  // exactly one completion each
  EXPECT_TRUE(cq.Wait(1, std::chrono::milliseconds(200)).empty());
  EXPECT_FALSE(obj->Cancel(ids[1]));  // already completed

  std::vector<std::byte> out(4096);
  obj->ReadAsync(0, {{out.data(), out.size()}}, cq, 1, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  auto c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kDeadlineExceeded) << c[0].status.ToString();
  // A write past its deadline is not sent at all: the object keeps its bytes.
  std::vector<std::byte> junk(4096, std::byte{0x5a});
  obj->WriteAsync(0, {{junk.data(), junk.size()}}, cq, 2, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  c = cq.Wait(1, std::chrono::seconds(10));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status.code(), StatusCode::kDeadlineExceeded) << c[0].status.ToString();
  ASSERT_TRUE(obj->Read(0, out).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), data.data(), out.size()));
}

TEST_F(ObjectIoTest, CallbackQueueAndErrors) {
  std::atomic<int> calls{0};
  CompletionQueue cq([&](IoCompletion c) {
    EXPECT_TRUE(c.status.ok());
    ++calls;
  });
  auto obj = Open("cb");
  std::vector<std::byte> d(100, std::byte{3});
  obj->WriteAsync(0, {{d.data(), d.size()}}, cq, 1);
  for (int i = 0; i < 500 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(cluster_->client().Open("io", "absent").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cluster_->client().Open("nope", "x", {.create = true}).status().code(), StatusCode::kNotFound);
  std::vector<std::byte> out(10);
  EXPECT_EQ(*obj->Read(1000, out), 0u);  // past the end: short (empty) read
}

// A callback may issue the next operations itself (on the transport thread that delivered the
// completion, as `penstock bench` does): chains of writes, then of reads, each link issued
// from the completion of the one before, with 8 chains in flight.
TEST_F(ObjectIoTest, CallbacksIssueTheNextOperation) {
  auto obj = Open("chain");
  constexpr int kChains = 8, kLinks = 64, kBlock = 4096;
  auto data = RandomBytes(size_t{kChains} * kLinks * kBlock, 31);
  std::vector<std::byte> back(data.size());
  std::mutex mu;
  std::condition_variable done_cv;
  int links_done = 0, errors = 0;
  bool reading = false;
  std::function<void(int, int)> issue;  // chain, link
  CompletionQueue cq([&](IoCompletion c) {
    const int chain = static_cast<int>(c.user_data / kLinks), link = static_cast<int>(c.user_data % kLinks);
    {
      std::lock_guard lock(mu);
      if (!c.status.ok() || c.bytes != kBlock) ++errors;
      ++links_done;
      done_cv.notify_all();
    }
    if (link + 1 < kLinks) issue(chain, link + 1);
  });
  issue = [&](int chain, int link) {
    const size_t at = (size_t{static_cast<size_t>(link)} * kChains + static_cast<size_t>(chain)) * kBlock;
    const uint64_t tag = static_cast<uint64_t>(chain) * kLinks + static_cast<uint64_t>(link);
    if (reading) {
      obj->ReadAsync(at, {{back.data() + at, kBlock}}, cq, tag);
    } else {
      obj->WriteAsync(at, {{data.data() + at, kBlock}}, cq, tag);
    }
  };
  auto run = [&] {
    {
      std::lock_guard lock(mu);
      links_done = 0;
    }
    for (int chain = 0; chain < kChains; ++chain) issue(chain, 0);
    std::unique_lock lock(mu);
    ASSERT_TRUE(done_cv.wait_for(lock, std::chrono::seconds(60), [&] { return links_done == kChains * kLinks; }));
  };
  run();
  reading = true;  // no operation in flight now
  run();
  EXPECT_EQ(errors, 0);
  for (int i = 0; i < 500 && cq.in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(back, data);
}

// Asynchronous reads and writes in flight while the only target restarts (a new address) ride
// it out: they retry until it is back and complete correctly.
TEST(ObjectIoRestartTest, AsyncOpsRideOutATargetRestart) {
  testing::InProcessCluster cluster(1);
  ASSERT_TRUE(cluster.ok());
  ContainerProps p;
  p.stripe_unit = 64 * 1024;
  ASSERT_TRUE(cluster.client().CreateContainer("r", p).ok());
  auto obj = cluster.client().Open("r", "o", {.create = true});
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  auto data = RandomBytes(1 << 20, 21);
  ASSERT_TRUE((*obj)->Write(0, data).ok());

  cluster.StopTarget(0);
  CompletionQueue cq;
  constexpr int kReads = 32;
  std::vector<std::vector<std::byte>> bufs(kReads, std::vector<std::byte>(8192));
  for (int i = 0; i < kReads; ++i) {
    (*obj)->ReadAsync(static_cast<uint64_t>(i) * 30000, {{bufs[i].data(), 8192}}, cq, static_cast<uint64_t>(i));
  }
  auto patch = RandomBytes(5000, 22);
  (*obj)->WriteAsync(700000, {{patch.data(), patch.size()}}, cq, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(cluster.StartTarget(0));
  int got = 0;
  while (got < kReads + 1) {
    auto cs = cq.Wait(1, std::chrono::seconds(30));
    ASSERT_FALSE(cs.empty()) << "operations did not complete";
    for (auto& c : cs) {
      ASSERT_TRUE(c.status.ok()) << c.user_data << ": " << c.status.ToString();
      if (c.user_data < kReads) {
        EXPECT_EQ(0, std::memcmp(bufs[c.user_data].data(), data.data() + c.user_data * 30000, 8192)) << c.user_data;
      }
      ++got;
    }
  }
  std::memcpy(data.data() + 700000, patch.data(), patch.size());
  std::vector<std::byte> all(data.size());
  ASSERT_TRUE((*obj)->Read(0, all).ok());
  EXPECT_TRUE(all == data);
}

}  // namespace
}  // namespace penstock
