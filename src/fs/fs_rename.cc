// fs_rename.cc — FileSystemImpl::Rename (file_system.h; what it guarantees: fs.h).
//
// Both names' write leases are held for the whole move (LockRecords takes them in a fixed
// order), so renames, creates and unlinks of those names from other clients wait: the new name
// is written (replacing what it named), then the old one removed. What the new name named before
// loses that link afterwards (a directory it named must have been empty). A directory moved to
// another parent gets its ".." changed last.
#include <cerrno>

#include "fs/file_system.h"
#include "fs/fs_errors.h"
#include "fs/names.h"

namespace penstock::fs {

namespace {

constexpr int kMaxDepth = 4096;  // ".." steps from any directory to the root, at most

// A name changed under the rename's leases (an unprotected create, which takes none): EAGAIN.
Status Changed(Status s) {
  if (s.code() == StatusCode::kAborted || s.code() == StatusCode::kAlreadyExists ||
      s.code() == StatusCode::kNotFound) {
    return FsError(EAGAIN, "a name changed while it was being renamed; try again (" + s.message() + ")");
  }
  return s;
}

}  // namespace

Status FileSystemImpl::CheckNotInside(uint64_t ino, uint64_t new_parent) {
  uint64_t at = new_parent;
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    if (at == ino) return FsError(EINVAL, "cannot move directory " + std::to_string(ino) + " inside itself");
    if (at == kRootIno) return OkStatus();
    PS_ASSIGN_OR_RETURN(Versioned v, ReadInode(at));
    at = v.inode.parent;
  }
  return FsError(ELOOP, "directory " + std::to_string(new_parent) + " is not reachable from the root");
}

Status FileSystemImpl::Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                              const std::string& new_name, unsigned flags) {
  Status s;
  for (int attempt = 0; attempt < 8; ++attempt) {  // a name changed under us (Changed): again
    s = RenameOnce(parent, name, new_parent, new_name, flags);
    if (ErrnoOf(s) != EAGAIN) break;
  }
  return s;
}

Status FileSystemImpl::RenameOnce(uint64_t parent, const std::string& name, uint64_t new_parent,
                                  const std::string& new_name, unsigned flags) {
  PS_RETURN_IF_ERROR(CheckName(name));
  PS_RETURN_IF_ERROR(CheckName(new_name));
  if ((flags & kNoReplace) && (flags & kExchange)) return FsError(EINVAL, "rename: no-replace and exchange together");
  if (flags & kExchange) return Exchange(parent, name, new_parent, new_name);
  PS_RETURN_IF_ERROR(ReadDirectory(new_parent).status());
  PS_ASSIGN_OR_RETURN(auto leases, client_.LockRecords(container_, {{DirGroup(parent), name},
                                                                     {DirGroup(new_parent), new_name}}));
  PS_ASSIGN_OR_RETURN(Entry from, ReadEntry(parent, name));
  auto to = ReadEntry(new_parent, new_name);
  if (!to.ok() && ErrnoOf(to.status()) != ENOENT) return to.status();
  const bool dir = from.dirent.type == FileType::kDirectory;
  if (to.ok()) {
    if (flags & kNoReplace) return FsError(EEXIST, "'" + new_name + "' exists");
    if (to->dirent.ino == from.dirent.ino) return OkStatus();  // two links of one inode: nothing to do
    const bool to_dir = to->dirent.type == FileType::kDirectory;
    if (dir && !to_dir) return FsError(ENOTDIR, "'" + new_name + "' is not a directory");
    if (!dir && to_dir) return FsError(EISDIR, "'" + new_name + "' is a directory");
    if (to_dir) {
      PS_ASSIGN_OR_RETURN(bool empty, IsEmptyDir(to->dirent.ino));
      if (!empty) return FsError(ENOTEMPTY, "directory '" + new_name + "' is not empty");
    }
  }
  if (dir && parent != new_parent) PS_RETURN_IF_ERROR(CheckNotInside(from.dirent.ino, new_parent));
  // Over what was read (an unprotected create does not wait for the leases): EAGAIN if it changed.
  const RecordCondition over = to.ok() ? RecordCondition::Version(to->version) : RecordCondition::Create();
  PS_RETURN_IF_ERROR(Changed(client_.PutRecord(container_, DirGroup(new_parent), new_name, EncodeDirent(from.dirent),
                                               over, leases.get())
                                 .status()));
  PS_RETURN_IF_ERROR(Changed(client_.DeleteRecord(container_, DirGroup(parent), name, from.version, leases.get())));
  leases.reset();
  if (to.ok()) {
    PS_RETURN_IF_ERROR(to->dirent.type == FileType::kDirectory ? RemoveInode(to->dirent.ino, FileType::kDirectory)
                                                                : DropLink(to->dirent.ino));
  }
  if (dir && parent != new_parent) {
    PS_RETURN_IF_ERROR(UpdateInode(from.dirent.ino, [&](Inode& i) {
                         i.parent = new_parent;
                         i.ctime_ns = NowNs();
                         return OkStatus();
                       }).status());
  }
  return OkStatus();
}

Status FileSystemImpl::Exchange(uint64_t parent, const std::string& name, uint64_t new_parent,
                                const std::string& new_name) {
  PS_ASSIGN_OR_RETURN(auto leases, client_.LockRecords(container_, {{DirGroup(parent), name},
                                                                     {DirGroup(new_parent), new_name}}));
  PS_ASSIGN_OR_RETURN(Entry a, ReadEntry(parent, name));
  PS_ASSIGN_OR_RETURN(Entry b, ReadEntry(new_parent, new_name));
  if (parent != new_parent) {
    if (a.dirent.type == FileType::kDirectory) PS_RETURN_IF_ERROR(CheckNotInside(a.dirent.ino, new_parent));
    if (b.dirent.type == FileType::kDirectory) PS_RETURN_IF_ERROR(CheckNotInside(b.dirent.ino, parent));
  }
  PS_RETURN_IF_ERROR(Changed(client_
                                 .PutRecord(container_, DirGroup(new_parent), new_name, EncodeDirent(a.dirent),
                                            RecordCondition::Version(b.version), leases.get())
                                 .status()));
  PS_RETURN_IF_ERROR(Changed(client_
                                 .PutRecord(container_, DirGroup(parent), name, EncodeDirent(b.dirent),
                                            RecordCondition::Version(a.version), leases.get())
                                 .status()));
  leases.reset();
  if (parent == new_parent) return OkStatus();
  for (auto [entry, now_in] : {std::pair{a, new_parent}, std::pair{b, parent}}) {
    if (entry.dirent.type != FileType::kDirectory) continue;
    PS_RETURN_IF_ERROR(UpdateInode(entry.dirent.ino, [&, now_in = now_in](Inode& i) {
                         i.parent = now_in;
                         return OkStatus();
                       }).status());
  }
  return OkStatus();
}

}  // namespace penstock::fs
