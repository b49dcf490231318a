// open_files_test.cc — OpenFiles: one File per inode shared by its opens, upgraded for the
// first writer, closed with the last release; attribute overlay from the open File.
#include "fuse/open_files.h"

#include <gtest/gtest.h>

namespace penstock::fuse {
namespace {

// A File that only counts: size as written, and whether it was closed.
class FakeFile : public fs::File {
 public:
  FakeFile(uint64_t ino, bool writable) : ino_(ino), writable_(writable) {}
  uint64_t ino() const override { return ino_; }
  uint64_t size() const override { return size_; }
  Result<uint64_t> Read(uint64_t, std::span<std::byte>) override { return uint64_t{0}; }
  Status Write(uint64_t offset, std::span<const std::byte> data) override {
    if (!writable_) return FailedPrecondition("EBADF: read-only");
    size_ = std::max(size_, offset + data.size());
    return OkStatus();
  }
  OpId ReadAsync(uint64_t, std::vector<IoVec>, CompletionQueue&, uint64_t) override { return 0; }
  OpId WriteAsync(uint64_t, std::vector<IoVec>, CompletionQueue&, uint64_t) override { return 0; }
  Status Truncate(uint64_t size) override {
    size_ = size;
    return OkStatus();
  }
  Status Flush() override { return OkStatus(); }
  Status Close() override {
    ++closes;
    return OkStatus();
  }
  bool writable() const { return writable_; }
  int closes = 0;

 private:
  uint64_t ino_;
  bool writable_;
  uint64_t size_ = 0;
};

struct Opener {
  std::vector<std::shared_ptr<FakeFile>> made;
  OpenFiles::OpenFn Fn(uint64_t ino) {
    return [this, ino](bool w) -> Result<std::shared_ptr<fs::File>> {
      made.push_back(std::make_shared<FakeFile>(ino, w));
      return std::shared_ptr<fs::File>(made.back());
    };
  }
};

TEST(OpenFiles, OpensShareOneFileClosedByTheLastRelease) {
  OpenFiles files;
  Opener op;
  auto a = files.Acquire(7, false, op.Fn(7));
  auto b = files.Acquire(7, false, op.Fn(7));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(op.made.size(), 1u);
  EXPECT_EQ((*a)->file(), (*b)->file());
  EXPECT_TRUE(files.Release(*a).ok());
  EXPECT_EQ(op.made[0]->closes, 0);
  EXPECT_NE(files.Find(7), nullptr);
  EXPECT_TRUE(files.Release(*b).ok());
  EXPECT_EQ(op.made[0]->closes, 1);
  EXPECT_EQ(files.Find(7), nullptr);
}

TEST(OpenFiles, FirstWriterReplacesReadOnlyFileForEveryHandle) {
  OpenFiles files;
  Opener op;
  auto reader = files.Acquire(3, false, op.Fn(3)).value();
  auto writer = files.Acquire(3, true, op.Fn(3)).value();
  ASSERT_EQ(op.made.size(), 2u);
  EXPECT_TRUE(op.made[1]->writable());
  EXPECT_EQ(reader->file(), writer->file());  // the reader now sees the writer's bytes
  auto reader2 = files.Acquire(3, false, op.Fn(3)).value();
  EXPECT_EQ(op.made.size(), 2u);  // writable serves readers too
  ASSERT_TRUE(writer->file()->Write(0, std::vector<std::byte>(100)).ok());
  fs::Attr attr{.ino = 3, .size = 0, .mtime_ns = 1};
  files.Overlay(attr);
  EXPECT_EQ(attr.size, 100u);
  for (auto& n : {reader, writer, reader2}) EXPECT_TRUE(files.Release(n).ok());
  EXPECT_EQ(op.made[1]->closes, 1);
}

TEST(OpenFiles, FailedOpenLeavesNothingAndAdoptKeepsTheOpenFile) {
  OpenFiles files;
  auto failed = files.Acquire(9, true, [](bool) -> Result<std::shared_ptr<fs::File>> {
    return NotFound("ENOENT: inode 9");
  });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(files.Find(9), nullptr);

  Opener op;
  auto open = files.Acquire(4, true, op.Fn(4)).value();
  auto spare = std::make_shared<FakeFile>(4, true);
  auto adopted = files.Adopt(4, spare);
  EXPECT_EQ(adopted->file(), open->file());
  EXPECT_EQ(spare->closes, 1);  // the racing create's handle is closed, the open one kept
  EXPECT_TRUE(files.Release(open).ok());
  EXPECT_TRUE(files.Release(adopted).ok());
  EXPECT_EQ(op.made[0]->closes, 1);
}

TEST(OpenFiles, OverlayKeepsTheLastAttributesAndLatestWriteTime) {
  OpenFiles files;
  Opener op;
  auto node = files.Acquire(5, true, op.Fn(5)).value();
  fs::Attr attr{.ino = 5, .mode = 0640, .size = 0, .mtime_ns = 10};
  node->NoteWrite();
  files.Overlay(attr);
  EXPECT_GT(attr.mtime_ns, 10);
  ASSERT_TRUE(node->LastAttr().has_value());
  EXPECT_EQ(node->LastAttr()->mode, 0640u);
  fs::Attr other{.ino = 6, .size = 42};
  files.Overlay(other);  // not open here: untouched
  EXPECT_EQ(other.size, 42u);
  EXPECT_TRUE(files.Release(node).ok());
}

}  // namespace
}  // namespace penstock::fuse
