// test_fs.h — the fixture of the file system tests: one in-process cluster (a real MgmtServer
// and two TargetServers) for the suite, and a freshly formatted container per test, of the
// redundancy the test is instantiated with ("none" or "rep:2").
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "client/test_cluster.h"
#include "penstock/fs.h"

namespace penstock::fs::testing {

inline std::vector<std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), reinterpret_cast<const std::byte*>(s.data()) + s.size()};
}
inline std::string Text(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

class FsTest : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new penstock::testing::InProcessCluster(2);
    ASSERT_TRUE(cluster_->ok());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    container_ = "fs-" + Suffix();
    ASSERT_TRUE(client().CreateContainer(container_, Props()).ok());
    ASSERT_TRUE(FileSystem::Format(client(), container_).ok());
    auto fs = FileSystem::Open(client(), container_);
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    fs_ = std::move(*fs);
  }
  void TearDown() override { fs_.reset(); }

  static Client& client() { return cluster_->client(); }
  static ContainerProps Props() {
    ContainerProps p;
    p.redundancy = *ParseRedundancy(GetParam());
    p.stripe_unit = 64 * 1024;
    return p;
  }
  // Unique per test and parameter.
  static std::string Suffix() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string s = std::string(info->name()) + "-" + GetParam();
    for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    return s;
  }
  std::unique_ptr<Client> ConnectAnother() {
    ClientOptions o;
    o.mgmt_address = cluster_->mgmt_address();
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  void WriteFile(const std::string& path, const std::string& data) {
    auto f = fs_->OpenPath(path, kWrite | kCreate | kTruncate);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    ASSERT_TRUE((*f)->Write(0, Bytes(data)).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  std::string ReadFile(const std::string& path) {
    auto f = fs_->OpenPath(path, kRead);
    EXPECT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    if (!f.ok()) return "<" + f.status().ToString() + ">";
    std::vector<std::byte> out((*f)->size());
    auto n = (*f)->Read(0, out);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return Text(out);
  }
  std::set<std::string> Names(const std::string& dir) {
    std::set<std::string> out;
    std::string cursor;
    do {
      auto page = fs_->ReadDirPath(dir, cursor);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (auto& e : page->entries) out.insert(e.name);
      cursor = page->next;
    } while (!cursor.empty());
    return out;
  }

  static inline penstock::testing::InProcessCluster* cluster_ = nullptr;
  std::string container_;
  std::unique_ptr<FileSystem> fs_;
};

}  // namespace penstock::fs::testing
