// The file system keeps working while a target is down within the container's redundancy:
// an in-process cluster of three targets, a rep:3 file system, one target stopped part way
// through writing a tree, then started again.
#include <gtest/gtest.h>

#include <map>

#include "client/test_cluster.h"
#include "fs/test_fs.h"
#include "penstock/fs.h"

namespace penstock::fs {
namespace {

using testing::Bytes;
using testing::Text;

class FsFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<penstock::testing::InProcessCluster>(3);
    ASSERT_TRUE(cluster_->ok());
    ContainerProps p;
    p.redundancy = *ParseRedundancy("rep:3");
    p.stripe_unit = 64 * 1024;
    ASSERT_TRUE(cluster_->client().CreateContainer("tree", p).ok());
    ASSERT_TRUE(FileSystem::Format(cluster_->client(), "tree").ok());
    fs_ = std::move(*FileSystem::Open(cluster_->client(), "tree"));
  }
  void TearDown() override {
    fs_.reset();
    cluster_.reset();
  }
  void Write(const std::string& path, const std::string& data) {
    auto f = fs_->OpenPath(path, kWrite | kCreate | kExclusive);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    ASSERT_TRUE((*f)->Write(0, Bytes(data)).ok()) << path;
    ASSERT_TRUE((*f)->Close().ok()) << path;
  }
  std::string Read(const std::string& path) {
    auto f = fs_->OpenPath(path, kRead);
    if (!f.ok()) return "<" + f.status().ToString() + ">";
    std::vector<std::byte> out((*f)->size());
    auto n = (*f)->Read(0, out);
    return n.ok() ? Text(out) : "<" + n.status().ToString() + ">";
  }
  // Writes `count` files under `dir` (some small, stored in their heads; some striped).
  void WriteTree(const std::string& dir, int count) {
    ASSERT_TRUE(fs_->MkdirPath(dir, 0755, true).ok());
    for (int i = 0; i < count; ++i) {
      const std::string p = dir + "/f" + std::to_string(i);
      want_[p] = std::string(i % 3 == 0 ? 200 * 1024 : 100 + i, static_cast<char>('a' + i % 26));
      Write(p, want_[p]);
    }
  }

  std::unique_ptr<penstock::testing::InProcessCluster> cluster_;
  std::unique_ptr<FileSystem> fs_;
  std::map<std::string, std::string> want_;
};

TEST_F(FsFailureTest, ATargetDownWithinRedundancy) {
  WriteTree("/before", 12);
  cluster_->StopTarget(1);
  WriteTree("/during/deep", 12);
  ASSERT_TRUE(fs_->RenamePath("/before/f1", "/during/moved").ok());
  want_["/during/moved"] = want_["/before/f1"];
  want_.erase("/before/f1");
  ASSERT_TRUE(fs_->UnlinkPath("/before/f2").ok());
  want_.erase("/before/f2");
  for (const auto& [p, data] : want_) EXPECT_EQ(Read(p), data) << p;
  ASSERT_TRUE(cluster_->StartTarget(1));
  WriteTree("/after", 4);
  for (const auto& [p, data] : want_) EXPECT_EQ(Read(p), data) << p;
  EXPECT_EQ(ErrnoOf(fs_->StatPath("/before/f2").status()), ENOENT);
}

}  // namespace
}  // namespace penstock::fs
