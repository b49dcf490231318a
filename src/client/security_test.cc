// Tenants and capability tokens end to end in one process: a real MgmtServer with --auth, one
// real TargetServer (so every shard lives on it) and clients with different API keys; raw
// shard requests carry forged, expired, wrong-container, read-only and revoked tokens to the
// live target, which must refuse each with no data returned.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "client/object_ids.h"
#include "common/temp_dir.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt/mgmt_server.h"
#include "penstock/client.h"
#include "protocol/capability.h"
#include "protocol/shard_protocol.h"
#include "target/target_server.h"
#include "transport/rpc_client.h"

namespace penstock {
namespace {

constexpr const char* kAdminKey = "psk_admin_for_tests";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::byte> Bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MgmtServerOptions mo;
    mo.data_dir = dir_.path() + "/mgmt";
    mo.metrics_listen = "";
    mo.auth = true;
    mo.admin_key = kAdminKey;
    auto m = MgmtServer::Start(mo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mgmt_ = std::move(*m);
    TargetOptions to;
    to.data_dir = dir_.path() + "/target";
    to.mgmt = mgmt_->address();
    to.capacity_bytes = 65 << 20;
    to.segment_bytes = 4 << 20;
    to.heartbeat_ms = 100;
    to.admin_key = kAdminKey;
    auto t = TargetServer::Start(to);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(*t);

    auto admin = MgmtClient::Connect(mgmt_->address());
    ASSERT_TRUE(admin.ok());
    admin_ = std::move(*admin);
    admin_->set_api_key(kAdminKey);
    key_a_ = NewTenant("alice");
    key_b_ = NewTenant("bob");
    a_ = Connect(key_a_);
    b_ = Connect(key_b_);
    ASSERT_TRUE(a_ && b_);
    auto ca = a_->CreateContainer("a", {});
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    container_a_ = ca->id;
    auto cb = b_->CreateContainer("b", {});
    ASSERT_TRUE(cb.ok()) << cb.status().ToString();
    container_b_ = cb->id;
    ASSERT_TRUE(a_->Put("a", "obj", Bytes("secret of alice")).ok());
    RpcClientOptions ro;
    ro.timeout = std::chrono::milliseconds(5000);
    auto rpc = RpcClient::Create(ro);
    ASSERT_TRUE(rpc.ok());
    rpc_ = std::move(*rpc);
  }
  void TearDown() override {
    rpc_.reset();
    a_.reset();
    b_.reset();
    target_.reset();
    if (mgmt_) mgmt_->Shutdown();
  }

  std::string NewTenant(const std::string& name) {
    v1::CreateTenantRequest req;
    req.set_name(name);
    auto r = admin_->CreateTenant(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->api_key() : "";
  }

  std::unique_ptr<Client> Connect(const std::string& key) {
    ClientOptions co;
    co.mgmt_address = mgmt_->address();
    co.timeout = std::chrono::milliseconds(3000);
    co.api_key = key;
    auto c = Client::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // A token from mgmt for `container` with `rights`, asked with `api_key`.
  Result<std::vector<std::byte>> Token(const std::string& api_key, uint64_t container, uint32_t rights) {
    auto mc = MgmtClient::Connect(mgmt_->address());
    if (!mc.ok()) return mc.status();
    (*mc)->set_api_key(api_key);
    v1::GetCapabilityRequest req;
    req.set_container_id(container);
    req.set_rights(rights);
    PS_ASSIGN_OR_RETURN(v1::Capability cap, (*mc)->GetCapability(req));
    return Bytes(cap.token());
  }

  // The current signing key, as targets hold it.
  ClusterKey CurrentKey() {
    v1::ClusterKeySet ks = mgmt_->tenants()->KeySet();
    for (const auto& k : ks.keys()) {
      if (k.id() == ks.current_key_id()) return ClusterKey{k.id(), k.secret()};
    }
    return {};
  }

  // A raw request for the head record of "obj" in container `container` with `token`.
  RpcReply Raw(ShardOp op, uint64_t container, const std::vector<std::byte>& token,
               const std::string& payload = "") {
    auto [hi, lo] = HeadObjectId(container, "obj");
    ShardRequestHeader h{};
    h.version = kShardProtocolVersion;
    h.map_epoch = UINT64_MAX;  // never stale (the test is about tokens)
    h.shard_version = 1;
    h.key = WireShardKey{container, hi, lo, UINT64_MAX, 0, 0};
    auto header = EncodeHeader(h);
    AttachCapability(header, token);
    auto data = Bytes(payload);
    return rpc_->CallSync(target_->address(), static_cast<uint16_t>(op), header, data);
  }

  testing::TempDir dir_{"security"};
  std::unique_ptr<MgmtServer> mgmt_;
  std::unique_ptr<TargetServer> target_;
  std::unique_ptr<MgmtClient> admin_;
  std::string key_a_, key_b_;
  std::unique_ptr<Client> a_, b_;
  uint64_t container_a_ = 0, container_b_ = 0;
  std::unique_ptr<RpcClient> rpc_;
};

TEST_F(SecurityTest, TenantsSeeOnlyTheirContainers) {
  auto got = a_->Get("a", "obj");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 15u);
  auto list = b_->ListContainers();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "b");
  EXPECT_EQ(b_->GetContainer("a").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(b_->Get("a", "obj").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(b_->List("a").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(b_->DeleteContainer("a", true).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Token(key_b_, container_a_, kRightRead).status().code(), StatusCode::kPermissionDenied);
  // The admin sees everything.
  auto all = admin_->ListContainers();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->containers_size(), 2);
}

TEST_F(SecurityTest, OnlyTheAdminListsHeldContainersOrTouchesADeletedOnesShards) {
  // A raw list of the containers the target holds, with `token`, naming `container`.
  auto list_containers = [&](uint64_t container, const std::vector<std::byte>& token) {
    ListRequestHeader h{};
    h.version = kShardProtocolVersion;
    h.flags = kListContainers;
    h.limit = 100;
    h.map_epoch = UINT64_MAX;
    h.container = container;
    auto header = EncodeHeader(h);
    AttachCapability(header, token);
    return rpc_->CallSync(target_->address(), static_cast<uint16_t>(ShardOp::kList), header, {});
  };
  ASSERT_TRUE(b_->Put("b", "obj", Bytes("bob's")).ok());
  // Container 0's token is the admin's only; a tenant's own token cannot list containers.
  EXPECT_EQ(Token(key_a_, 0, kRightRead).status().code(), StatusCode::kNotFound);
  auto own = Token(key_a_, container_a_, kRightRead);
  ASSERT_TRUE(own.ok());
  RpcReply r = list_containers(container_a_, *own);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << r.status.ToString();
  EXPECT_EQ(list_containers(0, *own).status.code(), StatusCode::kPermissionDenied);
  auto zero = Token(kAdminKey, 0, kRightRead);
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  r = list_containers(0, *zero);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  auto held = DecodeListEntries(r.payload.span());
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 2u);
  EXPECT_EQ((*held)[0].key.container, std::min(container_a_, container_b_));
  EXPECT_EQ((*held)[1].key.container, std::max(container_a_, container_b_));

  // Once "a" is deleted, its id is retired: the admin (repair) gets a token to delete what is
  // left, its tenant does not, and an id never given out gets none.
  ASSERT_TRUE(a_->DeleteContainer("a", /*force=*/true).ok());
  EXPECT_EQ(Token(key_a_, container_a_, kRightWrite).status().code(), StatusCode::kNotFound);
  auto retired = Token(kAdminKey, container_a_, kRightRead | kRightWrite);
  ASSERT_TRUE(retired.ok()) << retired.status().ToString();
  EXPECT_EQ(Token(kAdminKey, container_b_ + 100, kRightWrite).status().code(), StatusCode::kNotFound);
  // A write landing after the delete (here the admin's own) is listed, and deleted with the
  // admin's token.
  EXPECT_EQ(Raw(ShardOp::kStat, container_a_, *retired).status.code(), StatusCode::kNotFound);
  ASSERT_TRUE(Raw(ShardOp::kWrite, container_a_, *retired, "late").status.ok());
  held = DecodeListEntries(list_containers(0, *zero).payload.span());
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->size(), 2u);
  EXPECT_TRUE(Raw(ShardOp::kStat, container_a_, *retired).status.ok());
  EXPECT_TRUE(Raw(ShardOp::kDelete, container_a_, *retired).status.ok());
  EXPECT_EQ(Raw(ShardOp::kStat, container_a_, *retired).status.code(), StatusCode::kNotFound);
  held = DecodeListEntries(list_containers(0, *zero).payload.span());
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].key.container, container_b_);
}

TEST_F(SecurityTest, GrpcWithoutAValidKeyIsRefused) {
  auto none = MgmtClient::Connect(mgmt_->address());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->ListContainers().status().code(), StatusCode::kUnauthenticated);
  v1::CreateContainerRequest cr;
  cr.set_name("x");
  EXPECT_EQ((*none)->CreateContainer(cr).status().code(), StatusCode::kUnauthenticated);
  (*none)->set_api_key("psk_not_a_key");
  EXPECT_EQ((*none)->ListContainers().status().code(), StatusCode::kUnauthenticated);
  v1::GetCapabilityRequest gc;
  gc.set_container_id(container_a_);
  EXPECT_EQ((*none)->GetCapability(gc).status().code(), StatusCode::kUnauthenticated);
  // Tenants are not admins.
  auto tenant = MgmtClient::Connect(mgmt_->address());
  ASSERT_TRUE(tenant.ok());
  (*tenant)->set_api_key(key_a_);
  EXPECT_EQ((*tenant)->ListTenants().status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*tenant)->RotateClusterKey().status().code(), StatusCode::kPermissionDenied);
  // A tenant may report missed writes only for its own containers.
  v1::ReportDegradedWriteRequest missed;
  missed.add_target_ids(target_->target_id());
  missed.set_container_id(container_b_);
  EXPECT_EQ((*tenant)->ReportDegradedWrite(missed).status().code(), StatusCode::kPermissionDenied);
  missed.set_container_id(container_a_);
  EXPECT_TRUE((*tenant)->ReportDegradedWrite(missed).ok());
  EXPECT_EQ((*none)->ReportDegradedWrite(missed).status().code(), StatusCode::kUnauthenticated);
  // ... and the target becomes recovering for that container only: reads of "b" go on.
  auto map = admin_->GetClusterMap();
  ASSERT_TRUE(map.ok());
  ASSERT_EQ(map->targets_size(), 1);
  EXPECT_FALSE(map->targets(0).recovering());
  ASSERT_EQ(map->targets(0).recovering_containers_size(), 1);
  EXPECT_EQ(map->targets(0).recovering_containers(0).container_id(), container_a_);
  // Every container at once (container 0) is the admin's to say.
  missed.set_container_id(0);
  EXPECT_EQ((*tenant)->ReportDegradedWrite(missed).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(admin_->ReportDegradedWrite(missed).ok());
  map = admin_->GetClusterMap();
  ASSERT_TRUE(map.ok());
  EXPECT_TRUE(map->targets(0).recovering());

  // Registering a target or heartbeating as one hands out the cluster keys: admin key only.
  v1::RegisterTargetRequest reg;
  reg.set_uuid("00000000-0000-4000-8000-00000000f00d");
  reg.set_address("127.0.0.1:1");
  reg.set_capacity_bytes(1 << 30);
  EXPECT_EQ((*none)->RegisterTarget(reg).status().code(), StatusCode::kUnauthenticated);
  auto refused = (*tenant)->RegisterTarget(reg);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("--admin-key-file"), std::string::npos) << refused.status().ToString();
  v1::HeartbeatRequest hb;
  hb.set_target_id(target_->target_id());
  hb.set_uuid(target_->uuid());
  EXPECT_EQ((*tenant)->Heartbeat(hb).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*none)->Heartbeat(hb).status().code(), StatusCode::kUnauthenticated);
  // A target started without the key fails at once, saying why.
  TargetOptions to;
  to.data_dir = dir_.path() + "/keyless";
  to.mgmt = mgmt_->address();
  to.capacity_bytes = 65 << 20;
  to.segment_bytes = 4 << 20;
  auto keyless = TargetServer::Start(to);
  ASSERT_FALSE(keyless.ok());
  EXPECT_EQ(keyless.status().code(), StatusCode::kUnauthenticated) << keyless.status().ToString();
  EXPECT_NE(keyless.status().message().find("admin API key"), std::string::npos);
  EXPECT_EQ(admin_->GetClusterMap()->targets_size(), 1);  // nothing was registered
}

TEST_F(SecurityTest, TargetRefusesBadTokensWithNoData) {
  auto good = Token(key_a_, container_a_, kRightRead | kRightWrite);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  RpcReply ok = Raw(ShardOp::kRead, container_a_, *good);
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_GT(ok.payload.size(), 0u);

  auto expect_refused = [&](const char* what, RpcReply r, StatusCode code) {
    EXPECT_EQ(r.status.code(), code) << what << ": " << r.status.ToString();
    EXPECT_EQ(r.payload.size(), 0u) << what;
    EXPECT_TRUE(r.header.empty()) << what;
  };
  expect_refused("no token", Raw(ShardOp::kRead, container_a_, {}), StatusCode::kUnauthenticated);
  auto forged = *good;
  forged.back() ^= std::byte{1};
  expect_refused("forged", Raw(ShardOp::kRead, container_a_, forged), StatusCode::kUnauthenticated);
  auto truncated = std::vector<std::byte>(good->begin(), good->end() - 4);
  expect_refused("truncated", Raw(ShardOp::kRead, container_a_, truncated), StatusCode::kUnauthenticated);
  Capability expired;
  expired.tenant = 1;
  expired.container = container_a_;
  expired.rights = kRightRead;
  expired.expiry_ms = NowMs() - 1;
  expect_refused("expired", Raw(ShardOp::kRead, container_a_, SignCapability(expired, CurrentKey())),
                 StatusCode::kPermissionDenied);
  auto bobs = Token(key_b_, container_b_, kRightRead | kRightWrite);
  ASSERT_TRUE(bobs.ok());
  expect_refused("other tenant's token", Raw(ShardOp::kRead, container_a_, *bobs),
                 StatusCode::kPermissionDenied);
  auto read_only = Token(key_a_, container_a_, kRightRead);
  ASSERT_TRUE(read_only.ok());
  expect_refused("read-only for write", Raw(ShardOp::kWrite, container_a_, *read_only, "overwritten"),
                 StatusCode::kPermissionDenied);
  expect_refused("read-only for delete", Raw(ShardOp::kDelete, container_a_, *read_only),
                 StatusCode::kPermissionDenied);
  auto still = a_->Get("a", "obj");
  ASSERT_TRUE(still.ok()) << still.status().ToString();
  EXPECT_EQ(still->size(), 15u);  // neither write landed

  // List with another container's token.
  ListRequestHeader lh{};
  lh.version = kShardProtocolVersion;
  lh.flags = kListHeadsOnly | kListWithData;
  lh.map_epoch = UINT64_MAX;
  lh.container = container_a_;
  auto lheader = EncodeHeader(lh);
  AttachCapability(lheader, *bobs);
  RpcReply lr = rpc_->CallSync(target_->address(), static_cast<uint16_t>(ShardOp::kList), lheader, {});
  expect_refused("list with other container's token", std::move(lr), StatusCode::kPermissionDenied);
}

TEST_F(SecurityTest, RotationKeepsOldTokensUntilRotatedOut) {
  auto old_token = Token(key_a_, container_a_, kRightRead);
  ASSERT_TRUE(old_token.ok());
  ASSERT_TRUE(admin_->RotateClusterKey().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a few heartbeats
  EXPECT_TRUE(Raw(ShardOp::kRead, container_a_, *old_token).status.ok());
  ASSERT_TRUE(admin_->RotateClusterKey().ok());  // the key that signed it is dropped now
  Status last;
  for (int i = 0; i < 50; ++i) {
    last = Raw(ShardOp::kRead, container_a_, *old_token).status;
    if (last.code() == StatusCode::kUnauthenticated) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(last.code(), StatusCode::kUnauthenticated) << last.ToString();
  // The client refetches its token and carries on.
  EXPECT_TRUE(a_->Get("a", "obj").ok());
}

TEST_F(SecurityTest, RevokedTenantIsRefusedByTargets) {
  auto token = Token(key_a_, container_a_, kRightRead);
  ASSERT_TRUE(token.ok());
  v1::DeleteTenantRequest del;
  del.set_name("alice");
  ASSERT_TRUE(admin_->DeleteTenant(del).ok());
  RpcReply r;
  for (int i = 0; i < 50; ++i) {
    r = Raw(ShardOp::kRead, container_a_, *token);
    if (r.status.code() == StatusCode::kPermissionDenied) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(r.status.code(), StatusCode::kPermissionDenied) << r.status.ToString();
  EXPECT_EQ(r.payload.size(), 0u);
  EXPECT_EQ(a_->ListContainers().status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Token(key_a_, container_a_, kRightRead).status().code(), StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace penstock
