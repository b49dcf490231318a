#include "engine/file_device.h"

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "common/buffer.h"
#include "common/log.h"

namespace penstock::engine {
namespace {

constexpr size_t kMaxIoBytes = 1u << 30;  // one SQE moves at most this much

std::string ParentDir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// open(2) with O_DIRECT, retried without it where the filesystem refuses (EINVAL).
int OpenMaybeDirect(const std::string& path, int flags, bool& direct) {
  int fd = ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644);
  direct = true;
  if (fd < 0 && errno == EINVAL) {
    PS_LOG_WARN("{}: the filesystem does not support O_DIRECT; using buffered I/O with "
                "RWF_DSYNC (slower, and data passes through the page cache)", path);
    direct = false;
    // An older kernel may have created the file before refusing O_DIRECT: drop O_EXCL.
    fd = ::open(path.c_str(), (flags & ~O_EXCL) | O_CLOEXEC, 0644);
  }
  return fd;
}

// Writes zeros over [0, size) of `fd`; 0, or -1 with errno set.
int ZeroFill(int fd, uint64_t size) {
  AlignedBuffer zeros(8 << 20);
  std::memset(zeros.data(), 0, zeros.capacity());
  for (uint64_t at = 0; at < size; at += zeros.capacity()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.capacity(), size - at));
    ssize_t done = ::pwrite(fd, zeros.data(), n, static_cast<off_t>(at));
    if (done < 0) return -1;
    if (static_cast<size_t>(done) != n) {
      errno = ENOSPC;
      return -1;
    }
  }
  return 0;
}

}  // namespace

Status Device::WriteAll(std::span<DeviceWrite> writes, bool sync) {
  Status first;
  for (DeviceWrite& w : writes) {
    w.status = WriteUnsynced(w.offset, w.data);
    if (first.ok() && !w.status.ok()) first = w.status;
  }
  if (sync) {
    Status synced = Sync();
    if (first.ok()) first = synced;
  }
  return first;
}

Status Device::ReadAll(std::span<const DeviceRead> reads) {
  for (const DeviceRead& r : reads) PS_RETURN_IF_ERROR(Read(r.offset, r.out));
  return OkStatus();
}

Status CheckDeviceRange(const Device& device, uint64_t offset, size_t length, const void* buffer) {
  if (offset % kDeviceBlockSize != 0 || length % kDeviceBlockSize != 0 ||
      reinterpret_cast<uintptr_t>(buffer) % kDeviceBlockSize != 0) {
    return InvalidArgument(fmt::format("{}: I/O at offset {} length {} is not 4 KiB aligned "
                                       "(engine bug)", device.name(), offset, length));
  }
  if (offset > device.size() || length > device.size() - offset) {
    return InvalidArgument(fmt::format("{}: I/O at offset {} length {} is beyond the device "
                                       "size {} (engine bug)", device.name(), offset, length,
                                       device.size()));
  }
  return OkStatus();
}

Result<std::unique_ptr<FileDevice>> FileDevice::Open(const std::string& path,
                                                     uint64_t create_bytes,
                                                     unsigned queue_depth, bool zero_fill) {
  if (path.empty()) return InvalidArgument("data_path is empty; set it to a file or block device");
  bool direct = true;
  int fd = OpenMaybeDirect(path, O_RDWR, direct);
  bool created = false;
  if (fd < 0 && errno == ENOENT) {
    fd = OpenMaybeDirect(path, O_RDWR | O_CREAT | O_EXCL, direct);
    if (fd < 0) {
      int err = errno;
      return ErrnoStatus(err, fmt::format("cannot create data file '{}' (directory '{}' must "
                                          "exist and be writable by this user; create it or "
                                          "point data_path elsewhere)", path, ParentDir(path)));
    }
    created = true;
  } else if (fd < 0) {
    int err = errno;
    return ErrnoStatus(err, fmt::format("cannot open data path '{}' read-write (check it exists "
                                        "and this user may write it)", path));
  }
  auto fail = [&](Status s) {
    ::close(fd);
    if (created) ::unlink(path.c_str());
    return s;
  };

  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      return fail(Unavailable(fmt::format("data path '{}' is in use by another engine; stop it "
                                          "first", path)));
    }
    return fail(ErrnoStatus(err, fmt::format("flock '{}'", path)));
  }

  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(ErrnoStatus(errno, fmt::format("fstat '{}'", path)));
  uint64_t size = 0;
  if (S_ISBLK(st.st_mode)) {
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      return fail(ErrnoStatus(errno, fmt::format("ioctl BLKGETSIZE64 on '{}'", path)));
    }
  } else if (S_ISREG(st.st_mode)) {
    if (created) {
      size = create_bytes / kDeviceBlockSize * kDeviceBlockSize;
      if (size == 0) return fail(InvalidArgument("capacity_bytes must be at least 4 KiB"));
      int rc = zero_fill ? ZeroFill(fd, size) : ::fallocate(fd, 0, 0, static_cast<off_t>(size));
      if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
        rc = ::ftruncate(fd, static_cast<off_t>(size));  // sparse, but usable
      }
      if (rc != 0) {
        int err = errno;
        return fail(ErrnoStatus(err, fmt::format("cannot preallocate {} bytes for data file '{}'"
                                                 " (free space on its filesystem or lower "
                                                 "capacity_bytes)", size, path)));
      }
      if (::fsync(fd) != 0) return fail(ErrnoStatus(errno, fmt::format("fsync '{}'", path)));
      // Make the new directory entry durable too.
      int dir = ::open(ParentDir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir >= 0) {
        (void)::fsync(dir);
        ::close(dir);
      }
    } else {
      size = static_cast<uint64_t>(st.st_size);
    }
  } else {
    return fail(InvalidArgument(fmt::format("data path '{}' is neither a regular file nor a "
                                            "block device", path)));
  }
  size = size / kDeviceBlockSize * kDeviceBlockSize;

  auto ring = IoRing::Create(queue_depth);
  if (!ring.ok()) return fail(ring.status().WithContext(path));
  return std::unique_ptr<FileDevice>(new FileDevice(path, fd, size, direct, std::move(*ring)));
}

FileDevice::~FileDevice() {
  ring_.reset();  // before the fd it uses
  ::close(fd_);
}

Status FileDevice::Write(uint64_t offset, std::span<const std::byte> data) {
  return WriteWithFlags(offset, data, RWF_DSYNC);
}

Status FileDevice::WriteUnsynced(uint64_t offset, std::span<const std::byte> data) {
  return WriteWithFlags(offset, data, 0);
}

Status FileDevice::WriteWithFlags(uint64_t offset, std::span<const std::byte> data,
                                  int rw_flags) {
  PS_RETURN_IF_ERROR(CheckDeviceRange(*this, offset, data.size(), data.data()));
  size_t done = 0;
  while (done < data.size()) {
    size_t chunk = std::min(data.size() - done, kMaxIoBytes);
    int64_t rc = ring_->WriteAt(fd_, offset + done, data.data() + done, chunk, rw_flags);
    if (rc < 0) {
      return ErrnoStatus(static_cast<int>(-rc),
                         fmt::format("write {} bytes at offset {} of '{}'", chunk, offset + done,
                                     path_));
    }
    if (rc == 0) return Internal(fmt::format("write at offset {} of '{}' made no progress",
                                             offset + done, path_));
    done += static_cast<size_t>(rc);
  }
  return OkStatus();
}

namespace {

class FilePendingWrites final : public Device::PendingWrites {
 public:
  std::span<DeviceWrite> writes;
  bool sync = false;
  std::vector<IoRing::Write> io;
  std::vector<size_t> which;  // writes[which[i]] is io[i]
  std::unique_ptr<IoRing::PendingWrites> ring;
};

// Adds the writes of `writes` past those `p` has (the array may have moved) to p's.
void AddWrites(const Device& device, FilePendingWrites& p, std::span<DeviceWrite> writes) {
  const size_t from = p.writes.size();
  p.writes = writes;
  for (size_t i = from; i < writes.size(); ++i) {
    DeviceWrite& w = writes[i];
    w.status = CheckDeviceRange(device, w.offset, w.data.size(), w.data.data());
    if (!w.status.ok() || w.data.empty()) continue;
    p.io.push_back({.offset = w.offset, .buf = w.data.data(), .length = w.data.size(), .result = 0});
    p.which.push_back(i);
  }
}

}  // namespace

std::unique_ptr<Device::PendingWrites> FileDevice::StartWriteAll(std::span<DeviceWrite> writes, bool sync) {
  return ContinueWriteAll(StartEarlyWrites({}), writes, sync);
}

std::unique_ptr<Device::PendingWrites> FileDevice::StartEarlyWrites(std::span<DeviceWrite> writes) {
  auto p = std::make_unique<FilePendingWrites>();
  AddWrites(*this, *p, writes);
  p->ring = ring_->StartEarlyWrites(fd_, p->io);
  return p;
}

std::unique_ptr<Device::PendingWrites> FileDevice::ContinueWriteAll(std::unique_ptr<PendingWrites> early,
                                                                    std::span<DeviceWrite> writes, bool sync) {
  if (!early) return StartWriteAll(writes, sync);
  auto& p = static_cast<FilePendingWrites&>(*early);
  p.sync = sync;
  AddWrites(*this, p, writes);  // may move `io`: the ring takes the new array (it has reaped nothing yet)
  ring_->ContinueWriteAll(*p.ring, p.io, sync);
  return early;
}

Status FileDevice::FinishWriteAll(std::unique_ptr<PendingWrites> pending) {
  auto& p = static_cast<FilePendingWrites&>(*pending);
  int synced = ring_->FinishWriteAll(std::move(p.ring));
  for (size_t i = 0; i < p.io.size(); ++i) {
    DeviceWrite& w = p.writes[p.which[i]];
    if (p.io[i].result < 0) {
      w.status = ErrnoStatus(static_cast<int>(-p.io[i].result),
                             fmt::format("write {} bytes at offset {} of '{}'", w.data.size(),
                                         w.offset, path_));
    } else if (static_cast<size_t>(p.io[i].result) != w.data.size()) {
      // Short: finish it the slow way (does not happen for aligned O_DIRECT writes in practice).
      const size_t done = static_cast<size_t>(p.io[i].result);
      w.status = WriteWithFlags(w.offset + done, w.data.subspan(done), 0);
      // The remainder needs a flush of its own; a flush that already failed stays failed.
      if (w.status.ok() && p.sync && synced == 0) synced = ::fdatasync(fd_) == 0 ? 0 : -errno;
    }
  }
  Status first;
  for (const DeviceWrite& w : p.writes) {
    if (first.ok() && !w.status.ok()) first = w.status;
  }
  if (first.ok() && synced < 0) first = ErrnoStatus(-synced, fmt::format("fdatasync '{}'", path_));
  return first;
}

Status FileDevice::WriteAll(std::span<DeviceWrite> writes, bool sync) {
  return FinishWriteAll(StartWriteAll(writes, sync));
}

Status FileDevice::Read(uint64_t offset, std::span<std::byte> out) {
  PS_RETURN_IF_ERROR(CheckDeviceRange(*this, offset, out.size(), out.data()));
  size_t done = 0;
  while (done < out.size()) {
    size_t chunk = std::min(out.size() - done, kMaxIoBytes);
    int64_t rc = ring_->ReadAt(fd_, offset + done, out.data() + done, chunk);
    if (rc < 0) {
      return ErrnoStatus(static_cast<int>(-rc),
                         fmt::format("read {} bytes at offset {} of '{}'", chunk, offset + done,
                                     path_));
    }
    if (rc == 0) {
      return DataLoss(fmt::format("'{}' ends at offset {}, before its expected size {}; was the "
                                  "file truncated?", path_, offset + done, size_));
    }
    done += static_cast<size_t>(rc);
  }
  return OkStatus();
}

Status FileDevice::ReadAll(std::span<const DeviceRead> reads) {
  if (reads.size() == 1) return Read(reads[0].offset, reads[0].out);
  std::vector<IoRing::Read> ring_reads;
  ring_reads.reserve(reads.size());
  for (const DeviceRead& r : reads) {
    PS_RETURN_IF_ERROR(CheckDeviceRange(*this, r.offset, r.out.size(), r.out.data()));
    if (r.out.size() > kMaxIoBytes) return Device::ReadAll(reads);  // Read splits it
    ring_reads.push_back({.offset = r.offset, .buf = r.out.data(), .length = r.out.size()});
  }
  ring_->ReadAll(fd_, ring_reads);
  for (size_t i = 0; i < reads.size(); ++i) {
    const int64_t rc = ring_reads[i].result;
    const DeviceRead& r = reads[i];
    if (rc < 0) {
      return ErrnoStatus(static_cast<int>(-rc),
                         fmt::format("read {} bytes at offset {} of '{}'", r.out.size(), r.offset, path_));
    }
    const size_t got = static_cast<size_t>(rc);
    if (got < r.out.size()) PS_RETURN_IF_ERROR(Read(r.offset + got, r.out.subspan(got)));  // short: the rest
  }
  return OkStatus();
}

bool FileDevice::ReadAsync(uint64_t offset, std::span<std::byte> out, std::function<void(Status)>& done) {
  if (Status bad = CheckDeviceRange(*this, offset, out.size(), out.data()); !bad.ok()) {
    done(std::move(bad));
    return true;
  }
  if (out.size() > kMaxIoBytes) return false;
  // The callback owns `done` once the ring took the read; until then it stays the caller's.
  auto finish = std::make_shared<std::function<void(Status)>>();
  IoRing::ReadDone reaped = [this, offset, out, finish](int64_t rc) {
    Status s;
    if (rc < 0) {
      s = ErrnoStatus(static_cast<int>(-rc), fmt::format("read {} bytes at offset {} of '{}'", out.size(), offset, path_));
    } else if (static_cast<size_t>(rc) < out.size()) {  // short: read the rest here
      const size_t got = static_cast<size_t>(rc);
      s = Read(offset + got, out.subspan(got));
    }
    (*finish)(std::move(s));
  };
  *finish = std::move(done);
  if (ring_->ReadAsync(fd_, offset, out.data(), out.size(), reaped)) return true;
  done = std::move(*finish);
  return false;
}

Status FileDevice::Sync() {
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, fmt::format("fdatasync '{}'", path_));
  return OkStatus();
}

Result<std::vector<DeviceRange>> FileDevice::UnwrittenRanges(uint64_t offset, uint64_t length) {
  std::vector<DeviceRange> out;
  const uint64_t end = std::min(size_, offset + length);
  // Adds [from, to) rounded out to whole blocks and clipped to the query.
  auto add = [&](uint64_t from, uint64_t to) {
    from = std::max(offset, from / kDeviceBlockSize * kDeviceBlockSize);
    to = std::min(end, (to + kDeviceBlockSize - 1) / kDeviceBlockSize * kDeviceBlockSize);
    if (from >= to) return;
    if (!out.empty() && out.back().offset + out.back().length >= from) {
      out.back().length = std::max(out.back().offset + out.back().length, to) - out.back().offset;
    } else {
      out.push_back({from, to - from});
    }
  };
  constexpr uint32_t kExtentsPerCall = 256;
  std::vector<std::byte> buf(sizeof(fiemap) + kExtentsPerCall * sizeof(fiemap_extent));
  auto* map = reinterpret_cast<fiemap*>(buf.data());
  uint64_t at = offset;  // everything before `at` is classified
  while (at < end) {
    std::memset(buf.data(), 0, buf.size());
    map->fm_start = at;
    map->fm_length = end - at;
    map->fm_extent_count = kExtentsPerCall;
    if (::ioctl(fd_, FS_IOC_FIEMAP, map) != 0) {
      // A block device, or a filesystem that cannot map extents (tmpfs): nothing to tell.
      if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL) return std::vector<DeviceRange>{};
      return ErrnoStatus(errno, fmt::format("FIEMAP on '{}'", path_));
    }
    if (map->fm_mapped_extents == 0) {  // a hole to the end
      add(at, end);
      break;
    }
    bool last = false;
    for (uint32_t i = 0; i < map->fm_mapped_extents; ++i) {
      const fiemap_extent& x = map->fm_extents[i];
      if (x.fe_logical > at) add(at, x.fe_logical);  // a hole before it
      if (x.fe_flags & FIEMAP_EXTENT_UNWRITTEN) add(x.fe_logical, x.fe_logical + x.fe_length);
      at = std::max<uint64_t>(at, x.fe_logical + x.fe_length);
      last = last || (x.fe_flags & FIEMAP_EXTENT_LAST) != 0;
    }
    if (last) {
      add(at, end);  // past the file's last extent: a hole
      break;
    }
  }
  return out;
}

}  // namespace penstock::engine
