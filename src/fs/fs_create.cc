// fs_create.cc — FileSystemImpl (file_system.h): new inodes and names (mkdir, create,
// symlink, link) and opening files.
#include <cerrno>
#include <random>

#include "common/log.h"
#include "fs/file_impl.h"
#include "fs/file_system.h"
#include "fs/fs_errors.h"
#include "fs/names.h"

namespace penstock::fs {

namespace {

// A fresh inode number: random, so that clients need not agree on a counter (never 0 or the root's).
uint64_t NewIno() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  for (;;) {
    uint64_t n = rng();
    if (n > kRootIno) return n;
  }
}

Inode NewInode(FileType type, uint32_t mode, uint32_t uid, uint32_t gid) {
  Inode i;
  i.type = type;
  i.mode = mode & 07777;
  i.uid = uid;
  i.gid = gid;
  return i;
}

}  // namespace

Result<Inode> FileSystemImpl::AddNew(uint64_t parent, const std::string& name, Inode inode, bool parent_checked,
                                     uint64_t* version) {
  PS_RETURN_IF_ERROR(CheckName(name));
  if (!parent_checked) PS_RETURN_IF_ERROR(CheckDirectory(parent));
  inode.ino = NewIno();
  inode.atime_ns = inode.mtime_ns = inode.ctime_ns = NowNs();
  if (inode.type == FileType::kDirectory) inode.parent = parent;
  const std::string key = InodeKey(inode.ino);
  PS_ASSIGN_OR_RETURN(uint64_t written,
                      client_.PutRecord(container_, kInodeGroup, key, EncodeInode(inode), RecordCondition::Blind()));
  if (version) *version = written;
  auto entry = client_.PutRecord(container_, DirGroup(parent), name, EncodeDirent({inode.ino, inode.type}),
                                 RecordCondition::Create());
  if (!entry.ok()) {
    Status undo = client_.DeleteRecord(container_, kInodeGroup, key);
    if (!undo.ok()) PS_LOG_WARN("inode {} is left without a name: {}", inode.ino, undo.ToString());
    if (entry.status().code() == StatusCode::kAlreadyExists) {
      return FsError(EEXIST, "'" + name + "' exists in directory " + std::to_string(parent));
    }
    return entry.status();
  }
  return inode;
}

Result<Attr> FileSystemImpl::Mkdir(uint64_t parent, const std::string& name, uint32_t mode, uint32_t uid,
                                   uint32_t gid) {
  PS_ASSIGN_OR_RETURN(Inode made, AddNew(parent, name, NewInode(FileType::kDirectory, mode, uid, gid)));
  return made.ToAttr();
}

Result<std::pair<Attr, std::shared_ptr<File>>> FileSystemImpl::Create(uint64_t parent, const std::string& name,
                                                                      uint32_t mode, uint32_t uid, uint32_t gid,
                                                                      bool exclusive) {
  auto made = CreateIn(parent, name, mode, uid, gid, /*parent_checked=*/false);
  if (made.ok() || exclusive || ErrnoOf(made.status()) != EEXIST) return made;
  PS_ASSIGN_OR_RETURN(Attr existing, Lookup(parent, name));  // another client made it: open theirs
  PS_ASSIGN_OR_RETURN(std::shared_ptr<File> f, OpenFile(existing.ino, kRead | kWrite));
  return std::make_pair(existing, std::move(f));
}

Result<std::pair<Attr, std::shared_ptr<File>>> FileSystemImpl::CreateIn(uint64_t parent, const std::string& name,
                                                                        uint32_t mode, uint32_t uid, uint32_t gid,
                                                                        bool parent_checked) {
  uint64_t version = 0;
  PS_ASSIGN_OR_RETURN(Inode made,
                      AddNew(parent, name, NewInode(FileType::kRegular, mode, uid, gid), parent_checked, &version));
  auto f = std::make_shared<FileImpl>(this, made.ino, kRead | kWrite, 0, /*fresh=*/true,
                                      VersionedInode{made, version});
  return std::make_pair(made.ToAttr(), std::shared_ptr<File>(std::move(f)));
}

Result<std::shared_ptr<File>> FileSystemImpl::OpenFile(uint64_t ino, unsigned flags) {
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
  return OpenInode(v.inode, flags);
}

Result<std::shared_ptr<File>> FileSystemImpl::OpenInode(const Inode& inode, unsigned flags) {
  const uint64_t ino = inode.ino;
  if (inode.type == FileType::kDirectory) return FsError(EISDIR, "inode " + std::to_string(ino) + " is a directory");
  if (inode.type == FileType::kSymlink) return FsError(ELOOP, "inode " + std::to_string(ino) + " is a symlink");
  if ((flags & (kRead | kWrite)) == 0) flags |= kRead;
  auto f = std::make_shared<FileImpl>(this, ino, flags & (kRead | kWrite | kAppend), inode.size, /*fresh=*/false);
  if ((flags & kTruncate) && (flags & kWrite)) PS_RETURN_IF_ERROR(f->Truncate(0));
  return std::shared_ptr<File>(std::move(f));
}

Result<Attr> FileSystemImpl::Symlink(uint64_t parent, const std::string& name, const std::string& target,
                                     uint32_t uid, uint32_t gid) {
  if (target.empty()) return FsError(ENOENT, "a symlink needs a target");
  if (target.size() > kMaxSymlinkBytes) {
    return FsError(ENAMETOOLONG, "a symlink target of " + std::to_string(target.size()) + " bytes; at most " +
                                     std::to_string(kMaxSymlinkBytes) + " are allowed");
  }
  Inode i = NewInode(FileType::kSymlink, 0777, uid, gid);
  i.size = target.size();
  i.target = target;
  PS_ASSIGN_OR_RETURN(Inode made, AddNew(parent, name, std::move(i)));
  return made.ToAttr();
}

Result<Attr> FileSystemImpl::Link(uint64_t ino, uint64_t new_parent, const std::string& new_name) {
  PS_RETURN_IF_ERROR(CheckName(new_name));
  PS_RETURN_IF_ERROR(CheckDirectory(new_parent));
  PS_ASSIGN_OR_RETURN(Inode linked, UpdateInode(ino, [&](Inode& i) -> Status {
    if (i.type == FileType::kDirectory) return FsError(EPERM, "directories cannot have hard links");
    if (i.nlink == 0) return FsError(ENOENT, "inode " + std::to_string(ino) + " has no names left");
    ++i.nlink;
    i.ctime_ns = NowNs();
    return OkStatus();
  }));
  auto entry = client_.PutRecord(container_, DirGroup(new_parent), new_name, EncodeDirent({ino, linked.type}),
                                 RecordCondition::Create());
  if (!entry.ok()) {
    Status undo = UpdateInode(ino, [](Inode& i) {
                    if (i.nlink > 1) --i.nlink;
                    return OkStatus();
                  }).status();
    if (!undo.ok()) PS_LOG_WARN("inode {}'s link count stays one too high: {}", ino, undo.ToString());
    if (entry.status().code() == StatusCode::kAlreadyExists) {
      return FsError(EEXIST, "'" + new_name + "' exists in directory " + std::to_string(new_parent));
    }
    return entry.status();
  }
  return linked.ToAttr();
}

}  // namespace penstock::fs
