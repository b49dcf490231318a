// HA mgmt over a real etcd: election, failover with state reload, fencing, the HA MgmtClient
// and WatchClusterMap across a failover. All servers are in-process on 127.0.0.1.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/log.h"
#include "mgmt_client/cluster_map_watch.h"
#include "mgmt/etcd_test_process.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt/mgmt_server.h"

namespace penstock {
namespace {

using namespace std::chrono_literals;

class MgmtHaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("PENSTOCK_TEST_DEBUG")) (void)InitLogging("test", "debug");
    ASSERT_EQ(etcd_.Start(), "");
  }

  void StartServers(int n, bool resign = true) {
    for (int i = 0; i < n; ++i) {
      MgmtServerOptions o;
      o.meta = etcd_.endpoint();
      o.heartbeat_timeout_ms = 3000;
      o.lease_ttl_s = 2;
      o.metrics_listen = "";
      o.resign_on_shutdown = resign;
      auto s = MgmtServer::Start(o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      servers_.push_back(std::move(s).value());
    }
  }

  std::string Addresses() const {
    std::string a;
    for (const auto& s : servers_) a += (a.empty() ? "" : ",") + s->address();
    return a;
  }

  // Index of the single leader among the running servers, -1 when none or several.
  int Leader() const {
    int leader = -1, count = 0;
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i] && servers_[i]->is_leader()) {
        leader = static_cast<int>(i);
        ++count;
      }
    }
    return count == 1 ? leader : -1;
  }

  int WaitForLeader(std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      if (int l = Leader(); l >= 0) return l;
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  ::penstock::testing::EtcdProcess etcd_;
  std::vector<std::unique_ptr<MgmtServer>> servers_;
};

v1::RegisterTargetRequest Target(int i) {
  v1::RegisterTargetRequest r;
  r.set_uuid("uuid-" + std::to_string(i));
  r.set_address("127.0.0.1:" + std::to_string(9000 + i));
  r.set_capacity_bytes(1 << 30);
  return r;
}

TEST_F(MgmtHaTest, OneLeaderFollowersPointAtIt) {
  StartServers(3);
  const int leader = WaitForLeader(5s);
  ASSERT_GE(leader, 0);
  const int follower = (leader + 1) % 3;
  // Followers learn the leader's address within a poll or two.
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(servers_[follower]->leader_address(), servers_[leader]->address());

  auto direct = MgmtClient::Connect(servers_[follower]->address(), 2000ms);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  auto map = (*direct)->GetClusterMap();
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(map.status().message().find("not the leader; leader is " + servers_[leader]->address()),
            std::string::npos)
      << map.status().message();
  auto st = (*direct)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->is_leader());
  EXPECT_EQ(st->leader_address(), servers_[leader]->address());
  EXPECT_EQ(st->meta(), etcd_.endpoint());

  // The HA client finds the leader whichever address comes first.
  auto ha = MgmtClient::Connect(servers_[follower]->address() + "," + servers_[leader]->address(), 3000ms);
  ASSERT_TRUE(ha.ok()) << ha.status().ToString();
  auto lst = (*ha)->GetStatus();
  ASSERT_TRUE(lst.ok()) << lst.status().ToString();
  EXPECT_TRUE(lst->is_leader());
  EXPECT_EQ((*ha)->current_address(), servers_[leader]->address());
}

TEST_F(MgmtHaTest, CleanShutdownFailsOverWithState) {
  StartServers(3);
  int leader = WaitForLeader(5s);
  ASSERT_GE(leader, 0);
  auto client = MgmtClient::Connect(Addresses(), 5000ms);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  MgmtClient& c = **client;
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(c.RegisterTarget(Target(i)).ok());
  v1::CreateContainerRequest cr;
  cr.set_name("data");
  ASSERT_TRUE(c.CreateContainer(cr).ok());
  const uint64_t epoch = c.GetClusterMap()->epoch();
  ASSERT_EQ(epoch, 3u);

  const auto t0 = std::chrono::steady_clock::now();
  servers_[leader]->Shutdown();
  servers_[leader].reset();
  const int next = WaitForLeader(5s);
  ASSERT_GE(next, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);  // resigning hands over at once

  // Same state through the same client; nothing marked DOWN by the failover.
  auto map = c.GetClusterMap();
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_GE(map->epoch(), epoch);
  ASSERT_EQ(map->targets_size(), 3);
  for (const auto& t : map->targets()) EXPECT_EQ(t.state(), v1::TARGET_STATE_UP);
  v1::GetContainerRequest gr;
  gr.set_name("data");
  EXPECT_TRUE(c.GetContainer(gr).ok());
  v1::HeartbeatRequest hb;
  hb.set_target_id(1);
  hb.set_uuid("uuid-1");
  EXPECT_TRUE(c.Heartbeat(hb).ok());
  // Ids continue from the old leader's counter.
  auto reg = c.RegisterTarget(Target(4));
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->target_id(), 4u);
  EXPECT_EQ(reg->epoch(), map->epoch() + 1);
}

TEST_F(MgmtHaTest, CrashedLeaderIsReplacedAfterLeaseExpiryAndFenced) {
  StartServers(2, /*resign=*/false);
  int leader = WaitForLeader(5s);
  ASSERT_GE(leader, 0);
  auto client = MgmtClient::Connect(Addresses(), 8000ms);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  MgmtClient& c = **client;
  ASSERT_TRUE(c.RegisterTarget(Target(1)).ok());
  const uint64_t epoch = c.GetClusterMap()->epoch();

  std::atomic<uint64_t> watched{0};
  std::atomic<int> calls{0};
  std::unique_ptr<ClusterMapWatch> watch = c.WatchClusterMap([&](v1::ClusterMap m) {
    watched = m.epoch();
    ++calls;
  });
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (watched < epoch && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(watched.load(), epoch);

  const auto t0 = std::chrono::steady_clock::now();
  servers_[leader]->Shutdown();  // no resign: the key stays until the 2 s lease expires
  const int next = WaitForLeader(8s);
  ASSERT_GE(next, 0);
  ASSERT_NE(next, leader);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 6s);

  // The stale leader's writes are fenced off.
  auto late = servers_[leader]->state()->CreateContainer("late", std::nullopt, 0);
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();

  // The HA client and the watch carry on with the new leader.
  auto reg = c.RegisterTarget(Target(2));
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_GT(reg->epoch(), epoch);
  const auto until2 = std::chrono::steady_clock::now() + 5s;
  while (watched < reg->epoch() && std::chrono::steady_clock::now() < until2) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(watched.load(), reg->epoch());
  watch->Stop();
  const int after_stop = calls;
  ASSERT_TRUE(c.RegisterTarget(Target(3)).ok());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(calls.load(), after_stop);
  auto st = c.GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->targets_up(), 3u);
  EXPECT_EQ(st->address(), servers_[next]->address());
}

TEST_F(MgmtHaTest, LeaderWhoseLeaseIsRevokedStepsDownAndStopsServing) {
  StartServers(2);
  const int leader = WaitForLeader(5s);
  ASSERT_GE(leader, 0);
  auto client = MgmtClient::Connect(Addresses(), 8000ms);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->RegisterTarget(Target(1)).ok());

  // Take the lease away behind the leader's back (as if etcd had expired it).
  auto etcd = mgmt::EtcdClient::Create(etcd_.endpoint());
  ASSERT_TRUE(etcd.ok());
  auto kvs = (*etcd)->Get("/penstock/default/leader");
  ASSERT_TRUE(kvs.ok() && kvs->size() == 1);
  EXPECT_EQ(kvs->front().value, servers_[leader]->address());
  ASSERT_TRUE((*etcd)->LeaseRevoke(kvs->front().lease).ok());

  // The old leader notices within a keep-alive period and stops serving; one leader remains.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (servers_[leader]->is_leader() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(servers_[leader]->is_leader());
  const int next = WaitForLeader(5s);
  ASSERT_GE(next, 0);
  auto reg = (*client)->RegisterTarget(Target(2));
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->target_id(), 2u);
  auto map = (*client)->GetClusterMap();
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->targets_size(), 2);
}

}  // namespace
}  // namespace penstock
