// Small objects stored in their heads, replace-opens (OpenOptions::replace) and the client's
// container cache, against an in-process cluster (a real MgmtServer and two TargetServers).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "client/data_path.h"
#include "client/test_cluster.h"
#include "penstock/client.h"
#include "protocol/object_head.h"

namespace penstock {
namespace {

using testing::RandomBytes;

class InlineObjectsTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new testing::InProcessCluster(2);
    ASSERT_TRUE(cluster_->ok());
    client_ = &cluster_->client();
    for (const char* red : {"none", "rep:2"}) {
      ContainerProps p;
      p.redundancy = *ParseRedundancy(red);
      p.min_durable = p.redundancy->kind == Redundancy::Kind::kNone ? 0 : 2;
      p.stripe_unit = 64 * 1024;
      ASSERT_TRUE(client_->CreateContainer(red == std::string("none") ? "none" : "rep", p).ok());
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::string C() { return GetParam(); }

  static std::vector<std::byte> ReadAll(Object& o) {
    std::vector<std::byte> out(o.size());
    auto n = o.Read(0, out);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  static testing::InProcessCluster* cluster_;
  static Client* client_;
};

testing::InProcessCluster* InlineObjectsTest::cluster_ = nullptr;
Client* InlineObjectsTest::client_ = nullptr;

TEST_P(InlineObjectsTest, PutsOfEverySizeAroundTheInlineLimitReadBack) {
  for (uint64_t size : {0ul, 1ul, 4096ul, kMaxInlineBytes, kMaxInlineBytes + 1, 200000ul}) {
    const std::string name = "sz" + std::to_string(size);
    auto data = RandomBytes(size, static_cast<uint32_t>(size) + 7);
    ASSERT_TRUE(client_->Put(C(), name, data).ok()) << size;
    EXPECT_EQ(*client_->Get(C(), name), data) << size;
    auto o = client_->Open(C(), name);
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(ReadAll(**o), data) << size;
    EXPECT_EQ(client_->Stat(C(), name)->size, size);
  }
  auto list = client_->List(C(), {.prefix = "sz"});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 6u);
  for (const auto& o : *list) EXPECT_EQ(o.name, "sz" + std::to_string(o.size));
}

TEST_P(InlineObjectsTest, OverwritesBetweenInlineAndStripedKeepOnlyTheNewBytes) {
  auto big = RandomBytes(300000, 1), small = RandomBytes(100, 2), big2 = RandomBytes(70000, 3);
  ASSERT_TRUE(client_->Put(C(), "ow", big).ok());
  ASSERT_TRUE(client_->Put(C(), "ow", small).ok());
  EXPECT_EQ(*client_->Get(C(), "ow"), small);
  ASSERT_TRUE(client_->Put(C(), "ow", big2).ok());
  EXPECT_EQ(*client_->Get(C(), "ow"), big2);
  ASSERT_TRUE(client_->Delete(C(), "ow").ok());
  EXPECT_EQ(client_->Get(C(), "ow").status().code(), StatusCode::kNotFound);
}

TEST_P(InlineObjectsTest, AReplaceOpenShowsNothingUntilItsFirstWrite) {
  auto old = RandomBytes(150000, 4), fresh = RandomBytes(5000, 5);
  ASSERT_TRUE(client_->Put(C(), "rp", old).ok());
  auto o = client_->Open(C(), "rp", {.replace = true});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ((*o)->size(), 0u);
  EXPECT_EQ(*client_->Get(C(), "rp"), old);  // not committed yet
  ASSERT_TRUE((*o)->Write(0, fresh).ok());
  EXPECT_EQ((*o)->size(), fresh.size());
  EXPECT_EQ(*client_->Get(C(), "rp"), fresh);
  EXPECT_EQ(ReadAll(**o), fresh);
  // A replace-open of a new name whose first write is larger than an inline head.
  auto large = RandomBytes(140000, 6);
  auto n = client_->Open(C(), "rp-large", {.replace = true});
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE((*n)->Write(0, large).ok());
  EXPECT_EQ(*client_->Get(C(), "rp-large"), large);
  // One whose first write is not at offset 0: striped, with a hole.
  auto m = client_->Open(C(), "rp-offset", {.replace = true});
  ASSERT_TRUE((*m)->Write(1000, fresh).ok());
  auto got = *client_->Get(C(), "rp-offset");
  ASSERT_EQ(got.size(), 1000 + fresh.size());
  EXPECT_EQ(std::vector<std::byte>(got.begin() + 1000, got.end()), fresh);
  EXPECT_EQ(got[0], std::byte{0});
}

TEST_P(InlineObjectsTest, WritesIntoAnInlineObjectMoveItToStripesFirst) {
  auto first = RandomBytes(4096, 7), patch = RandomBytes(100, 8), tail = RandomBytes(80000, 9);
  ASSERT_TRUE(client_->Put(C(), "mv", first).ok());
  auto o = client_->Open(C(), "mv");
  ASSERT_TRUE(o.ok());
  // Several at once: the ones that arrive while the move runs wait for it.
  CompletionQueue cq;
  (*o)->WriteAsync(10, {{patch.data(), patch.size()}}, cq, 1);
  (*o)->WriteAsync(4096, {{tail.data(), tail.size()}}, cq, 2);
  for (const auto& c : cq.Wait(2, std::chrono::seconds(30))) EXPECT_TRUE(c.status.ok()) << c.status.ToString();
  auto want = first;
  std::memcpy(want.data() + 10, patch.data(), patch.size());
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(*client_->Get(C(), "mv"), want);
  // Another client's handle opened while it was inline sees the change after a Refresh.
  ASSERT_TRUE(client_->Put(C(), "mv2", first).ok());
  auto reader = client_->Open(C(), "mv2");
  auto writer = client_->Open(C(), "mv2");
  ASSERT_TRUE((*writer)->Write(0, patch).ok());
  ASSERT_TRUE((*reader)->Refresh().ok());
  auto seen = ReadAll(**reader);
  EXPECT_TRUE(std::equal(patch.begin(), patch.end(), seen.begin()));
  // Truncate of an inline object.
  ASSERT_TRUE(client_->Put(C(), "tr", first).ok());
  auto t = client_->Open(C(), "tr");
  ASSERT_TRUE((*t)->Truncate(1000).ok());
  EXPECT_EQ(*client_->Get(C(), "tr"), std::vector<std::byte>(first.begin(), first.begin() + 1000));
}

TEST_P(InlineObjectsTest, ManyConcurrentReplaceOpensOfNewNames) {
  CompletionQueue cq;
  std::vector<std::shared_ptr<Object>> objects;
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < 64; ++i) {
    data.push_back(RandomBytes(4096, 100 + i));
    auto o = client_->Open(C(), "many-" + std::to_string(i), {.replace = true});
    ASSERT_TRUE(o.ok());
    objects.push_back(*o);
    (*o)->WriteAsync(0, {{data.back().data(), data.back().size()}}, cq, i);
  }
  for (const auto& c : cq.Wait(64, std::chrono::seconds(30))) EXPECT_TRUE(c.status.ok()) << c.status.ToString();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(*client_->Get(C(), "many-" + std::to_string(i)), data[i]);
}

// Data stripes (not heads) of container `c` on every target.
size_t StoredStripes(testing::InProcessCluster& cluster, const std::string& c) {
  DataPath path;
  DataPathOptions o;
  o.mgmt_address = cluster.mgmt_address();
  EXPECT_TRUE(path.Open(o).ok());
  auto info = cluster.client().GetContainer(c);
  EXPECT_TRUE(info.ok());
  size_t n = 0;
  for (const TargetRef& t : path.view->targets()) {
    auto list = path.shards->List(t, info->id, 0);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    for (const ListEntry& e : *list) n += e.key.stripe != UINT64_MAX;  // not a head
  }
  return n;
}

// Waits (up to 5 s: an Object frees them in the background) until `c` holds `want` stripes.
::testing::AssertionResult StripesBecome(testing::InProcessCluster& cluster, const std::string& c, size_t want) {
  size_t n = 0;
  for (int i = 0; i < 500 && (n = StoredStripes(cluster, c)) != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (n == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << n << " stripes stored, " << want << " expected";
}

// A head write learns from its targets which head it replaced (kWriteReturnReplaced), so the
// stripes a replaced or deleted object named go at once: no read before the write, no
// orphans left for mgmt's collection.
TEST_P(InlineObjectsTest, ReplacingOrDeletingAnObjectFreesTheStripesItNamedAtOnce) {
  const size_t per_stripe = C() == "none" ? 1 : 2;  // shards per stripe (rep:2 keeps two copies)
  const std::string name = "fr";
  auto big = RandomBytes(300000, 11), big2 = RandomBytes(200000, 12), small = RandomBytes(3000, 13);
  const size_t before = StoredStripes(*cluster_, C());
  ASSERT_TRUE(client_->Put(C(), name, big).ok());
  ASSERT_TRUE(StripesBecome(*cluster_, C(), before + 5 * per_stripe));  // 300000 / 64 KiB: 5
  ASSERT_TRUE(client_->Put(C(), name, big2).ok());                      // striped over striped
  ASSERT_TRUE(StripesBecome(*cluster_, C(), before + 4 * per_stripe));
  ASSERT_TRUE(client_->Put(C(), name, small).ok());                     // inline over striped
  ASSERT_TRUE(StripesBecome(*cluster_, C(), before));
  ASSERT_TRUE(client_->Put(C(), name, big).ok());
  auto o = client_->Open(C(), name, {.replace = true});                 // replace-open, inline
  ASSERT_TRUE(o.ok());
  ASSERT_TRUE((*o)->Write(0, small).ok());
  ASSERT_TRUE(StripesBecome(*cluster_, C(), before));
  ASSERT_TRUE(client_->Put(C(), name, big).ok());
  auto r = client_->Open(C(), name, {.replace = true});                 // replace-open, striped
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Write(0, big2).ok());
  ASSERT_TRUE(StripesBecome(*cluster_, C(), before + 4 * per_stripe));
  EXPECT_EQ(*client_->Get(C(), name), big2);
  // A delete learns what it deleted from the same requests (kDeleteReturnDeleted, or the
  // tombstone's kWriteReturnReplaced) and frees its stripes.
  ASSERT_TRUE(client_->Delete(C(), name).ok());
  ASSERT_TRUE(StripesBecome(*cluster_, C(), before));
  EXPECT_EQ(client_->Get(C(), name).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->Delete(C(), name).code(), StatusCode::kNotFound);  // deleted already
  EXPECT_EQ(client_->Delete(C(), "never-was").code(), StatusCode::kNotFound);
  ASSERT_TRUE(client_->Put(C(), name, small).ok());  // an inline one: no stripes to free
  ASSERT_TRUE(client_->Delete(C(), name).ok());
  EXPECT_EQ(client_->Get(C(), name).status().code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Redundancy, InlineObjectsTest, ::testing::Values("none", "rep"));

TEST(ContainerCacheTest, ADeletedAndRecreatedContainerIsLookedUpAgain) {
  testing::InProcessCluster cluster(1);
  ASSERT_TRUE(cluster.ok());
  Client& a = cluster.client();
  ClientOptions co;
  co.mgmt_address = cluster.mgmt_address();
  auto b = Client::Connect(co);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(a.CreateContainer("cc").ok());
  auto one = RandomBytes(10, 1);
  ASSERT_TRUE(a.Put("cc", "x", one).ok());  // a caches "cc"
  const uint64_t before = a.map_epoch();
  ASSERT_TRUE((*b)->DeleteContainer("cc", /*force=*/true).ok());
  ASSERT_TRUE((*b)->CreateContainer("cc").ok());
  // The deletion bumped the map; a's watch brings it (no call of a's needed).
  for (int i = 0; i < 500 && a.map_epoch() == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(a.map_epoch(), before);
  ASSERT_TRUE(a.Put("cc", "y", one).ok());
  EXPECT_EQ(*(*b)->Get("cc", "y"), one);  // a wrote into the new container
  EXPECT_EQ((*b)->Get("cc", "x").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace penstock
