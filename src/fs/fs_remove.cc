// fs_remove.cc — FileSystemImpl (file_system.h): unlink, rmdir, what goes with a last link,
// and the bookkeeping of open files that keeps an unlinked file's data until its last close.
#include <algorithm>
#include <cerrno>

#include "common/log.h"
#include "fs/file_impl.h"
#include "fs/file_system.h"
#include "fs/fs_errors.h"
#include "fs/names.h"

namespace penstock::fs {

namespace {

constexpr int kRemoveAttempts = 16;

}  // namespace

Status FileSystemImpl::Unlink(uint64_t parent, const std::string& name) {
  for (int attempt = 0; attempt < kRemoveAttempts; ++attempt) {
    PS_ASSIGN_OR_RETURN(Entry e, ReadEntry(parent, name));
    if (e.dirent.type == FileType::kDirectory) {
      return FsError(EISDIR, "'" + name + "' is a directory; remove it with rmdir");
    }
    Status s = client_.DeleteRecord(container_, DirGroup(parent), name, e.version);
    if (s.code() == StatusCode::kAborted) continue;  // renamed over or relinked meanwhile: look again
    if (s.code() == StatusCode::kNotFound) return FsError(ENOENT, "'" + name + "' was removed by another client");
    PS_RETURN_IF_ERROR(s);
    return DropLink(e.dirent.ino);
  }
  return FsError(EAGAIN, "'" + name + "' kept changing while it was being removed; try again");
}

Status FileSystemImpl::Rmdir(uint64_t parent, const std::string& name) {
  for (int attempt = 0; attempt < kRemoveAttempts; ++attempt) {
    PS_ASSIGN_OR_RETURN(Entry e, ReadEntry(parent, name));
    if (e.dirent.type != FileType::kDirectory) return FsError(ENOTDIR, "'" + name + "' is not a directory");
    PS_ASSIGN_OR_RETURN(bool empty, IsEmptyDir(e.dirent.ino));
    if (!empty) return FsError(ENOTEMPTY, "directory '" + name + "' is not empty");
    Status s = client_.DeleteRecord(container_, DirGroup(parent), name, e.version);
    if (s.code() == StatusCode::kAborted) continue;
    if (s.code() == StatusCode::kNotFound) return FsError(ENOENT, "'" + name + "' was removed by another client");
    PS_RETURN_IF_ERROR(s);
    return RemoveInode(e.dirent.ino, FileType::kDirectory);
  }
  return FsError(EAGAIN, "'" + name + "' kept changing while it was being removed; try again");
}

Result<bool> FileSystemImpl::IsEmptyDir(uint64_t dir) {
  std::string cursor;
  do {  // a page may hold only removed entries: look on until one is live or none is left
    PS_ASSIGN_OR_RETURN(RecordPage page, client_.ListRecords(container_, DirGroup(dir), cursor, 16));
    if (!page.records.empty()) return false;
    cursor = page.next;
  } while (!cursor.empty());
  return true;
}

Status FileSystemImpl::DropLink(uint64_t ino) {
  // The common case, a last link of an inode no File of ours holds: removed at the version read
  // (a link made meanwhile changes it, and the slow path below runs instead).
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
  bool open_here = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(ino);
    open_here = it != open_.end() && !it->second.files.empty();
  }
  if (v.inode.nlink <= 1 && !open_here) {
    Status s = client_.DeleteRecord(container_, kInodeGroup, InodeKey(ino), v.version);
    if (s.ok()) return RemoveData(ino, v.inode.type);
    if (s.code() == StatusCode::kNotFound) return OkStatus();
    if (s.code() != StatusCode::kAborted) return s;
  }
  auto left = UpdateInode(ino, [](Inode& i) {
    if (i.nlink > 0) --i.nlink;
    i.ctime_ns = NowNs();
    return OkStatus();
  });
  if (!left.ok() && ErrnoOf(left.status()) == ENOENT) return OkStatus();  // already gone
  PS_RETURN_IF_ERROR(left.status());
  if (left->nlink > 0) return OkStatus();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(ino);
    if (it != open_.end() && !it->second.files.empty()) {
      it->second.unlinked = true;  // the last Close removes it
      return OkStatus();
    }
  }
  return RemoveInode(ino, left->type);
}

Status FileSystemImpl::RemoveInode(uint64_t ino, FileType type) {
  if (type == FileType::kDirectory) dirs_.Forget(ino);
  Status s = client_.DeleteRecord(container_, kInodeGroup, InodeKey(ino));
  if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  return RemoveData(ino, type);
}

Status FileSystemImpl::RemoveData(uint64_t ino, FileType type) {
  if (type != FileType::kRegular) return OkStatus();
  Status s = client_.Delete(container_, DataObjectName(ino));
  return s.code() == StatusCode::kNotFound ? OkStatus() : s;
}

void FileSystemImpl::Opened(FileImpl* f) {
  std::lock_guard<std::mutex> lock(mu_);
  open_[f->ino()].files.push_back(f);
}

void FileSystemImpl::Closed(FileImpl* f) {
  bool remove = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(f->ino());
    if (it == open_.end()) return;
    std::erase(it->second.files, f);
    if (!it->second.files.empty()) return;
    remove = it->second.unlinked;
    open_.erase(it);
  }
  if (remove) {
    Status s = RemoveInode(f->ino(), FileType::kRegular);
    if (!s.ok()) PS_LOG_WARN("removing unlinked inode {} at its last close: {}", f->ino(), s.ToString());
  }
}

Status FileSystemImpl::PublishSize(uint64_t ino, uint64_t size, std::optional<VersionedInode>* known) {
  const int64_t now = NowNs();
  if (known && *known) {
    Inode i = (*known)->inode;
    i.size = size;
    i.mtime_ns = i.ctime_ns = now;
    auto v = client_.PutRecord(container_, kInodeGroup, InodeKey(ino), EncodeInode(i),
                               RecordCondition::Version((*known)->version));
    if (v.ok()) {
      *known = VersionedInode{std::move(i), *v};
      return OkStatus();
    }
    known->reset();  // changed by another writer (or gone): under the lease, as any update
    const StatusCode code = v.status().code();
    if (code != StatusCode::kAborted && code != StatusCode::kNotFound) return v.status();
  }
  auto done = UpdateInode(ino, [&](Inode& i) {
    i.size = size;
    i.mtime_ns = i.ctime_ns = now;
    return OkStatus();
  });
  if (!done.ok() && ErrnoOf(done.status()) == ENOENT) return OkStatus();  // unlinked while open
  return done.status();
}

Status FileSystemImpl::TruncateData(uint64_t ino, uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(ino);
    if (it != open_.end() && !it->second.files.empty()) {
      FileImpl* f = it->second.files.front();
      // Our own handle: its size stays right. (It may not be open for writing: the inode's
      // mode was checked by the caller, as ftruncate through FUSE does.)
      return f->TruncateAny(size);
    }
  }
  auto o = client_.Open(container_, DataObjectName(ino), {.create = size > 0});
  if (o.status().code() == StatusCode::kNotFound) return OkStatus();  // never written, cut to 0
  PS_RETURN_IF_ERROR(o.status());
  return (*o)->Truncate(size);
}

}  // namespace penstock::fs
