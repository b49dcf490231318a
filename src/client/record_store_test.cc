// Records (penstock/records.h) against an in-process cluster (a real MgmtServer and two
// TargetServers): conditions, exactly-one-wins creates, paged listings of a group.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "client/test_cluster.h"
#include "penstock/client.h"

namespace penstock {
namespace {

std::vector<std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), reinterpret_cast<const std::byte*>(s.data()) + s.size()};
}
std::string Text(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

class RecordStoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new testing::InProcessCluster(2);
    ASSERT_TRUE(cluster_->ok());
    for (const char* red : {"none", "rep:2"}) {
      ContainerProps p;
      p.redundancy = *ParseRedundancy(red);
      ASSERT_TRUE(cluster_->client().CreateContainer(Name(red), p).ok());
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::string Name(const std::string& red) { return red == "none" ? "none" : "rep"; }
  static std::string C() { return Name(GetParam()); }
  static Client& client() { return cluster_->client(); }

  // Every record of `group`, page by page.
  static std::map<std::string, std::string> All(const std::string& group, uint32_t limit) {
    std::map<std::string, std::string> out;
    std::string cursor;
    for (int pages = 0; pages < 10000; ++pages) {
      auto page = client().ListRecords(C(), group, cursor, limit);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      EXPECT_LE(page->records.size(), limit);
      for (auto& r : page->records) EXPECT_TRUE(out.emplace(r.key, Text(r.value)).second) << "listed twice: " << r.key;
      if (page->next.empty()) break;
      cursor = page->next;
    }
    return out;
  }

  static testing::InProcessCluster* cluster_;
};

testing::InProcessCluster* RecordStoreTest::cluster_ = nullptr;

TEST_P(RecordStoreTest, PutGetDeleteWithConditions) {
  EXPECT_EQ(client().GetRecord(C(), "g1", "a").status().code(), StatusCode::kNotFound);
  auto v1 = client().PutRecord(C(), "g1", "a", Bytes("one"), RecordCondition::Create());
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(client().PutRecord(C(), "g1", "a", Bytes("two"), RecordCondition::Create()).status().code(),
            StatusCode::kAlreadyExists);
  auto got = client().GetRecord(C(), "g1", "a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Text(got->value), "one");
  EXPECT_EQ(got->version, *v1);

  auto v2 = client().PutRecord(C(), "g1", "a", Bytes("two"), RecordCondition::Version(*v1));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_GT(*v2, *v1);
  EXPECT_EQ(client().PutRecord(C(), "g1", "a", Bytes("three"), RecordCondition::Version(*v1)).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(client().DeleteRecord(C(), "g1", "a", *v1).code(), StatusCode::kAborted);
  EXPECT_EQ(Text(client().GetRecord(C(), "g1", "a")->value), "two");
  // Another group's key of the same name is another record.
  EXPECT_EQ(client().GetRecord(C(), "g2", "a").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(client().DeleteRecord(C(), "g1", "a", *v2).ok());
  EXPECT_EQ(client().GetRecord(C(), "g1", "a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client().DeleteRecord(C(), "g1", "a").code(), StatusCode::kNotFound);
  EXPECT_EQ(client().PutRecord(C(), "g1", "a", Bytes("x"), RecordCondition::Version(*v2)).status().code(),
            StatusCode::kNotFound);
  // Deleted, it can be created again.
  EXPECT_TRUE(client().PutRecord(C(), "g1", "a", Bytes("again"), RecordCondition::Create()).ok());
}

// A versioned update replaces the whole value (shorter ones too); in an unprotected container
// it is one request without the lease, and a leaseholder's write over the version it read
// before it is refused rather than undoing it.
TEST_P(RecordStoreTest, VersionedUpdatesReplaceTheWholeValue) {
  auto v1 = client().PutRecord(C(), "vu", "k", Bytes(std::string(3000, 'l')), RecordCondition::Create());
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto leases = client().LockRecords(C(), {{"vu", "k"}});  // a leaseholder that read v1
  ASSERT_TRUE(leases.ok());
  if (C() == "rep") leases->reset();  // protected: versioned updates take the lease, wait for it
  auto v2 = client().PutRecord(C(), "vu", "k", Bytes("short"), RecordCondition::Version(*v1));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(Text(client().GetRecord(C(), "vu", "k")->value), "short");
  if (C() == "none") {
    EXPECT_EQ(client()
                  .PutRecord(C(), "vu", "k", Bytes("stale"), RecordCondition::Blind(*v1), leases->get())
                  .status()
                  .code(),
              StatusCode::kAborted);
    EXPECT_EQ(Text(client().GetRecord(C(), "vu", "k")->value), "short");
  }
}

TEST_P(RecordStoreTest, BlindWritesReplace) {
  auto v1 = client().PutRecord(C(), "blind", "k", Bytes("one"), RecordCondition::Blind());
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto v2 = client().PutRecord(C(), "blind", "k", Bytes("two"), RecordCondition::Blind(*v1));
  ASSERT_TRUE(v2.ok());
  EXPECT_GT(*v2, *v1);
  EXPECT_EQ(Text(client().GetRecord(C(), "blind", "k")->value), "two");
  auto leases = client().LockRecords(C(), {{"blind", "other"}});
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(client().PutRecord(C(), "blind", "k", Bytes("x"), RecordCondition::Blind(), leases->get()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_P(RecordStoreTest, RefusesBadInput) {
  std::vector<std::byte> big(kMaxRecordBytes + 1);
  EXPECT_EQ(client().PutRecord(C(), "g", "k", big).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client().PutRecord(C(), "", "k", Bytes("v")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client().PutRecord(C(), "g", "", Bytes("v")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client().PutRecord(C(), "g", std::string("a\0b", 3), Bytes("v")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client().ListRecords(C(), "g", "not-hex").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client().ListRecords(C(), "g", "", 0).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::byte> most(kMaxRecordBytes, std::byte{7});
  ASSERT_TRUE(client().PutRecord(C(), "g", "big", most).ok());
  EXPECT_EQ(client().GetRecord(C(), "g", "big")->value, most);
}

TEST_P(RecordStoreTest, ConcurrentCreatesOneWins) {
  for (int round = 0; round < 5; ++round) {
    const std::string key = "race-" + std::to_string(round);
    std::atomic<int> won{0}, exists{0}, other{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        auto r = client().PutRecord(C(), "races", key, Bytes(std::to_string(i)), RecordCondition::Create());
        if (r.ok()) {
          ++won;
        } else if (r.status().code() == StatusCode::kAlreadyExists) {
          ++exists;
        } else {
          ++other;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(won.load(), 1);
    EXPECT_EQ(exists.load(), 7);
    EXPECT_EQ(other.load(), 0);
  }
}

TEST_P(RecordStoreTest, ListsAGroupPageByPage) {
  std::map<std::string, std::string> want;
  for (int i = 0; i < 1200; ++i) {
    const std::string k = "entry-" + std::to_string(i);
    want[k] = "value " + std::to_string(i);
    ASSERT_TRUE(client().PutRecord(C(), "big-dir", k, Bytes(want[k])).ok());
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client().PutRecord(C(), "small-dir", "s" + std::to_string(i), Bytes("s")).ok());
  EXPECT_EQ(All("big-dir", 128), want);
  EXPECT_EQ(All("big-dir", 10000), want);
  EXPECT_EQ(All("small-dir", 2).size(), 5u);
  for (int i = 0; i < 1200; i += 3) {
    const std::string k = "entry-" + std::to_string(i);
    ASSERT_TRUE(client().DeleteRecord(C(), "big-dir", k).ok());
    want.erase(k);
  }
  EXPECT_EQ(All("big-dir", 100), want);
  EXPECT_TRUE(All("empty-dir", 10).empty());
}

TEST_P(RecordStoreTest, HeldLeasesSerializeWriters) {
  auto leases = client().LockRecords(C(), {{"locked", "x"}, {"locked", "y"}});
  ASSERT_TRUE(leases.ok()) << leases.status().ToString();
  ASSERT_TRUE(client().PutRecord(C(), "locked", "x", Bytes("mine"), {}, leases->get()).ok());
  // Leases that do not cover a record are refused for it.
  EXPECT_EQ(client().PutRecord(C(), "locked", "z", Bytes("v"), {}, leases->get()).status().code(),
            StatusCode::kInvalidArgument);
  std::atomic<bool> done{false};
  std::thread other([&] {  // a write that takes the lease (an unprotected create does not: see records.h)
    EXPECT_TRUE(client().PutRecord(C(), "locked", "x", Bytes("theirs")).ok());
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(done.load());  // waits for the lease
  ASSERT_TRUE(client().DeleteRecord(C(), "locked", "y", std::nullopt, leases->get()).code() == StatusCode::kNotFound);
  EXPECT_EQ(Text(client().GetRecord(C(), "locked", "x")->value), "mine");
  leases->reset();
  other.join();
  EXPECT_EQ(Text(client().GetRecord(C(), "locked", "x")->value), "theirs");
}

INSTANTIATE_TEST_SUITE_P(Schemes, RecordStoreTest, ::testing::Values("none", "rep:2"));

}  // namespace
}  // namespace penstock
