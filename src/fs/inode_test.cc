// The file system's record encodings and name checks (pure functions).
#include <gtest/gtest.h>

#include <cerrno>

#include "fs/inode.h"
#include "fs/names.h"

namespace penstock::fs {
namespace {

TEST(InodeTest, RoundTripsAndRefusesDamage) {
  Inode i;
  i.ino = 77;
  i.type = FileType::kSymlink;
  i.mode = 0640;
  i.uid = 1000;
  i.gid = 100;
  i.nlink = 3;
  i.size = 12345;
  i.atime_ns = -5;
  i.mtime_ns = 1'700'000'000'000'000'000;
  i.ctime_ns = 42;
  i.parent = 9;
  i.target = "../somewhere/else";
  i.xattrs["user.a"] = {std::byte{1}, std::byte{2}};
  i.xattrs["user.empty"] = {};
  auto bytes = EncodeInode(i);
  auto back = DecodeInode(bytes, 77);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, i);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_EQ(DecodeInode({bytes.data(), cut}, 77).status().code(), StatusCode::kDataLoss) << cut;
  }
  bytes.push_back(std::byte{0});
  EXPECT_EQ(DecodeInode(bytes, 77).status().code(), StatusCode::kDataLoss);
  bytes.pop_back();
  bytes[1] = std::byte{9};  // no such type
  EXPECT_EQ(DecodeInode(bytes, 77).status().code(), StatusCode::kDataLoss);

  Dirent d{0xfeedbeef, FileType::kDirectory};
  auto db = EncodeDirent(d);
  EXPECT_EQ(*DecodeDirent(db), d);
  db.pop_back();
  EXPECT_EQ(DecodeDirent(db).status().code(), StatusCode::kDataLoss);
}

TEST(NamesTest, ChecksNamesAndSplitsPaths) {
  EXPECT_TRUE(CheckName("a.txt").ok());
  EXPECT_EQ(ErrnoOf(CheckName(std::string(256, 'x'))), ENAMETOOLONG);
  EXPECT_TRUE(CheckName(std::string(255, 'x')).ok());
  EXPECT_EQ(ErrnoOf(CheckName("a/b")), EINVAL);
  EXPECT_EQ(ErrnoOf(CheckName("..")), EINVAL);
  EXPECT_EQ(ErrnoOf(CheckName("")), EINVAL);
  EXPECT_EQ(*SplitPath("/a//b/./c/"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(*SplitPath("a/../b"), (std::vector<std::string>{"a", "..", "b"}));
  EXPECT_TRUE(SplitPath("/")->empty());
  EXPECT_EQ(ErrnoOf(SplitPath(std::string(4097, 'a')).status()), ENAMETOOLONG);
  EXPECT_EQ(ErrnoOf(SplitPath("/ok/" + std::string(256, 'a')).status()), ENAMETOOLONG);
  EXPECT_EQ(ErrnoOf(Status(StatusCode::kNotFound, "x")), ENOENT);
  EXPECT_EQ(ErrnoOf(OkStatus()), 0);
}

}  // namespace
}  // namespace penstock::fs
