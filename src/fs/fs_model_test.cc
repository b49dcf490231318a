// A random-operation checker (fsx-like) for the native file system API: writes at random
// offsets, reads, truncates, renames, unlinks and reopens against a model kept in memory,
// seeded and reproducible (the seed and the operation number are in every failure).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "fs/test_fs.h"

namespace penstock::fs {
namespace {

using testing::FsTest;

class FsModel : public FsTest {
 protected:
  struct Open {
    std::shared_ptr<File> file;
  };
  std::map<std::string, std::string> model_;  // path -> bytes
  std::map<std::string, std::shared_ptr<File>> open_;
  std::mt19937_64 rng_;
  std::string where_;

  uint64_t Pick(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  std::string AnyName() {
    static const char* names[] = {"/a", "/b", "/c", "/d/e", "/d/f"};
    return names[Pick(5)];
  }
  File* Handle(const std::string& path) {
    auto it = open_.find(path);
    if (it != open_.end()) return it->second.get();
    auto f = fs_->OpenPath(path, kRead | kWrite | kCreate);
    EXPECT_TRUE(f.ok()) << where_ << f.status().ToString();
    if (!f.ok()) return nullptr;
    model_.try_emplace(path);
    return (open_[path] = std::move(*f)).get();
  }
  void CloseAll(const std::string& path) {
    auto it = open_.find(path);
    if (it == open_.end()) return;
    EXPECT_TRUE(it->second->Close().ok()) << where_;
    open_.erase(it);
  }

  void Write(const std::string& p) {
    File* f = Handle(p);
    if (!f) return;
    std::string& m = model_[p];
    const uint64_t off = Pick(m.size() + 80 * 1024), len = 1 + Pick(70 * 1024);
    std::string data(len, '\0');
    for (char& c : data) c = static_cast<char>('a' + Pick(26));
    ASSERT_TRUE(f->Write(off, testing::Bytes(data)).ok()) << where_;
    if (m.size() < off + len) m.resize(off + len, '\0');
    m.replace(off, len, data);
  }
  void Read(const std::string& p) {
    if (!model_.count(p)) return;
    File* f = Handle(p);
    if (!f) return;
    const std::string& m = model_[p];
    EXPECT_EQ(f->size(), m.size()) << where_;
    const uint64_t off = Pick(m.size() + 1), len = Pick(100 * 1024);
    std::vector<std::byte> out(len);
    auto n = f->Read(off, out);
    ASSERT_TRUE(n.ok()) << where_ << n.status().ToString();
    out.resize(*n);
    EXPECT_EQ(testing::Text(out), m.substr(off, len)) << where_ << " off " << off << " len " << len;
  }
  void Truncate(const std::string& p) {
    File* f = Handle(p);
    if (!f) return;
    std::string& m = model_[p];
    const uint64_t size = Pick(m.size() + 64 * 1024);
    ASSERT_TRUE(f->Truncate(size).ok()) << where_;
    m.resize(size, '\0');
  }
  void Rename(const std::string& from, const std::string& to) {
    if (!model_.count(from) || from == to) return;
    CloseAll(from);
    CloseAll(to);
    ASSERT_TRUE(fs_->RenamePath(from, to).ok()) << where_;
    model_[to] = std::move(model_[from]);
    model_.erase(from);
  }
  void Unlink(const std::string& p) {
    if (!model_.count(p)) return;
    CloseAll(p);
    ASSERT_TRUE(fs_->UnlinkPath(p).ok()) << where_;
    model_.erase(p);
  }
  // Closes and checks what another opener sees: the whole file, and the stat size.
  void Reopen(const std::string& p) {
    if (!model_.count(p)) return;
    CloseAll(p);
    EXPECT_EQ(fs_->StatPath(p)->size, model_[p].size()) << where_;
    EXPECT_EQ(ReadFile(p), model_[p]) << where_;
  }
};

TEST_P(FsModel, RandomOperationsMatchTheModel) {
  ASSERT_TRUE(fs_->MkdirPath("/d").ok());
  for (uint64_t seed : {1u, 2u}) {
    rng_.seed(seed);
    for (int op = 0; op < 300 && !HasFatalFailure(); ++op) {
      where_ = "seed " + std::to_string(seed) + " op " + std::to_string(op) + ": ";
      const std::string p = AnyName();
      switch (Pick(10)) {
        case 0: case 1: case 2: Write(p); break;
        case 3: case 4: Read(p); break;
        case 5: Truncate(p); break;
        case 6: Rename(p, AnyName()); break;
        case 7: Unlink(p); break;
        default: Reopen(p); break;
      }
    }
    for (auto& [p, f] : open_) EXPECT_TRUE(f->Close().ok());
    open_.clear();
    for (auto& [p, m] : model_) EXPECT_EQ(ReadFile(p), m) << "seed " << seed << " at the end: " << p;
    std::set<std::string> root;
    for (auto& [p, m] : model_) {
      if (p.rfind('/') == 0) root.insert(p.substr(1));
    }
    root.insert("d");
    EXPECT_EQ(Names("/"), root);
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, FsModel, ::testing::Values("none", "rep:2"));

}  // namespace
}  // namespace penstock::fs
