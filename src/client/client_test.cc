// The client library against an in-process cluster: a real MgmtServer and two real
// TargetServers on loopback (UCX over whatever UCX_TLS says; CTest sets tcp).
#include "penstock/client.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <random>
#include <thread>

#include "client/data_path.h"
#include "client/stripe_pipeline.h"
#include "client/test_cluster.h"
#include "mgmt/cluster_state.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock {
namespace {

using testing::RandomBytes;

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new testing::InProcessCluster(2);
    ASSERT_TRUE(cluster_->ok());
    client_ = &cluster_->client();
    ContainerProps small;
    small.stripe_unit = 64 * 1024;
    ASSERT_TRUE(client_->CreateContainer("c", small).ok());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static testing::InProcessCluster* cluster_;
  static Client* client_;
};

testing::InProcessCluster* ClientTest::cluster_ = nullptr;
Client* ClientTest::client_ = nullptr;

TEST_F(ClientTest, PutGetSizesAcrossStripes) {
  for (size_t size : {0ul, 1ul, 65535ul, 65536ul, 65537ul, 1000000ul}) {
    auto data = RandomBytes(size, static_cast<uint32_t>(size));
    std::string name = "obj" + std::to_string(size);
    ASSERT_TRUE(client_->Put("c", name, data).ok()) << size;
    auto back = client_->Get("c", name);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, data) << size;
    auto st = client_->Stat("c", name);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->size, size);
    EXPECT_EQ(st->stripe_unit, 64u * 1024);
  }
}

TEST_F(ClientTest, OverwriteListDelete) {
  auto a = RandomBytes(300000, 1), b = RandomBytes(1000, 2);
  ASSERT_TRUE(client_->Put("c", "ow", a).ok());
  ASSERT_TRUE(client_->Put("c", "ow", b).ok());
  EXPECT_EQ(*client_->Get("c", "ow"), b);
  auto list = client_->List("c");
  ASSERT_TRUE(list.ok());
  bool found = false;
  for (const auto& o : *list) found |= o.name == "ow" && o.size == 1000;
  EXPECT_TRUE(found);
  ASSERT_TRUE(client_->Delete("c", "ow").ok());
  EXPECT_EQ(client_->Get("c", "ow").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Delete("c", "ow").code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, Errors) {
  auto data = RandomBytes(10, 3);
  Status s = client_->Put("nope", "x", data);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'nope'"), std::string::npos);
  EXPECT_EQ(client_->Put("c", "", data).code(), StatusCode::kInvalidArgument);
  auto g = client_->Get("c", "missing");
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_NE(g.status().message().find("'missing'"), std::string::npos);
  EXPECT_EQ(client_->PutFile("c", "x", "/nonexistent/file").code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->CreateContainer("c").status().code(), StatusCode::kAlreadyExists);
}

TEST_F(ClientTest, DeleteContainerNeedsForceWhenNotEmpty) {
  ASSERT_TRUE(client_->CreateContainer("d").ok());
  ASSERT_TRUE(client_->Put("d", "x", RandomBytes(100, 4)).ok());
  EXPECT_EQ(client_->DeleteContainer("d").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(client_->DeleteContainer("d", /*force=*/true).ok());
  EXPECT_EQ(client_->GetContainer("d").status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, ConcurrentPutsAndGetsFromManyThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 5; ++i) {
        auto data = RandomBytes(64 * 1024 * 3 + static_cast<size_t>(t * 1000 + i), static_cast<uint32_t>(t * 100 + i));
        std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!client_->Put("c", name, data).ok()) ++failures;
        auto back = client_->Get("c", name);
        if (!back.ok() || *back != data) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// The client learns map changes from mgmt's stream, without asking.
// A put whose head write failed deletes its new stripes only when the head cannot name them.
TEST(PutCommitTest, NewStripesGoOnlyWhenTheHeadCannotNameThem) {
  ObjectHead other, ours;
  other.data_hi = 1, other.data_lo = 2;
  ours.data_hi = 3, ours.data_lo = 4;
  const Result<ObjectHead> absent = NotFound("no head");
  // Refused outright, and the head names other data or none: they go.
  EXPECT_TRUE(NewStripesUnreferenced(ResourceExhausted("no space"), other, 3, 4));
  EXPECT_TRUE(NewStripesUnreferenced(PermissionDenied("revoked"), absent, 3, 4));
  // Refused, but the head read back names them (a copy landed): they stay.
  EXPECT_FALSE(NewStripesUnreferenced(ResourceExhausted("no space"), ours, 3, 4));
  // Refused, but the head could not be read: they stay.
  EXPECT_FALSE(NewStripesUnreferenced(InvalidArgument("bad"), Result<ObjectHead>(Unavailable("down")), 3, 4));
  // A timeout, a lost reply, a degraded write mgmt could not record: the head may land later.
  EXPECT_FALSE(NewStripesUnreferenced(Unavailable("timed out"), other, 3, 4));
  EXPECT_FALSE(NewStripesUnreferenced(DeadlineExceeded("late"), absent, 3, 4));
  EXPECT_FALSE(NewStripesUnreferenced(Internal("?"), absent, 3, 4));
}

TEST(ClientMapWatchTest, EpochFollowsMembershipWithoutAnyCall) {
  testing::InProcessCluster cluster(1);
  ASSERT_TRUE(cluster.ok());
  const uint64_t before = cluster.client().map_epoch();
  auto mgmt = MgmtClient::Connect(cluster.mgmt_address());
  ASSERT_TRUE(mgmt.ok());
  v1::RegisterTargetRequest req;  // a new member (never contacted by the client)
  req.set_uuid("00000000-0000-4000-8000-00000000beef");
  req.set_address("127.0.0.1:1");
  req.set_metrics_address("127.0.0.1:2");
  req.set_capacity_bytes(1 << 30);
  ASSERT_TRUE((*mgmt)->RegisterTarget(req).ok());
  for (int i = 0; i < 500 && cluster.client().map_epoch() == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(cluster.client().map_epoch(), before);
}

// Container "r", rep:2 in 64 KiB stripe units.
constexpr uint64_t kRepStripeUnit = 64 * 1024;
Result<ContainerInfo> Rep2Container(testing::InProcessCluster& cluster) {
  ContainerProps rep;
  rep.redundancy = *ParseRedundancy("rep:2");
  rep.stripe_unit = kRepStripeUnit;
  return cluster.client().CreateContainer("r", rep);
}

// A data path of its own to `cluster`.
DataPathOptions PathOptions(testing::InProcessCluster& cluster) {
  DataPathOptions o;
  o.mgmt_address = cluster.mgmt_address();
  o.timeout = std::chrono::milliseconds(5000);
  return o;
}

// Waits until the client's map has mgmt's epoch.
void WaitForClientMap(testing::InProcessCluster& cluster) {
  const uint64_t want = cluster.mgmt().state()->GetClusterMap().epoch();
  for (int i = 0; i < 500 && cluster.client().map_epoch() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(cluster.client().map_epoch(), want);
}

// A target joins and takes slots (and permutes some stripes' slots) before repair has moved
// anything (no repair runs here): every object of every redundancy still reads back, a range
// write keeps the rest of its stripe, a delete reaches the copies where the old placement put
// them, and new puts land. Once mgmt records the move as done (as repair would), reads no
// longer look at the old placement, and some objects no longer read: the fallback was needed.
TEST(ClientJoinTest, ObjectsStayReadableUntilRepairHasMovedThem) {
  testing::InProcessCluster cluster(3);
  ASSERT_TRUE(cluster.ok());
  Client& client = cluster.client();
  std::map<std::pair<std::string, std::string>, std::vector<std::byte>> model;
  uint32_t seed = 1;
  for (const std::string red : {"none", "rep:2", "ec:2+1"}) {
    ContainerProps p;
    p.redundancy = *ParseRedundancy(red);
    p.stripe_unit = 64 * 1024;
    ASSERT_TRUE(client.CreateContainer(red == "none" ? "n" : red == "rep:2" ? "r" : "e", p).ok());
  }
  for (const std::string c : {"n", "r", "e"}) {
    for (int i = 0; i < 12; ++i) {
      auto bytes = RandomBytes(200 * 1024 + 7, seed++);
      const std::string name = "o" + std::to_string(i);
      ASSERT_TRUE(client.Put(c, name, bytes).ok());
      model[{c, name}] = std::move(bytes);
    }
  }
  mgmt::ClusterState* state = cluster.mgmt().state();
  ASSERT_TRUE(state->MarkPlacementSettled(state->placement_epoch()).ok());  // as repair would
  ASSERT_TRUE(cluster.AddTarget());
  WaitForClientMap(cluster);
  ASSERT_LT(state->GetClusterMap().settled_placement_epoch(), state->placement_epoch());

  auto check_all = [&](int* failed) {
    for (const auto& [id, bytes] : model) {
      auto got = client.Get(id.first, id.second);
      if (failed != nullptr) {
        *failed += !got.ok() || *got != bytes;
        continue;
      }
      ASSERT_TRUE(got.ok()) << id.first << "/" << id.second << ": " << got.status().ToString();
      EXPECT_TRUE(*got == bytes) << id.first << "/" << id.second;
    }
  };
  check_all(nullptr);
  // A range inside one stripe of each object: the rest of the stripe stays.
  for (auto& [id, bytes] : model) {
    auto o = client.Open(id.first, id.second, {});
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    auto patch = RandomBytes(1000, seed++);
    const uint64_t at = 70 * 1024 + 3;
    ASSERT_TRUE((*o)->Write(at, patch).ok());
    std::copy(patch.begin(), patch.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at));
  }
  check_all(nullptr);
  // Deletes reach the old placement too (no copy there brings the object back), and new puts land.
  for (const std::string c : {"n", "r", "e"}) {
    for (int i = 0; i < 4; ++i) {
      const std::string name = "o" + std::to_string(i);
      Status d = client.Delete(c, name);
      ASSERT_TRUE(d.ok()) << c << "/" << name << ": " << d.ToString();
      model.erase({c, name});
      EXPECT_EQ(client.Get(c, name).status().code(), StatusCode::kNotFound) << c << "/" << name;
    }
    auto bytes = RandomBytes(150 * 1024, seed++);
    ASSERT_TRUE(client.Put(c, "new", bytes).ok());
    model[{c, "new"}] = std::move(bytes);
  }
  check_all(nullptr);

  // Settled (nothing moved here): old placements are no longer asked.
  ASSERT_TRUE(state->MarkPlacementSettled(state->placement_epoch()).ok());
  WaitForClientMap(cluster);
  int failed = 0;
  check_all(&failed);
  EXPECT_GT(failed, 0) << "no object had moved: the test shows nothing";
}

// While a join is unsettled, an object whose head has not moved to its new slot yet and whose
// old holder is down is unavailable, not missing: it does not read as absent, and opening it
// with create does not replace it with an empty object.
TEST(ClientJoinTest, AnUnmovedObjectWhoseOldHolderIsDownIsUnavailableNotMissing) {
  testing::InProcessCluster cluster(3);
  ASSERT_TRUE(cluster.ok());
  Client& client = cluster.client();
  ASSERT_TRUE(client.CreateContainer("n", ContainerProps{.redundancy = Redundancy{}}).ok());  // none: one head copy
  constexpr int kObjects = 100;  // some of them have their head moved from target 0
  const auto bytes = RandomBytes(1000, 5);
  for (int i = 0; i < kObjects; ++i) ASSERT_TRUE(client.Put("n", "o" + std::to_string(i), bytes).ok());
  mgmt::ClusterState* state = cluster.mgmt().state();
  ASSERT_TRUE(state->MarkPlacementSettled(state->placement_epoch()).ok());
  ASSERT_TRUE(cluster.AddTarget());
  cluster.StopTarget(0);
  for (int i = 0; i < 1000 && state->Summary().targets_down == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(state->Summary().targets_down, 0);
  WaitForClientMap(cluster);
  int unavailable = 0;
  for (int i = 0; i < kObjects; ++i) {
    const std::string name = "o" + std::to_string(i);
    auto st = client.Stat("n", name);
    EXPECT_NE(st.status().code(), StatusCode::kNotFound) << name << ": " << st.status().ToString();
    if (st.status().code() != StatusCode::kUnavailable) continue;
    ++unavailable;
    EXPECT_FALSE(client.Open("n", name, {.create = true}).ok()) << name;
  }
  EXPECT_GT(unavailable, 0);
  ASSERT_TRUE(cluster.StartTarget(0));
}

// A client whose map predates a placement change (a target joined) has its requests refused
// by targets that know; it refreshes the map and writes to the new slots, and a protected
// write does not take the refusal for a missed shard.
TEST(ClientStaleMapTest, RefusedRequestsRefreshTheMapAndLandOnTheNewSlots) {
  testing::InProcessCluster cluster(3);
  ASSERT_TRUE(cluster.ok());
  auto info = Rep2Container(cluster);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  DataPath fresh;
  DataPathOptions o = PathOptions(cluster);
  ASSERT_TRUE(fresh.Open(o).ok());
  auto old_map = fresh.mgmt->GetClusterMap();
  ASSERT_TRUE(old_map.ok());

  ASSERT_TRUE(cluster.AddTarget());  // placement changes
  ASSERT_TRUE(fresh.view->Refresh().ok());
  auto map = fresh.mgmt->GetClusterMap();
  ASSERT_TRUE(map.ok());
  ASSERT_GT(map->placement_epoch(), old_map->epoch());
  for (size_t i = 0; i < cluster.target_count(); ++i) {
    for (int w = 0; w < 300 && cluster.target(i).placement_epoch() < map->placement_epoch(); ++w) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(cluster.target(i).placement_epoch(), map->placement_epoch()) << "target " << i;
  }

  DataPath stale;
  o.fetch_map = false;
  ASSERT_TRUE(stale.Open(o).ok());
  stale.view->Apply(*old_map);
  std::vector<uint32_t> reported;
  stale.io->set_report_degraded([&](uint64_t, const std::vector<uint32_t>& ids) -> Result<uint64_t> {
    reported.insert(reported.end(), ids.begin(), ids.end());
    return uint64_t{0};
  });
  const StripeGeometry g = StripeGeometry::For(Redundancy{Redundancy::Kind::kReplicate, 1, 1}, kRepStripeUnit);
  auto data = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(RandomBytes(4096, 9)));
  constexpr uint64_t kStripes = 32;
  for (uint64_t s = 0; s < kStripes; ++s) {
    Status w = stale.io->WriteSync(g, WireShardKey{info->id, 7, 7, s, 0, 0}, data, NewVersion());
    ASSERT_TRUE(w.ok()) << w.ToString();
  }
  EXPECT_GT(stale.io->stats().stale_map_retries.load(), 0u);
  EXPECT_GE(stale.view->epoch(), map->placement_epoch());
  EXPECT_TRUE(reported.empty());  // a refusal is not a missed write

  // Every replica sits on its slot under the new map.
  std::map<uint32_t, std::set<std::pair<uint64_t, uint32_t>>> held;  // target -> (stripe, shard)
  for (const TargetRef& t : fresh.view->targets()) {
    auto list = fresh.shards->List(t, info->id, 0);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    for (const ListEntry& e : *list) held[t.id].insert({e.key.stripe, e.key.shard});
  }
  for (uint64_t s = 0; s < kStripes; ++s) {
    auto slots = fresh.io->Slots(WireShardKey{info->id, 7, 7, s, 0, 0}, 2);
    ASSERT_TRUE(slots.ok());
    for (uint32_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(held[(*slots)[i].id].count({s, i})) << "stripe " << s << " shard " << i;
    }
  }
}

// A protected write that goes without a target reports it to mgmt before it is acknowledged;
// that call blocks, so it runs on a thread of its own, not on the transport or timer thread
// that completed the write (where it would hold up every other completion and timer).
TEST(ClientDegradedWriteTest, TheReportToMgmtRunsOffTheTransportAndTimerThreads) {
  testing::InProcessCluster cluster(2);
  ASSERT_TRUE(cluster.ok());
  auto info = Rep2Container(cluster);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  DataPath path;
  ASSERT_TRUE(path.Open(PathOptions(cluster)).ok());
  std::mutex mu;
  std::vector<std::string> threads;
  path.io->set_report_degraded([&](uint64_t, const std::vector<uint32_t>& ids) -> Result<uint64_t> {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    std::lock_guard lock(mu);
    threads.emplace_back(name);
    EXPECT_EQ(ids.size(), 1u);
    return uint64_t{0};
  });
  cluster.StopTarget(1);  // the client's map still has it up: its shards fail or straggle
  // Acknowledged on one durable copy (min_durable 1), so the write goes on degraded.
  const StripeGeometry g = StripeGeometry::For(Redundancy{Redundancy::Kind::kReplicate, 1, 1, 1}, kRepStripeUnit);
  auto data = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(RandomBytes(4096, 3)));
  for (uint64_t s = 0; s < 4; ++s) {
    Status w = path.io->WriteSync(g, WireShardKey{info->id, 9, 9, s, 0, 0}, data, NewVersion());
    ASSERT_TRUE(w.ok()) << w.ToString();
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(threads.size(), 4u);
  for (const std::string& t : threads) EXPECT_EQ(t, "ps-report");
}

// A write that missed a target makes it recovering for that container only: readers of the
// container leave it alone, readers of another container still read from it (a tenant's
// degraded writes, or a forged report, cannot stop other tenants' reads).
TEST(ClientDegradedWriteTest, AMissedWriteStopsReadsOfItsContainerOnly) {
  testing::InProcessCluster cluster(2);
  ASSERT_TRUE(cluster.ok());
  auto r = Rep2Container(cluster);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ContainerProps rep;
  rep.redundancy = *ParseRedundancy("rep:2");
  rep.stripe_unit = kRepStripeUnit;
  auto other = cluster.client().CreateContainer("other", rep);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  DataPath path;
  ASSERT_TRUE(path.Open(PathOptions(cluster)).ok());
  const StripeGeometry g = StripeGeometry::For(Redundancy{Redundancy::Kind::kReplicate, 1, 1}, kRepStripeUnit);
  auto data = std::make_shared<const AlignedBuffer>(AlignedBuffer::CopyOf(RandomBytes(4096, 5)));
  const WireShardKey in_r{r->id, 3, 3, 0, 0, 0};
  const WireShardKey in_other{other->id, 3, 3, 0, 0, 0};
  ASSERT_TRUE(path.io->WriteSync(g, in_r, data, NewVersion()).ok());
  ASSERT_TRUE(path.io->WriteSync(g, in_other, data, NewVersion()).ok());

  const uint32_t missed = cluster.target(0).target_id();
  v1::ReportDegradedWriteRequest report;
  report.set_container_id(r->id);
  report.add_target_ids(missed);
  ASSERT_TRUE(path.mgmt->ReportDegradedWrite(report).ok());
  ASSERT_TRUE(path.view->Refresh().ok());
  for (const auto& [key, readable] : {std::pair{in_r, false}, std::pair{in_other, true}}) {
    auto slots = path.io->ReadSlots(key, 2);
    ASSERT_TRUE(slots.ok());
    for (const TargetRef& t : *slots) {
      EXPECT_EQ(t.up, t.id != missed || readable) << "target " << t.id << " container " << key.container;
    }
  }
  // With the other target gone, only the container the write missed in cannot be read.
  cluster.StopTarget(1);
  auto got = path.io->ReadSync(g, in_other, 0, 4096);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->data.size(), data->size());
  EXPECT_EQ(std::memcmp(got->data.data(), data->data(), data->size()), 0);
  EXPECT_FALSE(path.io->ReadSync(g, in_r, 0, 4096).ok());
}

}  // namespace
}  // namespace penstock
