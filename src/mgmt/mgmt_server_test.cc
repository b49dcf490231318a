// End-to-end tests of MgmtServer and MgmtClient over real gRPC on 127.0.0.1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "mgmt_client/cluster_map_watch.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt/mgmt_server.h"
#include "common/temp_dir.h"

namespace penstock {
namespace {


using namespace std::chrono_literals;

// A loopback port that nothing listens on (bound then released).
uint16_t UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::unique_ptr<MgmtServer> StartServer(const std::string& data_dir, int timeout_ms = 5000) {
  MgmtServerOptions o;
  o.data_dir = data_dir;
  o.heartbeat_timeout_ms = timeout_ms;
  Result<std::unique_ptr<MgmtServer>> s = MgmtServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::unique_ptr<MgmtClient> ConnectTo(const MgmtServer& server) {
  Result<std::unique_ptr<MgmtClient>> c = MgmtClient::Connect(server.address(), 2000ms);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

v1::CreateContainerRequest NewContainer(const std::string& name, const std::string& redundancy = "",
                                       uint64_t stripe_unit = 0) {
  v1::CreateContainerRequest r;
  r.set_name(name);
  r.set_redundancy(redundancy);
  r.set_stripe_unit(stripe_unit);
  return r;
}

v1::GetContainerRequest GetReq(const std::string& name) {
  v1::GetContainerRequest r;
  r.set_name(name);
  return r;
}

v1::DeleteContainerRequest DelReq(const std::string& name) {
  v1::DeleteContainerRequest r;
  r.set_name(name);
  return r;
}

v1::RegisterTargetRequest Reg(const std::string& uuid, const std::string& addr) {
  v1::RegisterTargetRequest r;
  r.set_uuid(uuid);
  r.set_address(addr);
  r.set_metrics_address("127.0.0.1:9200");
  r.set_capacity_bytes(1 << 30);
  r.set_fault_domain("node-1");
  return r;
}

TEST(MgmtServer, RegisterHeartbeatMapAndContainers) {
  ::penstock::testing::TempDir dir;
  auto server = StartServer(dir.path());
  ASSERT_TRUE(server);
  EXPECT_EQ(server->address().rfind("127.0.0.1:", 0), 0u) << server->address();
  EXPECT_NE(server->address(), "127.0.0.1:0");
  auto client = ConnectTo(*server);
  ASSERT_TRUE(client);

  Result<v1::RegisterTargetResponse> r = client->RegisterTarget(Reg("u-1", "127.0.0.1:5001"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->target_id(), 1u);
  EXPECT_EQ(r->epoch(), 1u);
  EXPECT_EQ(client->RegisterTarget(Reg("u-2", "127.0.0.1:5002"))->target_id(), 2u);
  EXPECT_EQ(client->RegisterTarget(Reg("u-1", "127.0.0.1:5003"))->target_id(), 1u);

  v1::HeartbeatRequest hb;
  hb.set_target_id(1);
  hb.set_uuid("u-1");
  hb.set_used_bytes(12345);
  Result<v1::HeartbeatResponse> beat = client->Heartbeat(hb);
  ASSERT_TRUE(beat.ok()) << beat.status().ToString();
  EXPECT_EQ(beat->epoch(), 3u);
  hb.set_uuid("someone-else");
  Result<v1::HeartbeatResponse> unknown = client->Heartbeat(hb);
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("register again"), std::string::npos);

  Result<v1::ClusterMap> map = client->GetClusterMap();
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->epoch(), 3u);
  ASSERT_EQ(map->targets_size(), 2);
  EXPECT_EQ(map->targets(0).address(), "127.0.0.1:5003");
  EXPECT_EQ(map->targets(0).used_bytes(), 12345u);
  EXPECT_EQ(map->targets(0).state(), v1::TARGET_STATE_UP);

  Result<v1::Container> c = client->CreateContainer(NewContainer("ckpt"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->redundancy(), "rep:2");  // no scheme given: the strongest two targets hold
  EXPECT_EQ(c->stripe_unit(), 1u << 20);
  EXPECT_EQ(client->GetContainer(GetReq("ckpt"))->id(), c->id());
  Result<v1::Container> dup = client->CreateContainer(NewContainer("ckpt"));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.status().message(), "container 'ckpt' already exists");
  EXPECT_EQ(client->CreateContainer(NewContainer("r", "rep:3")).status().message(),
            "redundancy rep:3 puts each stripe on 3 targets, but the cluster has 2; add targets or choose a narrower scheme");
  ASSERT_TRUE(client->CreateContainer(NewContainer("other", "", 4096)).ok());
  Result<v1::ListContainersResponse> list = client->ListContainers();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->containers_size(), 2);
  EXPECT_EQ(list->containers(0).name(), "ckpt");
  EXPECT_EQ(list->containers(1).name(), "other");
  ASSERT_TRUE(client->DeleteContainer(DelReq("other")).ok());
  Status gone = client->DeleteContainer(DelReq("other")).status();
  EXPECT_EQ(gone.code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.message(),
            "container 'other' does not exist; create it with `penstock container create other`");

  Result<v1::MgmtStatus> st = client->GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->address(), server->address());
  EXPECT_EQ(st->epoch(), 4u);  // the map above, then a container deleted
  EXPECT_EQ(st->targets_up(), 2u);
  EXPECT_EQ(st->targets_down(), 0u);
  EXPECT_EQ(st->containers(), 1u);
  EXPECT_EQ(st->heartbeat_timeout_ms(), 5000);

  // /metrics
  ASSERT_NE(server->metrics_port(), 0);
  httplib::Client http("127.0.0.1", server->metrics_port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("penstock_mgmt_targets_up 2"), std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("penstock_mgmt_map_epoch 4"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("penstock_mgmt_containers 1"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("penstock_mgmt_rpc_total{code=\"already_exists\",method=\"CreateContainer\"} 1"),
            std::string::npos)
      << res->body;
}

TEST(MgmtServer, SilentTargetIsMarkedDownAndReturns) {
  ::penstock::testing::TempDir dir;
  auto server = StartServer(dir.path(), /*timeout_ms=*/200);
  ASSERT_TRUE(server);
  auto client = ConnectTo(*server);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->RegisterTarget(Reg("u-1", "127.0.0.1:5001")).ok());

  v1::TargetState state = v1::TARGET_STATE_UP;
  uint64_t epoch = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       state == v1::TARGET_STATE_UP && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(50ms);
    Result<v1::ClusterMap> m = client->GetClusterMap();
    ASSERT_TRUE(m.ok());
    state = m->targets(0).state();
    epoch = m->epoch();
  }
  EXPECT_EQ(state, v1::TARGET_STATE_DOWN);
  EXPECT_EQ(epoch, 2u);

  v1::HeartbeatRequest hb;
  hb.set_target_id(1);
  hb.set_uuid("u-1");
  EXPECT_EQ(client->Heartbeat(hb)->epoch(), 3u);
  EXPECT_EQ(client->GetClusterMap()->targets(0).state(), v1::TARGET_STATE_UP);
}

TEST(MgmtServer, StateSurvivesRestart) {
  ::penstock::testing::TempDir dir;
  {
    auto server = StartServer(dir.path());
    ASSERT_TRUE(server);
    auto client = ConnectTo(*server);
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->RegisterTarget(Reg("u-1", "127.0.0.1:5001")).ok());
    ASSERT_TRUE(client->CreateContainer(NewContainer("keep")).ok());
    server->Shutdown();
  }
  auto server = StartServer(dir.path());
  ASSERT_TRUE(server);
  auto client = ConnectTo(*server);
  ASSERT_TRUE(client);
  Result<v1::ClusterMap> map = client->GetClusterMap();
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->epoch(), 1u);
  ASSERT_EQ(map->targets_size(), 1);
  EXPECT_EQ(map->targets(0).uuid(), "u-1");
  EXPECT_TRUE(client->GetContainer(GetReq("keep")).ok());
  EXPECT_EQ(client->RegisterTarget(Reg("u-1", "127.0.0.1:5001"))->target_id(), 1u);
}

TEST(MgmtServer, WaitReturnsAfterShutdown) {
  ::penstock::testing::TempDir dir;
  auto server = StartServer(dir.path());
  ASSERT_TRUE(server);
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    server->Shutdown();
  });
  server->Wait();
  stopper.join();
  server->Shutdown();  // idempotent
}

TEST(MgmtServer, PortInUseIsAClearError) {
  ::penstock::testing::TempDir dir1, dir2;
  auto first = StartServer(dir1.path());
  ASSERT_TRUE(first);
  MgmtServerOptions o;
  o.data_dir = dir2.path();
  o.listen = first->address();
  Result<std::unique_ptr<MgmtServer>> second = MgmtServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(),
            "mgmt port " + first->address() + " is in use; choose another with --listen");
}

TEST(MgmtServer, DataDirInUseIsAClearError) {
  ::penstock::testing::TempDir dir;
  auto first = StartServer(dir.path());
  ASSERT_TRUE(first);
  MgmtServerOptions o;
  o.data_dir = dir.path();
  Result<std::unique_ptr<MgmtServer>> second = MgmtServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("in use by another penstock mgmt"), std::string::npos)
      << second.status().message();
}

TEST(MgmtServer, BadOptions) {
  MgmtServerOptions o;
  EXPECT_EQ(MgmtServer::Start(o).status().code(), StatusCode::kInvalidArgument);  // no data dir
  ::penstock::testing::TempDir dir;
  o.data_dir = dir.path();
  o.listen = "no-port";
  EXPECT_EQ(MgmtServer::Start(o).status().code(), StatusCode::kInvalidArgument);
  o.listen = "127.0.0.1:0";
  o.heartbeat_timeout_ms = 0;
  EXPECT_EQ(MgmtServer::Start(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(MgmtClient, DeadAddressIsUnavailablePromptly) {
  const std::string addr = "127.0.0.1:" + std::to_string(UnusedPort());
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<MgmtClient>> c = MgmtClient::Connect(addr, 1000ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("mgmt at " + addr + " is unreachable"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("is `penstock mgmt` running? check --mgmt"),
            std::string::npos);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(MgmtClient::Connect("nonsense").status().code(), StatusCode::kInvalidArgument);
}

TEST(MgmtClient, SilentPeerTimesOut) {
  // A socket that accepts TCP connections (kernel backlog) but never speaks HTTP/2.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string addr = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<MgmtClient>> c = MgmtClient::Connect(addr, 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("mgmt at " + addr + " is unreachable"), std::string::npos)
      << c.status().message();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
}

TEST(MgmtClient, CallsAfterMgmtStopsNameTheAddress) {
  ::penstock::testing::TempDir dir;
  auto server = StartServer(dir.path());
  ASSERT_TRUE(server);
  const std::string addr = server->address();
  Result<std::unique_ptr<MgmtClient>> c = MgmtClient::Connect(addr, 1000ms);
  ASSERT_TRUE(c.ok());
  server.reset();
  const auto start = std::chrono::steady_clock::now();
  Result<v1::ClusterMap> m = (*c)->GetClusterMap();
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().code() == StatusCode::kUnavailable ||
              m.status().code() == StatusCode::kDeadlineExceeded)
      << m.status().ToString();
  EXPECT_NE(m.status().message().find(addr), std::string::npos) << m.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(MgmtServer, WatchClusterMapDeliversEveryNewEpochUntilStopped) {
  ::penstock::testing::TempDir dir;
  auto server = StartServer(dir.path());
  ASSERT_TRUE(server);
  auto client = ConnectTo(*server);
  ASSERT_TRUE(client);
  auto st = client->GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->is_leader());
  EXPECT_EQ(st->leader_address(), server->address());
  EXPECT_EQ(st->meta(), "rocksdb");

  std::mutex mu;
  std::vector<uint64_t> epochs;
  auto seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return epochs;
  };
  auto wait_for = [&](size_t n) {
    for (int i = 0; i < 300 && seen().size() < n; ++i) std::this_thread::sleep_for(10ms);
    return seen();
  };
  std::unique_ptr<ClusterMapWatch> watch = client->WatchClusterMap([&](v1::ClusterMap m) {
    std::lock_guard<std::mutex> lock(mu);
    epochs.push_back(m.epoch());
  });
  EXPECT_EQ(wait_for(1), (std::vector<uint64_t>{0}));  // the current map at once
  ASSERT_TRUE(client->RegisterTarget(Reg("u-1", "127.0.0.1:5001")).ok());
  EXPECT_EQ(wait_for(2), (std::vector<uint64_t>{0, 1}));
  ASSERT_TRUE(client->RegisterTarget(Reg("u-2", "127.0.0.1:5002")).ok());
  EXPECT_EQ(wait_for(3), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(watch->epoch(), 2u);
  watch->Stop();
  ASSERT_TRUE(client->RegisterTarget(Reg("u-3", "127.0.0.1:5003")).ok());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(seen().size(), 3u);

  // A watch from a known epoch only hears about newer ones; shutting mgmt down ends no call
  // with a crash and Stop still returns.
  std::atomic<int> calls{0};
  auto later = client->WatchClusterMap([&](v1::ClusterMap) { ++calls; }, 3);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(calls.load(), 0);
  server->Shutdown();
  later->Stop();
}

}  // namespace
}  // namespace penstock
