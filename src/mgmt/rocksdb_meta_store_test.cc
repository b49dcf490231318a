#include "mgmt/rocksdb_meta_store.h"
#include "mgmt/meta_store_test_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/temp_dir.h"

namespace penstock::mgmt {
namespace {

TEST(RocksDbMetaStore, PutGetDeleteScanCommit) {
  ::penstock::testing::TempDir dir;
  Result<std::unique_ptr<MetaStore>> opened = RocksDbMetaStore::Open(dir.path() + "/meta");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  MetaStore& s = **opened;

  EXPECT_EQ(ValueOf(s, "a"), "<absent>");
  ASSERT_TRUE(s.Put("a", "1").ok());
  ASSERT_TRUE(s.Put("p/2", "two").ok());
  ASSERT_TRUE(s.Put("p/1", std::string("o\0ne", 4)).ok());
  ASSERT_TRUE(s.Put("q", "x").ok());
  EXPECT_EQ(ValueOf(s, "a"), "1");
  EXPECT_EQ(ValueOf(s, "p/1"), std::string("o\0ne", 4));
  EXPECT_EQ(*s.Scan("p/"), (Rows{{"p/1", std::string("o\0ne", 4)}, {"p/2", "two"}}));
  EXPECT_EQ(s.Scan("")->size(), 4u);
  EXPECT_TRUE(s.Scan("zz")->empty());

  ASSERT_TRUE(s.Delete("a").ok());
  ASSERT_TRUE(s.Delete("never-there").ok());
  EXPECT_EQ(ValueOf(s, "a"), "<absent>");

  WriteBatch b;
  b.Put("p/3", "three");
  b.Put("p/2", "TWO");
  b.Delete("q");
  b.Put("gone", "x");
  b.Delete("gone");
  ASSERT_TRUE(s.Commit(b).ok());
  EXPECT_EQ(*s.Scan("p/"),
            (Rows{{"p/1", std::string("o\0ne", 4)}, {"p/2", "TWO"}, {"p/3", "three"}}));
  EXPECT_EQ(ValueOf(s, "q"), "<absent>");
  EXPECT_EQ(ValueOf(s, "gone"), "<absent>");
}

TEST(RocksDbMetaStore, ReopenKeepsData) {
  ::penstock::testing::TempDir dir;
  {
    auto s = std::move(RocksDbMetaStore::Open(dir.path())).value();
    WriteBatch b;
    b.Put("k1", "v1");
    b.Put("k2", "v2");
    ASSERT_TRUE(s->Commit(b).ok());
    ASSERT_TRUE(s->Delete("k2").ok());
  }
  auto s = RocksDbMetaStore::Open(dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(ValueOf(**s, "k1"), "v1");
  EXPECT_EQ(ValueOf(**s, "k2"), "<absent>");
}

TEST(RocksDbMetaStore, SecondOpenOfSameDirFailsClearly) {
  ::penstock::testing::TempDir dir;
  auto first = RocksDbMetaStore::Open(dir.path());
  ASSERT_TRUE(first.ok());
  auto second = RocksDbMetaStore::Open(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  const std::string m = second.status().message();
  EXPECT_NE(m.find(dir.path()), std::string::npos) << m;
  EXPECT_NE(m.find("in use by another penstock mgmt"), std::string::npos) << m;
  EXPECT_NE(m.find("pid " + std::to_string(::getpid())), std::string::npos) << m;
  EXPECT_NE(m.find("--data-dir"), std::string::npos) << m;
  // Once the first closes, the dir is free again.
  first = Status(StatusCode::kCancelled, "closed");
  EXPECT_TRUE(RocksDbMetaStore::Open(dir.path()).ok());
}

TEST(RocksDbMetaStore, UnusableDirFails) {
  ::penstock::testing::TempDir dir;
  EXPECT_EQ(RocksDbMetaStore::Open("").status().code(), StatusCode::kInvalidArgument);
  // A regular file where the directory should be.
  std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  Result<std::unique_ptr<MetaStore>> r = RocksDbMetaStore::Open(file + "/meta");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--data-dir"), std::string::npos) << r.status().message();
  if (::geteuid() != 0) {  // root can write anywhere
    std::string ro = dir.path() + "/ro";
    ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
    Result<std::unique_ptr<MetaStore>> denied = RocksDbMetaStore::Open(ro);
    EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(denied.status().message().find("not writable"), std::string::npos);
  }
}

}  // namespace
}  // namespace penstock::mgmt
