#include "mgmt/tenant_registry.h"

#include <gtest/gtest.h>

#include "mgmt/fake_meta_store.h"
#include "protocol/capability.h"

namespace penstock::mgmt {
namespace {

TenantRegistryOptions Options(bool auth) {
  TenantRegistryOptions o;
  o.auth_enabled = auth;
  o.admin_key = "admin";
  o.now_ms = [] { return int64_t{1000}; };
  return o;
}

CapabilityKeySet ToKeys(const v1::ClusterKeySet& ks) {
  CapabilityKeySet out;
  out.auth_enabled = ks.auth_enabled();
  for (const auto& k : ks.keys()) out.keys.push_back({k.id(), k.secret()});
  out.revoked_tenants.assign(ks.revoked_tenants().begin(), ks.revoked_tenants().end());
  return out;
}

TEST(TenantRegistryTest, KeysAreHashedAndSurviveReload) {
  FakeMetaStore store;
  auto r = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(r.ok());
  auto t = (*r)->CreateTenant("alice");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string key = t->api_key();
  EXPECT_EQ(key.size(), 4u + 64u);
  EXPECT_TRUE(t->tenant().api_key_sha256().empty());  // never handed out
  auto stored = store.Scan("");  // keep the Result alive while iterating its value
  ASSERT_TRUE(stored.ok());
  for (const auto& [k, v] : *stored) EXPECT_EQ(v.find(key), std::string::npos) << k;
  EXPECT_EQ((*r)->CreateTenant("alice").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ((*r)->CreateTenant("default").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*r)->CreateTenant("a/b").status().code(), StatusCode::kInvalidArgument);

  auto again = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(again.ok());
  auto caller = (*again)->Authenticate(key);
  ASSERT_TRUE(caller.ok());
  EXPECT_EQ(caller->tenant, t->tenant().id());
  EXPECT_FALSE(caller->admin);
  EXPECT_EQ((*again)->KeySet().keys_size(), 1);
  EXPECT_EQ((*again)->KeySet().keys(0).secret(), (*r)->KeySet().keys(0).secret());
}

TEST(TenantRegistryTest, Authenticate) {
  FakeMetaStore store;
  auto on = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(on.ok());
  EXPECT_EQ((*on)->Authenticate("").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ((*on)->Authenticate("nope").status().code(), StatusCode::kUnauthenticated);
  auto admin = (*on)->Authenticate("admin");
  ASSERT_TRUE(admin.ok());
  EXPECT_TRUE(admin->admin);
  auto off = TenantRegistry::Load(&store, Options(false));
  ASSERT_TRUE(off.ok());
  auto anon = (*off)->Authenticate("");
  ASSERT_TRUE(anon.ok());
  EXPECT_TRUE(anon->admin);
  EXPECT_EQ(anon->tenant, 0u);
  EXPECT_EQ((*off)->Authenticate("nope").status().code(), StatusCode::kUnauthenticated);
}

TEST(TenantRegistryTest, DeleteRevokes) {
  FakeMetaStore store;
  auto r = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(r.ok());
  auto t = (*r)->CreateTenant("bob");
  ASSERT_TRUE(t.ok());
  auto token = (*r)->Issue(t->tenant().id(), 7, kRightRead, 1, 60'000);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(token.token().data()), token.token().size());
  EXPECT_TRUE(VerifyCapability(bytes, ToKeys((*r)->KeySet()), 7, kRightRead, 1000).ok());
  ASSERT_TRUE((*r)->DeleteTenant("bob").ok());
  EXPECT_EQ((*r)->DeleteTenant("bob").status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*r)->Authenticate(t->api_key()).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(VerifyCapability(bytes, ToKeys((*r)->KeySet()), 7, kRightRead, 1000).status().code(),
            StatusCode::kPermissionDenied);
  auto reloaded = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(reloaded.ok());
  ASSERT_EQ((*reloaded)->KeySet().revoked_tenants_size(), 1);
  EXPECT_EQ((*reloaded)->KeySet().revoked_tenants(0), t->tenant().id());
  // Ids are never reused.
  auto t2 = (*reloaded)->CreateTenant("bob");
  ASSERT_TRUE(t2.ok());
  EXPECT_GT(t2->tenant().id(), t->tenant().id());
}

TEST(TenantRegistryTest, RotationKeepsThePreviousKey) {
  FakeMetaStore store;
  auto r = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(r.ok());
  auto old_token = (*r)->Issue(0, 1, kRightRead, 0, 60'000);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(old_token.token().data()),
                                   old_token.token().size());
  ASSERT_EQ(*(*r)->RotateKey(), 2u);
  EXPECT_EQ((*r)->KeySet().current_key_id(), 2u);
  EXPECT_TRUE(VerifyCapability(bytes, ToKeys((*r)->KeySet()), 1, kRightRead, 1000).ok());
  ASSERT_EQ(*(*r)->RotateKey(), 3u);
  EXPECT_EQ((*r)->KeySet().keys_size(), 2);
  EXPECT_EQ(VerifyCapability(bytes, ToKeys((*r)->KeySet()), 1, kRightRead, 1000).status().code(),
            StatusCode::kUnauthenticated);
  auto reloaded = TenantRegistry::Load(&store, Options(true));
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ((*reloaded)->KeySet().current_key_id(), 3u);
  EXPECT_EQ((*reloaded)->KeySet().keys_size(), 2);
}

}  // namespace
}  // namespace penstock::mgmt
