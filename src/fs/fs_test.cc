// The file system API (penstock/fs.h) against an in-process cluster (a real MgmtServer and two
// TargetServers), in an unprotected and a replicated container.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>

#include "client/test_cluster.h"
#include "fs/test_fs.h"
#include "penstock/fs.h"

namespace penstock::fs {
namespace {

using testing::Bytes;
using testing::FsTest;
using testing::Text;

TEST_P(FsTest, OpenNeedsAFormattedContainer) {
  ASSERT_TRUE(client().CreateContainer("plain-" + Suffix(), Props()).ok());
  auto fs = FileSystem::Open(client(), "plain-" + Suffix());
  EXPECT_EQ(ErrnoOf(fs.status()), ENOENT);
  EXPECT_NE(fs.status().message().find("--type fs"), std::string::npos) << fs.status().ToString();
  EXPECT_EQ(ErrnoOf(FileSystem::Format(client(), container_)), EEXIST);
  EXPECT_EQ(FileSystem::Open(client(), "no-such-container").status().code(), StatusCode::kNotFound);
}

TEST_P(FsTest, FilesAndDirectories) {
  ASSERT_TRUE(fs_->MkdirPath("/docs").ok());
  EXPECT_EQ(ErrnoOf(fs_->MkdirPath("/docs").status()), EEXIST);
  WriteFile("/docs/a.txt", "hello");
  std::string big(300 * 1024, 'z');  // striped (over 16 KiB)
  WriteFile("/docs/big.bin", big);
  EXPECT_EQ(ReadFile("/docs/a.txt"), "hello");
  EXPECT_EQ(ReadFile("/docs/big.bin"), big);
  auto st = fs_->StatPath("/docs/big.bin");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, big.size());
  EXPECT_EQ(st->type, FileType::kRegular);
  EXPECT_EQ(st->mode, 0644u);
  EXPECT_EQ(fs_->StatPath("/docs")->type, FileType::kDirectory);
  EXPECT_EQ(Names("/docs"), (std::set<std::string>{"a.txt", "big.bin"}));
  EXPECT_EQ(ErrnoOf(fs_->RmdirPath("/docs")), ENOTEMPTY);
  EXPECT_EQ(ErrnoOf(fs_->UnlinkPath("/docs")), EISDIR);
  EXPECT_EQ(ErrnoOf(fs_->RmdirPath("/docs/a.txt")), ENOTDIR);
  EXPECT_EQ(ErrnoOf(fs_->StatPath("/docs/a.txt/x").status()), ENOTDIR);
  ASSERT_TRUE(fs_->UnlinkPath("/docs/a.txt").ok());
  ASSERT_TRUE(fs_->UnlinkPath("/docs/big.bin").ok());
  EXPECT_EQ(ErrnoOf(fs_->StatPath("/docs/a.txt").status()), ENOENT);
  // The data objects went with the inodes.
  auto objects = client().List(container_);
  ASSERT_TRUE(objects.ok());
  for (const auto& o : *objects) EXPECT_FALSE(o.name.starts_with("fs-data/")) << o.name;
  const uint64_t docs = fs_->StatPath("/docs")->ino;
  ASSERT_TRUE(fs_->RmdirPath("/docs").ok());
  EXPECT_TRUE(Names("/").empty());
  // Gone for this client at once (no trust in what it saw of the directory before).
  EXPECT_EQ(ErrnoOf(fs_->Create(docs, "late", 0644, 0, 0, false).status()), ENOENT);
  EXPECT_EQ(ErrnoOf(fs_->Lookup(docs, "a.txt").status()), ENOENT);
}

TEST_P(FsTest, WritesAtAnyOffsetSparseAndTruncate) {
  auto f = fs_->OpenPath("/sparse", kWrite | kRead | kCreate);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE((*f)->Write(1 << 20, Bytes("tail")).ok());
  ASSERT_TRUE((*f)->Write(10, Bytes("head")).ok());
  EXPECT_EQ((*f)->size(), (1u << 20) + 4);
  ASSERT_TRUE((*f)->Close().ok());
  std::string want((1 << 20) + 4, '\0');
  want.replace(10, 4, "head");
  want.replace(1 << 20, 4, "tail");
  EXPECT_EQ(ReadFile("/sparse"), want);
  // Truncate through the inode: shrink, then grow (zeros).
  auto ino = fs_->StatPath("/sparse")->ino;
  ASSERT_TRUE(fs_->SetAttr(ino, {.size = 12}).ok());
  EXPECT_EQ(ReadFile("/sparse"), want.substr(0, 12));
  ASSERT_TRUE(fs_->SetAttr(ino, {.size = 100}).ok());
  EXPECT_EQ(ReadFile("/sparse"), want.substr(0, 12) + std::string(88, '\0'));
  EXPECT_EQ(fs_->StatPath("/sparse")->size, 100u);
  // Open with truncate.
  auto t = fs_->OpenPath("/sparse", kWrite | kTruncate);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Close().ok());
  EXPECT_EQ(fs_->StatPath("/sparse")->size, 0u);
  EXPECT_EQ(ReadFile("/sparse"), "");
}

TEST_P(FsTest, RenameMovesAndReplaces) {
  ASSERT_TRUE(fs_->MkdirPath("/a/b/c", 0755, true).ok());
  WriteFile("/a/one", "1");
  WriteFile("/a/two", "2");
  ASSERT_TRUE(fs_->RenamePath("/a/one", "/a/b/uno").ok());
  EXPECT_EQ(ReadFile("/a/b/uno"), "1");
  EXPECT_EQ(ErrnoOf(fs_->StatPath("/a/one").status()), ENOENT);
  // Over an existing file: the old one's data goes.
  ASSERT_TRUE(fs_->RenamePath("/a/two", "/a/b/uno").ok());
  EXPECT_EQ(ReadFile("/a/b/uno"), "2");
  EXPECT_EQ(Names("/a"), (std::set<std::string>{"b"}));
  // Directories: into another, not into themselves, not over a non-empty one.
  ASSERT_TRUE(fs_->MkdirPath("/x").ok());
  ASSERT_TRUE(fs_->RenamePath("/a/b", "/x/b").ok());
  EXPECT_EQ(ReadFile("/x/b/uno"), "2");
  EXPECT_EQ(ErrnoOf(fs_->RenamePath("/x", "/x/b/c/x")), EINVAL);
  ASSERT_TRUE(fs_->MkdirPath("/y/z", 0755, true).ok());
  EXPECT_EQ(ErrnoOf(fs_->RenamePath("/x", "/y")), ENOTEMPTY);
  EXPECT_EQ(ErrnoOf(fs_->RenamePath("/x/b/uno", "/y")), EISDIR);
  EXPECT_EQ(ErrnoOf(fs_->RenamePath("/y", "/x/b/uno")), ENOTDIR);
  // ".." follows the move.
  EXPECT_EQ(fs_->StatPath("/x/b/c/../..")->ino, fs_->StatPath("/x")->ino);
  // No-replace and exchange.
  WriteFile("/p", "P");
  WriteFile("/q", "Q");
  EXPECT_EQ(ErrnoOf(fs_->RenamePath("/p", "/q", kNoReplace)), EEXIST);
  ASSERT_TRUE(fs_->RenamePath("/p", "/q", kExchange).ok());
  EXPECT_EQ(ReadFile("/p"), "Q");
  EXPECT_EQ(ReadFile("/q"), "P");
}

TEST_P(FsTest, HardLinksSymlinksAndUnlinkWhileOpen) {
  WriteFile("/f", "data");
  auto f = *fs_->StatPath("/f");
  auto linked = fs_->Link(f.ino, kRootIno, "g");
  ASSERT_TRUE(linked.ok()) << linked.status().ToString();
  EXPECT_EQ(linked->nlink, 2u);
  ASSERT_TRUE(fs_->UnlinkPath("/f").ok());
  EXPECT_EQ(ReadFile("/g"), "data");
  EXPECT_EQ(fs_->StatPath("/g")->nlink, 1u);
  EXPECT_EQ(ErrnoOf(fs_->Link(kRootIno, kRootIno, "root-again").status()), EPERM);

  ASSERT_TRUE(fs_->MkdirPath("/real/dir", 0755, true).ok());
  WriteFile("/real/dir/file", "through a link");
  ASSERT_TRUE(fs_->SymlinkPath("real/dir", "/ln").ok());
  ASSERT_TRUE(fs_->SymlinkPath("/ln/file", "/abs").ok());
  EXPECT_EQ(ReadFile("/ln/file"), "through a link");
  EXPECT_EQ(ReadFile("/abs"), "through a link");
  EXPECT_EQ(fs_->StatPath("/ln")->type, FileType::kSymlink);
  EXPECT_EQ(*fs_->Readlink(fs_->StatPath("/ln")->ino), "real/dir");
  ASSERT_TRUE(fs_->SymlinkPath("/loop2", "/loop1").ok());
  ASSERT_TRUE(fs_->SymlinkPath("/loop1", "/loop2").ok());
  EXPECT_EQ(ErrnoOf(fs_->OpenPath("/loop1", kRead).status()), ELOOP);

  // Unlinked while open: the handle still reads; the data goes at its close.
  auto open = fs_->OpenPath("/g", kRead);
  ASSERT_TRUE(open.ok());
  ASSERT_TRUE(fs_->UnlinkPath("/g").ok());
  std::vector<std::byte> buf(4);
  EXPECT_EQ(*(*open)->Read(0, buf), 4u);
  EXPECT_EQ(Text(buf), "data");
  EXPECT_EQ(ErrnoOf(fs_->GetAttr(f.ino).status()), 0);  // the inode stays while open
  ASSERT_TRUE((*open)->Close().ok());
  EXPECT_EQ(ErrnoOf(fs_->GetAttr(f.ino).status()), ENOENT);
  EXPECT_EQ(ErrnoOf((*open)->Read(0, buf).status()), EBADF);
}

TEST_P(FsTest, AttributesAndXattrs) {
  WriteFile("/x", "x");
  const uint64_t ino = fs_->StatPath("/x")->ino;
  auto a = fs_->SetAttr(ino, {.mode = 0600, .uid = 1234, .gid = 99, .mtime_ns = 1'000'000'000});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->mode, 0600u);
  EXPECT_EQ(a->uid, 1234u);
  EXPECT_EQ(a->gid, 99u);
  EXPECT_EQ(fs_->GetAttr(ino)->mtime_ns, 1'000'000'000);
  ASSERT_TRUE(fs_->SetXattr(ino, "user.color", Bytes("blue")).ok());
  EXPECT_EQ(ErrnoOf(fs_->SetXattr(ino, "user.color", Bytes("red"), kXattrCreate)), EEXIST);
  EXPECT_EQ(ErrnoOf(fs_->SetXattr(ino, "user.size", Bytes("1"), kXattrReplace)), ENODATA);
  EXPECT_EQ(Text(*fs_->GetXattr(ino, "user.color")), "blue");
  EXPECT_EQ(*fs_->ListXattr(ino), (std::vector<std::string>{"user.color"}));
  EXPECT_EQ(ErrnoOf(fs_->SetXattr(ino, "user.big", std::vector<std::byte>(kMaxXattrBytes))), ENOSPC);
  ASSERT_TRUE(fs_->RemoveXattr(ino, "user.color").ok());
  EXPECT_EQ(ErrnoOf(fs_->GetXattr(ino, "user.color").status()), ENODATA);
  EXPECT_EQ(ErrnoOf(fs_->RemoveXattr(ino, "user.color")), ENODATA);
  auto stats = fs_->StatFs();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GT(stats->total_bytes, 0u);
  EXPECT_LE(stats->free_bytes, stats->total_bytes);
}

TEST_P(FsTest, RefusesBadNamesAndPaths) {
  EXPECT_EQ(ErrnoOf(fs_->MkdirPath("/" + std::string(256, 'n')).status()), ENAMETOOLONG);
  EXPECT_TRUE(fs_->MkdirPath("/" + std::string(255, 'n')).ok());
  EXPECT_EQ(ErrnoOf(fs_->Mkdir(kRootIno, "a/b", 0755, 0, 0).status()), EINVAL);
  EXPECT_EQ(ErrnoOf(fs_->Mkdir(kRootIno, "..", 0755, 0, 0).status()), EINVAL);
  EXPECT_EQ(ErrnoOf(fs_->StatPath("/" + std::string(5000, 'p')).status()), ENAMETOOLONG);
  EXPECT_EQ(ErrnoOf(fs_->MkdirPath("/").status()), EEXIST);
  EXPECT_EQ(ErrnoOf(fs_->OpenPath("/missing", kRead).status()), ENOENT);
  EXPECT_EQ(ErrnoOf(fs_->OpenPath("/", kRead).status()), EISDIR);
  // ".." of the root is the root: no escape.
  EXPECT_EQ(fs_->StatPath("/../../..")->ino, kRootIno);
  WriteFile("/w", "w");
  auto ro = fs_->OpenPath("/w", kRead);
  EXPECT_EQ(ErrnoOf((*ro)->Write(0, Bytes("no"))), EBADF);
}

TEST_P(FsTest, ConcurrentCreatesOneWinsAcrossClients) {
  auto other = ConnectAnother();
  auto fs2 = FileSystem::Open(*other, container_);
  ASSERT_TRUE(fs2.ok());
  for (int round = 0; round < 3; ++round) {
    const std::string name = "race" + std::to_string(round);
    std::atomic<int> won{0}, lost{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 6; ++i) {
      FileSystem* fs = i % 2 ? fs_.get() : fs2->get();
      threads.emplace_back([&, fs] {
        auto r = fs->Create(kRootIno, name, 0644, 0, 0, /*exclusive=*/true);
        (r.ok() ? won : lost) += r.ok() || ErrnoOf(r.status()) == EEXIST;
        if (r.ok()) EXPECT_TRUE(r->second->Close().ok());
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(won.load(), 1);
    EXPECT_EQ(lost.load(), 5);
  }
}

TEST_P(FsTest, CloseToOpenAcrossClients) {
  auto other = ConnectAnother();
  auto fs2 = *FileSystem::Open(*other, container_);
  std::string data(100 * 1000, 'q');
  auto f = *fs_->OpenPath("/shared", kWrite | kCreate);
  ASSERT_TRUE(f->Write(0, Bytes(data)).ok());
  ASSERT_TRUE(f->Close().ok());
  auto g = fs2->OpenPath("/shared", kRead);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->size(), data.size());
  std::vector<std::byte> out(data.size());
  EXPECT_EQ(*(*g)->Read(0, out), data.size());
  EXPECT_EQ(Text(out), data);
  EXPECT_EQ(fs2->StatPath("/shared")->size, data.size());
}

// A handle that created its file updates the inode at close over the version it wrote (one
// request, no lease); when another client changed the inode meanwhile, it updates it under the
// lease instead and keeps the other's change.
TEST_P(FsTest, CloseOfACreatedFileKeepsAnotherClientsChange) {
  auto other = ConnectAnother();
  auto fs2 = *FileSystem::Open(*other, container_);
  auto f = *fs_->OpenPath("/made", kWrite | kCreate, 0600);
  ASSERT_TRUE(f->Write(0, Bytes("first")).ok());
  ASSERT_TRUE(f->Flush().ok());  // over the version it created
  EXPECT_EQ(fs2->StatPath("/made")->size, 5u);
  AttrChange chmod;
  chmod.mode = 0640;
  ASSERT_TRUE(fs2->SetAttr(f->ino(), chmod).ok());
  ASSERT_TRUE(f->Write(5, Bytes(" and more")).ok());
  ASSERT_TRUE(f->Close().ok());  // the version changed: under the lease
  auto a = fs2->StatPath("/made");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size, 14u);
  EXPECT_EQ(a->mode & 07777, 0640u);
  EXPECT_EQ(ReadFile("/made"), "first and more");
}

TEST_P(FsTest, ListsLargeDirectoriesPageByPage) {
  ASSERT_TRUE(fs_->MkdirPath("/many").ok());
  const uint64_t dir = fs_->StatPath("/many")->ino;
  std::set<std::string> want;
  for (int i = 0; i < 700; ++i) {
    std::string n = "file-" + std::to_string(i);
    auto c = fs_->Create(dir, n, 0644, 0, 0, true);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE(c->second->Close().ok());
    want.insert(n);
  }
  std::set<std::string> got;
  std::string cursor;
  int pages = 0;
  do {
    auto page = fs_->ReadDir(dir, cursor, 97);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->entries.size(), 97u);
    for (auto& e : page->entries) EXPECT_TRUE(got.insert(e.name).second) << e.name;
    cursor = page->next;
    ++pages;
  } while (!cursor.empty());
  EXPECT_EQ(got, want);
  EXPECT_GE(pages, 700 / 97);
}

INSTANTIATE_TEST_SUITE_P(Schemes, FsTest, ::testing::Values("none", "rep:2"));

}  // namespace
}  // namespace penstock::fs
