// file_impl.cc — see file_impl.h.
#include "fs/file_impl.h"

#include <cerrno>
#include <cstring>

#include "client/completion_queue_access.h"
#include "common/log.h"
#include "fs/file_system.h"
#include "fs/fs_errors.h"
#include "fs/inode.h"

namespace penstock::fs {

FileImpl::FileImpl(FileSystemImpl* fs, uint64_t ino, unsigned flags, uint64_t size, bool fresh,
                   std::optional<VersionedInode> known)
    : fs_(fs), ino_(ino), flags_(flags), fresh_(fresh), size_(size), known_(std::move(known)) {
  fs_->Opened(this);
}

FileImpl::~FileImpl() {
  Status s = Close();
  if (!s.ok() && ErrnoOf(s) != EBADF) PS_LOG_WARN("closing inode {}: {}", ino_, s.ToString());
}

uint64_t FileImpl::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return obj_ ? obj_->size() : size_;
}

Status FileImpl::Usable(unsigned need) const {
  if (closed_) return FsError(EBADF, "inode " + std::to_string(ino_) + "'s file handle is closed");
  if ((flags_ & need) != need) {
    return FsError(EBADF, std::string("inode ") + std::to_string(ino_) + " is not open for " +
                              (need & kWrite ? "writing" : "reading"));
  }
  return OkStatus();
}

Result<std::shared_ptr<Object>> FileImpl::Obj(bool create) {
  std::lock_guard<std::mutex> lock(mu_);
  if (obj_ || (!create && fresh_)) return obj_;
  Client& c = fs_->client();
  const std::string name = DataObjectName(ino_);
  if (fresh_) {
    PS_ASSIGN_OR_RETURN(obj_, c.Open(fs_->container(), name, {.replace = true}));
    return obj_;
  }
  auto opened = c.Open(fs_->container(), name, {.create = create});
  if (!create && opened.status().code() == StatusCode::kNotFound) return std::shared_ptr<Object>();
  PS_RETURN_IF_ERROR(opened.status());
  obj_ = std::move(*opened);
  return obj_;
}

Result<uint64_t> FileImpl::Read(uint64_t offset, std::span<std::byte> out) {
  PS_RETURN_IF_ERROR(Usable(kRead));
  PS_ASSIGN_OR_RETURN(std::shared_ptr<Object> o, Obj(false));
  uint64_t n = 0;
  if (o) {
    PS_ASSIGN_OR_RETURN(n, o->Read(offset, out));
  }
  // Past the object's bytes but within the file (grown by a truncate): zeros.
  const uint64_t end = std::min<uint64_t>(size(), offset + out.size());
  if (offset + n < end) {
    std::memset(out.data() + n, 0, end - offset - n);
    n = end - offset;
  }
  return n;
}

Status FileImpl::Write(uint64_t offset, std::span<const std::byte> data) {
  PS_RETURN_IF_ERROR(Usable(kWrite));
  PS_ASSIGN_OR_RETURN(std::shared_ptr<Object> o, Obj(true));
  dirty_ = true;
  if (flags_ & kAppend) return o->Append(data).status();
  return o->Write(offset, data);
}

OpId FileImpl::Fail(CompletionQueue& cq, uint64_t user_data, Status s) {
  CompletionQueueAccess::Started(cq);
  CompletionQueueAccess::Complete(cq, IoCompletion{user_data, std::move(s), 0});
  return 0;
}

OpId FileImpl::ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data) {
  if (Status s = Usable(kRead); !s.ok()) return Fail(cq, user_data, s);
  auto o = Obj(false);
  if (!o.ok()) return Fail(cq, user_data, o.status());
  if (!*o) return Fail(cq, user_data, OkStatus());  // never written: empty
  return (*o)->ReadAsync(offset, std::move(iov), cq, user_data);
}

OpId FileImpl::WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data) {
  if (Status s = Usable(kWrite); !s.ok()) return Fail(cq, user_data, s);
  auto o = Obj(true);
  if (!o.ok()) return Fail(cq, user_data, o.status());
  dirty_ = true;
  return (*o)->WriteAsync(offset, std::move(iov), cq, user_data);
}

Status FileImpl::Truncate(uint64_t size) {
  PS_RETURN_IF_ERROR(Usable(kWrite));
  return TruncateAny(size);
}

Status FileImpl::TruncateAny(uint64_t size) {
  PS_RETURN_IF_ERROR(Usable(0));
  PS_ASSIGN_OR_RETURN(std::shared_ptr<Object> o, Obj(size > 0));
  if (o) {
    PS_RETURN_IF_ERROR(o->Truncate(size));
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    size_ = size;
  }
  dirty_ = true;
  return OkStatus();
}

Status FileImpl::Flush() {
  if (closed_) return FsError(EBADF, "inode " + std::to_string(ino_) + "'s file handle is closed");
  std::lock_guard<std::mutex> lock(flush_mu_);
  if (!dirty_.exchange(false)) return OkStatus();
  Status s = fs_->PublishSize(ino_, size(), &known_);
  if (!s.ok()) dirty_ = true;
  return s;
}

Status FileImpl::Close() {
  if (closed_) return FsError(EBADF, "inode " + std::to_string(ino_) + "'s file handle is closed");
  Status s = Flush();
  closed_ = true;
  fs_->Closed(this);
  return s;
}

}  // namespace penstock::fs
