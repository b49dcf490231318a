// dir_handle_test.cc — DirHandle: entries by index across pages, stable while the directory
// changes under an open listing, a fresh listing after Rewind, errors passed on.
#include "fuse/dir_handle.h"

#include <gtest/gtest.h>

#include <map>

namespace penstock::fuse {
namespace {

// A directory of `names` served `per_page` at a time; the cursor is the last name returned.
struct FakeDir {
  std::map<std::string, uint64_t> names;
  uint32_t per_page = 3;
  int fetches = 0;
  bool fail = false;

  Result<fs::DirPage> Fetch(const std::string& cursor) {
    ++fetches;
    if (fail) return Unavailable("EIO: target down");
    fs::DirPage page;
    for (auto it = names.upper_bound(cursor); it != names.end() && page.entries.size() < per_page; ++it) {
      page.entries.push_back({it->first, it->second, fs::FileType::kRegular});
    }
    if (page.entries.size() == per_page && names.upper_bound(page.entries.back().name) != names.end()) {
      page.next = page.entries.back().name;
    }
    return page;
  }
};

std::vector<std::string> ListAll(DirHandle& dh) {
  std::vector<std::string> out;
  for (size_t i = 0;; ++i) {
    auto e = dh.Entry(i);
    EXPECT_TRUE(e.ok());
    if (!e.ok() || *e == nullptr) return out;
    out.push_back((*e)->name);
  }
}

TEST(DirHandle, EntriesAcrossPagesFetchedOnlyAsNeeded) {
  FakeDir dir;
  for (int i = 0; i < 8; ++i) dir.names["f" + std::to_string(i)] = 10 + i;
  DirHandle dh([&](const std::string& c) { return dir.Fetch(c); });
  auto first = dh.Entry(0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->name, "f0");
  EXPECT_EQ(dir.fetches, 1);
  auto sixth = dh.Entry(5);
  ASSERT_TRUE(sixth.ok());
  EXPECT_EQ((*sixth)->name, "f5");
  EXPECT_EQ((*sixth)->ino, 15u);
  EXPECT_EQ(dir.fetches, 2);
  EXPECT_EQ(ListAll(dh), (std::vector<std::string>{"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"}));
  EXPECT_EQ(dir.fetches, 3);  // no fetch past the last page
  auto past = dh.Entry(100);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, nullptr);
  EXPECT_EQ(dir.fetches, 3);
}

TEST(DirHandle, OffsetsStableWhileTheDirectoryChangesAndFreshAfterRewind) {
  FakeDir dir;
  for (int i = 0; i < 6; ++i) dir.names["f" + std::to_string(i)] = i + 2;
  DirHandle dh([&](const std::string& c) { return dir.Fetch(c); });
  ASSERT_EQ(dh.Entry(2).value()->name, "f2");
  dir.names.erase("f1");     // removed behind the reader
  dir.names["f0a"] = 99;     // created behind the reader
  ASSERT_EQ(dh.Entry(1).value()->name, "f1");  // what index 1 was, still
  EXPECT_EQ(ListAll(dh), (std::vector<std::string>{"f0", "f1", "f2", "f3", "f4", "f5"}));
  dh.Rewind();
  EXPECT_EQ(ListAll(dh), (std::vector<std::string>{"f0", "f0a", "f2", "f3", "f4", "f5"}));
}

TEST(DirHandle, EmptyDirectoryAndErrors) {
  FakeDir dir;
  DirHandle dh([&](const std::string& c) { return dir.Fetch(c); });
  EXPECT_EQ(dh.Entry(0).value(), nullptr);
  FakeDir bad;
  bad.fail = true;
  DirHandle broken([&](const std::string& c) { return bad.Fetch(c); });
  auto e = broken.Entry(0);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
  bad.fail = false;
  bad.names["a"] = 5;
  EXPECT_EQ(broken.Entry(0).value()->name, "a");  // a later call retries
}

}  // namespace
}  // namespace penstock::fuse
