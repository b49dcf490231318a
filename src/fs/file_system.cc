// file_system.cc — FileSystemImpl (file_system.h): open and format, lookups, attributes,
// xattrs, statfs, and the record helpers the other files use.
#include "fs/file_system.h"

#include <cerrno>

#include "fs/file_impl.h"
#include "fs/fs_errors.h"
#include "fs/names.h"

namespace penstock::fs {

namespace {

std::span<const std::byte> Span(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

}  // namespace

Status FileSystem::Format(Client& client, const std::string& container, uint32_t root_mode, uint32_t uid,
                          uint32_t gid) {
  PS_RETURN_IF_ERROR(client.GetContainer(container).status());
  Inode root;
  root.ino = kRootIno;
  root.type = FileType::kDirectory;
  root.mode = root_mode & 07777;
  root.uid = uid;
  root.gid = gid;
  root.parent = kRootIno;
  root.atime_ns = root.mtime_ns = root.ctime_ns = NowNs();
  auto put = client.PutRecord(container, kInodeGroup, InodeKey(kRootIno), EncodeInode(root), RecordCondition::Create());
  if (put.status().code() == StatusCode::kAlreadyExists) {
    return FsError(EEXIST, "container '" + container + "' already holds a file system");
  }
  return put.status();
}

Result<std::unique_ptr<FileSystem>> FileSystem::Open(Client& client, const std::string& container) {
  PS_RETURN_IF_ERROR(client.GetContainer(container).status());
  auto root = client.GetRecord(container, kInodeGroup, InodeKey(kRootIno));
  if (root.status().code() == StatusCode::kNotFound) {
    return FsError(ENOENT, "container '" + container + "' holds no file system; make one with `penstock container " +
                               "create NAME --type fs` (or FileSystem::Format on an empty container)");
  }
  PS_RETURN_IF_ERROR(root.status());
  PS_RETURN_IF_ERROR(DecodeInode(root->value, kRootIno).status());
  return std::unique_ptr<FileSystem>(new FileSystemImpl(client, container));
}

Result<FileSystemImpl::Versioned> FileSystemImpl::ReadInode(uint64_t ino) {
  auto r = client_.GetRecord(container_, kInodeGroup, InodeKey(ino));
  if (r.status().code() == StatusCode::kNotFound) {
    return FsError(ENOENT, "inode " + std::to_string(ino) + " does not exist (removed by another client?)");
  }
  PS_RETURN_IF_ERROR(r.status());
  PS_ASSIGN_OR_RETURN(Inode inode, DecodeInode(r->value, ino));
  if (inode.type == FileType::kDirectory) dirs_.Seen(ino);
  return Versioned{std::move(inode), r->version};
}

Result<Inode> FileSystemImpl::UpdateInode(uint64_t ino, const std::function<Status(Inode&)>& change) {
  // Under the inode's lease: read, change, write (no other leaseholder in between). A
  // handle's Flush updates the inode it wrote without the lease, over its version: then
  // this write finds another version than it read (kAborted) and goes again.
  constexpr int kAttempts = 8;
  Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<RecordLeases> lease,
                        client_.LockRecords(container_, {{kInodeGroup, InodeKey(ino)}}));
    PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
    PS_RETURN_IF_ERROR(change(v.inode));
    last = client_
               .PutRecord(container_, kInodeGroup, InodeKey(ino), EncodeInode(v.inode),
                          RecordCondition::Blind(v.version), lease.get())
               .status();
    if (last.code() != StatusCode::kAborted) {
      PS_RETURN_IF_ERROR(last);
      return std::move(v.inode);
    }
  }
  return last;
}

Result<FileSystemImpl::Entry> FileSystemImpl::ReadEntry(uint64_t parent, const std::string& name) {
  PS_RETURN_IF_ERROR(CheckName(name));
  auto r = client_.GetRecord(container_, DirGroup(parent), name);
  if (r.status().code() == StatusCode::kNotFound) {
    return FsError(ENOENT, "no '" + name + "' in directory " + std::to_string(parent));
  }
  PS_RETURN_IF_ERROR(r.status());
  PS_ASSIGN_OR_RETURN(Dirent d, DecodeDirent(r->value));
  return Entry{d, r->version};
}

Result<Inode> FileSystemImpl::ReadDirectory(uint64_t dir) {
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(dir));
  if (v.inode.type != FileType::kDirectory) return FsError(ENOTDIR, "inode " + std::to_string(dir) + " is not a directory");
  return std::move(v.inode);
}

Status FileSystemImpl::CheckDirectory(uint64_t dir) {
  if (dirs_.Fresh(dir)) return OkStatus();
  return ReadDirectory(dir).status();
}

Result<Attr> FileSystemImpl::Lookup(uint64_t parent, const std::string& name) {
  auto e = ReadEntry(parent, name);
  if (!e.ok() && ErrnoOf(e.status()) == ENOENT && !dirs_.IsDirectory(parent)) {
    // Say ENOTDIR when the parent is no directory (a path through a file).
    auto dir = ReadDirectory(parent);
    if (!dir.ok()) return dir.status();
  }
  PS_RETURN_IF_ERROR(e.status());
  return GetAttr(e->dirent.ino);
}

Result<Attr> FileSystemImpl::GetAttr(uint64_t ino) {
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
  return WithOwnSize(v.inode.ToAttr());
}

Attr FileSystemImpl::WithOwnSize(Attr a) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(a.ino);
  if (it != open_.end()) {
    for (FileImpl* f : it->second.files) a.size = f->dirty() ? f->size() : a.size;  // our own writes show
  }
  return a;
}

Result<Attr> FileSystemImpl::SetAttr(uint64_t ino, const AttrChange& change) {
  if (change.size) PS_RETURN_IF_ERROR(TruncateData(ino, *change.size));
  const int64_t now = NowNs();
  PS_ASSIGN_OR_RETURN(Inode i, UpdateInode(ino, [&](Inode& i) -> Status {
    if (change.size && i.type != FileType::kRegular) {
      return FsError(i.type == FileType::kDirectory ? EISDIR : EINVAL, "only regular files can be truncated");
    }
    if (change.mode) i.mode = *change.mode & 07777;
    if (change.uid) i.uid = *change.uid;
    if (change.gid) i.gid = *change.gid;
    if (change.size) i.size = *change.size, i.mtime_ns = now;
    if (change.atime_ns) i.atime_ns = *change.atime_ns == kNow ? now : *change.atime_ns;
    if (change.mtime_ns) i.mtime_ns = *change.mtime_ns == kNow ? now : *change.mtime_ns;
    i.ctime_ns = now;
    return OkStatus();
  }));
  return i.ToAttr();
}

Result<DirPage> FileSystemImpl::ReadDir(uint64_t dir, const std::string& cursor, uint32_t limit) {
  if (cursor.empty()) PS_RETURN_IF_ERROR(CheckDirectory(dir));
  PS_ASSIGN_OR_RETURN(RecordPage page, client_.ListRecords(container_, DirGroup(dir), cursor, limit));
  DirPage out;
  out.next = std::move(page.next);
  for (Record& r : page.records) {
    PS_ASSIGN_OR_RETURN(Dirent d, DecodeDirent(r.value));
    out.entries.push_back(DirEntry{std::move(r.key), d.ino, d.type});
  }
  return out;
}

Result<std::string> FileSystemImpl::Readlink(uint64_t ino) {
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
  if (v.inode.type != FileType::kSymlink) return FsError(EINVAL, "inode " + std::to_string(ino) + " is not a symlink");
  return v.inode.target;
}

Status FileSystemImpl::SetXattr(uint64_t ino, const std::string& name, std::span<const std::byte> value,
                                unsigned flags) {
  if (name.empty() || name.size() > 255) return FsError(ERANGE, "an xattr name is 1..255 bytes");
  return UpdateInode(ino, [&](Inode& i) -> Status {
           const bool exists = i.xattrs.count(name) > 0;
           if ((flags & kXattrCreate) && exists) return FsError(EEXIST, "xattr '" + name + "' exists");
           if ((flags & kXattrReplace) && !exists) return FsError(ENODATA, "no xattr '" + name + "'");
           i.xattrs[name].assign(value.begin(), value.end());
           if (i.xattr_bytes() > kMaxXattrBytes) {
             return FsError(ENOSPC, "the xattrs of inode " + std::to_string(ino) + " would take " +
                                        std::to_string(i.xattr_bytes()) + " bytes; at most " +
                                        std::to_string(kMaxXattrBytes) + " fit");
           }
           i.ctime_ns = NowNs();
           return OkStatus();
         })
      .status();
}

Result<std::vector<std::byte>> FileSystemImpl::GetXattr(uint64_t ino, const std::string& name) {
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
  auto it = v.inode.xattrs.find(name);
  if (it == v.inode.xattrs.end()) return FsError(ENODATA, "no xattr '" + name + "' on inode " + std::to_string(ino));
  return it->second;
}

Result<std::vector<std::string>> FileSystemImpl::ListXattr(uint64_t ino) {
  PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(ino));
  std::vector<std::string> out;
  for (const auto& [k, _] : v.inode.xattrs) out.push_back(k);
  return out;
}

Status FileSystemImpl::RemoveXattr(uint64_t ino, const std::string& name) {
  return UpdateInode(ino, [&](Inode& i) -> Status {
           if (i.xattrs.erase(name) == 0) return FsError(ENODATA, "no xattr '" + name + "'");
           i.ctime_ns = NowNs();
           return OkStatus();
         })
      .status();
}

Result<FsStats> FileSystemImpl::StatFs() {
  PS_ASSIGN_OR_RETURN(Client::Space s, client_.ClusterSpace());
  FsStats out;
  out.total_bytes = s.capacity_bytes;
  out.free_bytes = s.free_bytes;
  return out;
}

}  // namespace penstock::fs
