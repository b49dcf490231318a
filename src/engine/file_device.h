// file_device.h — a Device over a regular file or a block device, driven by io_uring.
//
// Opened with O_DIRECT (page cache bypassed); Write carries RWF_DSYNC so each is durable when
// it completes; WriteUnsynced does not, and Sync (fdatasync) makes it durable. WriteAll submits
// its writes in one io_uring call and then calls fdatasync (IoRing::WriteAll; StartWriteAll
// leaves the writes in flight, FinishWriteAll waits for them and flushes). A filesystem that refuses O_DIRECT (tmpfs) gets buffered I/O with the same
// RWF_DSYNC durability, and a warning in the log. A missing file is created and preallocated
// (fallocate, or zero-filled) to the requested size; a block device's size comes from BLKGETSIZE64. The file
// is locked (flock) so a second engine cannot open it at the same time.
//
// Thread safety: all methods may be called from any number of threads at once (see Device).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/device.h"
#include "engine/io_ring.h"

namespace penstock::engine {

class FileDevice final : public Device {
 public:
  // Opens `path`, creating a file of `create_bytes` (rounded down to 4 KiB) if it is absent.
  // Errors name the path and the fix: kPermissionDenied (directory not writable),
  // kResourceExhausted (no room to preallocate), kUnavailable (in use by another engine),
  // kInvalidArgument (not a file or block device, or too small).
  // With `zero_fill`, a new file is filled with zeros (written, at disk bandwidth) instead of
  // fallocated: on ext4 and xfs a fallocated range is "unwritten", so the first write to each
  // block changes file metadata and the flush after it commits the filesystem journal.
  static Result<std::unique_ptr<FileDevice>> Open(const std::string& path, uint64_t create_bytes,
                                                  unsigned queue_depth, bool zero_fill = false);
  ~FileDevice() override;

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return path_; }
  Status Write(uint64_t offset, std::span<const std::byte> data) override;
  Status WriteUnsynced(uint64_t offset, std::span<const std::byte> data) override;
  Status WriteAll(std::span<DeviceWrite> writes, bool sync) override;
  std::unique_ptr<PendingWrites> StartWriteAll(std::span<DeviceWrite> writes, bool sync) override;
  Status FinishWriteAll(std::unique_ptr<PendingWrites> pending) override;
  std::unique_ptr<PendingWrites> StartEarlyWrites(std::span<DeviceWrite> writes) override;
  std::unique_ptr<PendingWrites> ContinueWriteAll(std::unique_ptr<PendingWrites> early,
                                                  std::span<DeviceWrite> writes, bool sync) override;
  Status Read(uint64_t offset, std::span<std::byte> out) override;
  // Through IoRing::ReadAll (one lane, the reads queued together).
  Status ReadAll(std::span<const DeviceRead> reads) override;
  // Through IoRing::ReadAsync; a short read is finished synchronously on the completion thread.
  bool ReadAsync(uint64_t offset, std::span<std::byte> out, std::function<void(Status)>& done) override;
  Status Sync() override;
  // From FIEMAP: unwritten extents and holes of a regular file; empty for a block device or a
  // filesystem without FIEMAP.
  Result<std::vector<DeviceRange>> UnwrittenRanges(uint64_t offset, uint64_t length) override;

  // False when the filesystem refused O_DIRECT and the device fell back to buffered I/O.
  bool direct() const { return direct_; }

 private:
  FileDevice(std::string path, int fd, uint64_t size, bool direct, std::unique_ptr<IoRing> ring)
      : path_(std::move(path)), fd_(fd), size_(size), direct_(direct), ring_(std::move(ring)) {}
  Status WriteWithFlags(uint64_t offset, std::span<const std::byte> data, int rw_flags);

  const std::string path_;
  const int fd_;
  const uint64_t size_;
  const bool direct_;
  std::unique_ptr<IoRing> ring_;
};

}  // namespace penstock::engine
