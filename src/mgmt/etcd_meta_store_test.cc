#include "mgmt/etcd_meta_store.h"
#include "mgmt/meta_store_test_util.h"

#include <gtest/gtest.h>

#include "mgmt/etcd_test_process.h"

namespace penstock::mgmt {
namespace {

TEST(Base64, RoundTrip) {
  for (std::string in : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                         std::string("abcd"), std::string("\0\xff\x10", 3)}) {
    Result<std::string> out = Base64Decode(Base64Encode(in));
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(*out, in);
  }
  EXPECT_EQ(Base64Encode("/x/el"), "L3gvZWw=");
}

TEST(EtcdMetaStore, PutGetDeleteScanCommit) {
  ::penstock::testing::EtcdProcess etcd;
  ASSERT_EQ(etcd.Start(), "");
  auto opened = EtcdMetaStore::Open(etcd.endpoint(), "/penstock/t1/");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  MetaStore& s = **opened;

  EXPECT_EQ(ValueOf(s, "a"), "<absent>");
  ASSERT_TRUE(s.Put("a", "1").ok());
  ASSERT_TRUE(s.Put("p/2", "two").ok());
  ASSERT_TRUE(s.Put("p/1", std::string("o\0ne", 4)).ok());
  ASSERT_TRUE(s.Put("q", "x").ok());
  EXPECT_EQ(ValueOf(s, "a"), "1");
  EXPECT_EQ(*s.Scan("p/"), (Rows{{"p/1", std::string("o\0ne", 4)}, {"p/2", "two"}}));
  EXPECT_EQ(s.Scan("")->size(), 4u);
  EXPECT_TRUE(s.Scan("zz")->empty());

  ASSERT_TRUE(s.Delete("a").ok());
  ASSERT_TRUE(s.Delete("never-there").ok());
  EXPECT_EQ(ValueOf(s, "a"), "<absent>");

  WriteBatch b;
  b.Put("p/3", "three");
  b.Put("p/3", "THREE");  // last put wins
  b.Put("r", "gone");
  b.Delete("r");  // deletes apply after puts
  b.Delete("q");
  ASSERT_TRUE(s.Commit(b).ok());
  EXPECT_EQ(ValueOf(s, "p/3"), "THREE");
  EXPECT_EQ(ValueOf(s, "r"), "<absent>");
  EXPECT_EQ(ValueOf(s, "q"), "<absent>");

  // Another cluster's prefix does not see these keys.
  auto other = EtcdMetaStore::Open(etcd.endpoint(), "/penstock/t2/");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)->Scan("")->empty());
}

TEST(EtcdMetaStore, FencedWritesFailOnceTheTermIsGone) {
  ::penstock::testing::EtcdProcess etcd;
  ASSERT_EQ(etcd.Start(), "");
  auto opened = EtcdMetaStore::Open(etcd.endpoint(), "/penstock/f/");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdMetaStore& s = **opened;
  EtcdClient& c = s.client();
  ASSERT_TRUE(c.Put("/penstock/f/leader", "me").ok());
  auto kvs = c.Get("/penstock/f/leader");
  ASSERT_TRUE(kvs.ok());
  s.SetFence("/penstock/f/leader", kvs->front().create_revision);
  ASSERT_TRUE(s.Put("k", "1").ok());

  // Another instance's term: delete and re-create the key.
  ASSERT_TRUE(c.Delete("/penstock/f/leader").ok());
  ASSERT_TRUE(c.Put("/penstock/f/leader", "other").ok());
  Status st = s.Put("k", "2");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("no longer the leader"), std::string::npos) << st.message();
  EXPECT_EQ(ValueOf(s, "k"), "1");
  WriteBatch b;
  b.Delete("k");
  EXPECT_FALSE(s.Commit(b).ok());
  EXPECT_EQ(ValueOf(s, "k"), "1");
}

TEST(EtcdMetaStore, UnreachableNamesTheEndpointAndTheFlag) {
  auto opened = EtcdMetaStore::Open("etcd://127.0.0.1:1", "/penstock/x/");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(opened.status().message().find("etcd at 127.0.0.1:1 is unreachable"), std::string::npos)
      << opened.status().message();
  EXPECT_NE(opened.status().message().find("--meta"), std::string::npos);
  EXPECT_EQ(EtcdMetaStore::Open("etcd://nohostport", "/p/").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(EtcdMetaStore, FailsOverToTheNextEndpoint) {
  ::penstock::testing::EtcdProcess etcd;
  ASSERT_EQ(etcd.Start(), "");
  const std::string spec = "etcd://127.0.0.1:1," + etcd.endpoint().substr(7);
  auto opened = EtcdMetaStore::Open(spec, "/penstock/m/");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_TRUE((*opened)->Put("a", "1").ok());
  EXPECT_EQ(ValueOf(**opened, "a"), "1");
}

TEST(EtcdLease, GrantKeepAliveRevoke) {
  ::penstock::testing::EtcdProcess etcd;
  ASSERT_EQ(etcd.Start(), "");
  auto c = EtcdClient::Create(etcd.endpoint());
  ASSERT_TRUE(c.ok());
  auto lease = (*c)->LeaseGrant(5);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  auto ttl = (*c)->LeaseKeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_GT(*ttl, 0);
  ASSERT_TRUE((*c)->Put("/l/k", "v", *lease).ok());
  ASSERT_TRUE((*c)->LeaseRevoke(*lease).ok());
  EXPECT_TRUE((*c)->Get("/l/k")->empty());  // revoking the lease removed its key
  auto after = (*c)->LeaseKeepAlive(*lease);
  EXPECT_TRUE(!after.ok() || *after == 0);
}

}  // namespace
}  // namespace penstock::mgmt
