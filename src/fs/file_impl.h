// file_impl.h — an open regular file (fs.h File) over the file's data object.
//
// The object is opened on first use: a file created by this handle is opened as a replace-open
// (nothing sent until its first write, which for a small file stores it in its head), an
// existing one as a plain open; a file that was never written has no object and reads as
// empty. Reads and writes go straight to the Object. The size is the object's (this handle's
// writes included); Flush publishes it to the inode when this handle wrote or truncated.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>


#include "fs/inode.h"
#include "penstock/fs.h"
#include "penstock/object_io.h"

namespace penstock::fs {

class FileSystemImpl;

class FileImpl : public File {
 public:
  // `fresh`: the inode was just created by this FileSystem (no object can exist yet);
  // `known`: the inode as written then (Flush updates it over that version).
  FileImpl(FileSystemImpl* fs, uint64_t ino, unsigned flags, uint64_t size, bool fresh,
           std::optional<VersionedInode> known = std::nullopt);
  ~FileImpl() override;

  uint64_t ino() const override { return ino_; }
  uint64_t size() const override;
  Result<uint64_t> Read(uint64_t offset, std::span<std::byte> out) override;
  Status Write(uint64_t offset, std::span<const std::byte> data) override;
  OpId ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data) override;
  OpId WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data) override;
  Status Truncate(uint64_t size) override;
  Status Flush() override;
  Status Close() override;

  // Truncate without the check that this handle is open for writing (SetAttr of the inode).
  Status TruncateAny(uint64_t size);
  // Whether this handle changed the file since its last Flush.
  bool dirty() const { return dirty_; }

 private:
  // The data object (nullptr, OK: none exists and `create` is false). EBADF once closed.
  Result<std::shared_ptr<Object>> Obj(bool create);
  Status Usable(unsigned need) const;
  // Delivers `s` as the completion of an async call that failed before it started.
  static OpId Fail(CompletionQueue& cq, uint64_t user_data, Status s);

  FileSystemImpl* const fs_;
  const uint64_t ino_;
  const unsigned flags_;
  mutable std::mutex mu_;
  std::shared_ptr<Object> obj_;
  bool fresh_;
  uint64_t size_;  // until the object is open
  std::atomic<bool> dirty_{false};
  std::atomic<bool> closed_{false};
  std::mutex flush_mu_;                  // one Flush at a time: it owns known_
  std::optional<VersionedInode> known_;  // the inode as this handle last wrote it
};

}  // namespace penstock::fs
