// fs_paths.cc — FileSystemImpl (file_system.h): the path calls of fs.h, resolved from the
// root one component at a time (an entry read, then its inode), following symlinks.
#include <unistd.h>

#include <cerrno>
#include <deque>

#include "fs/file_system.h"
#include "fs/fs_errors.h"
#include "fs/names.h"

namespace penstock::fs {

namespace {

constexpr int kMaxSymlinks = 40;  // as Linux's MAXSYMLINKS

}  // namespace

Result<Inode> FileSystemImpl::Resolve(const std::string& path, bool follow, bool whole) {
  PS_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPath(path));
  std::deque<std::string> rest(parts.begin(), parts.end());
  // Directories on the way are known from their entries (type, and ".." is where we came
  // from): only the last component's inode and symlinks' are read.
  auto dir = [](uint64_t ino, uint64_t parent) {
    Inode d;
    d.ino = ino;
    d.type = FileType::kDirectory;
    d.parent = parent;
    return d;
  };
  Inode cur = dir(kRootIno, kRootIno);
  bool known = false;  // whether `cur` holds the whole inode, not just what an entry tells
  int links = 0;
  while (!rest.empty()) {
    std::string part = std::move(rest.front());
    rest.pop_front();
    if (cur.type != FileType::kDirectory) return FsError(ENOTDIR, "'" + path + "': a component is not a directory");
    if (part == "..") {
      if (cur.ino == kRootIno) continue;
      uint64_t up = cur.parent;
      if (up == 0) {  // came here by ".." itself: ask the inode
        PS_ASSIGN_OR_RETURN(Versioned here, ReadInode(cur.ino));
        up = here.inode.parent;
      }
      cur = dir(up, up == kRootIno ? kRootIno : 0);
      known = false;
      continue;
    }
    auto e = ReadEntry(cur.ino, part);
    if (!e.ok()) return Status(e.status().code(), e.status().message() + " (resolving '" + path + "')");
    if (e->dirent.type == FileType::kDirectory && !rest.empty()) {
      cur = dir(e->dirent.ino, cur.ino);
      known = false;
      continue;
    }
    PS_ASSIGN_OR_RETURN(Versioned child, ReadInode(e->dirent.ino));
    if (child.inode.type == FileType::kSymlink && (!rest.empty() || follow)) {
      if (++links > kMaxSymlinks) return FsError(ELOOP, "too many symlinks resolving '" + path + "'");
      PS_ASSIGN_OR_RETURN(std::vector<std::string> target, SplitPath(child.inode.target));
      if (child.inode.target.starts_with("/")) {
        PS_ASSIGN_OR_RETURN(Versioned r, ReadInode(kRootIno));
        cur = std::move(r.inode);
      }
      rest.insert(rest.begin(), target.begin(), target.end());
      continue;
    }
    cur = std::move(child.inode);
    known = true;
  }
  if (!known && whole) {  // the root, or a path ending in ".." or in a directory reached on the way
    PS_ASSIGN_OR_RETURN(Versioned whole, ReadInode(cur.ino));
    return std::move(whole.inode);
  }
  return cur;
}

Result<std::pair<uint64_t, std::string>> FileSystemImpl::ResolveParent(const std::string& path) {
  PS_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPath(path));
  if (parts.empty()) return FsError(EEXIST, "'" + path + "' is the root directory");
  std::string last = parts.back();
  if (last == "..") return FsError(EINVAL, "'" + path + "' ends in '..'");
  parts.pop_back();
  std::string dir;
  for (const std::string& p : parts) dir += "/" + p;
  PS_ASSIGN_OR_RETURN(Inode parent, Resolve(dir, true, /*whole=*/false));
  if (parent.type != FileType::kDirectory) return FsError(ENOTDIR, "'" + dir + "' is not a directory");
  return std::make_pair(parent.ino, last);
}

Result<Attr> FileSystemImpl::StatPath(const std::string& path) {
  PS_ASSIGN_OR_RETURN(Inode i, Resolve(path, false));
  return WithOwnSize(i.ToAttr());
}

Result<Attr> FileSystemImpl::MkdirPath(const std::string& path, uint32_t mode, bool parents) {
  if (!parents) {
    PS_ASSIGN_OR_RETURN(auto where, ResolveParent(path));
    return Mkdir(where.first, where.second, mode, getuid(), getgid());
  }
  PS_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPath(path));
  std::string sofar;
  Result<Attr> last = GetAttr(kRootIno);
  for (const std::string& p : parts) {
    PS_ASSIGN_OR_RETURN(Inode parent, Resolve(sofar, true));
    sofar += "/" + p;
    last = Mkdir(parent.ino, p, mode, getuid(), getgid());
    if (!last.ok() && ErrnoOf(last.status()) == EEXIST) {
      PS_ASSIGN_OR_RETURN(Inode existing, Resolve(sofar, true));
      if (existing.type != FileType::kDirectory) return FsError(ENOTDIR, "'" + sofar + "' exists and is not a directory");
      last = existing.ToAttr();
    }
    PS_RETURN_IF_ERROR(last.status());
  }
  return last;
}

Result<std::shared_ptr<File>> FileSystemImpl::OpenPath(const std::string& path, unsigned flags, uint32_t mode) {
  if (!(flags & kCreate)) {
    PS_ASSIGN_OR_RETURN(Inode i, Resolve(path, true));
    return OpenInode(i, flags);
  }
  PS_ASSIGN_OR_RETURN(auto where, ResolveParent(path));
  auto made = CreateIn(where.first, where.second, mode, getuid(), getgid(), /*parent_checked=*/true);
  if (made.ok()) return std::move(made->second);
  if (ErrnoOf(made.status()) != EEXIST || (flags & kExclusive)) return made.status();
  PS_ASSIGN_OR_RETURN(Inode existing, Resolve(path, true));  // follows a symlink, as open(2) does
  return OpenInode(existing, flags);
}

Status FileSystemImpl::UnlinkPath(const std::string& path) {
  PS_ASSIGN_OR_RETURN(auto where, ResolveParent(path));
  return Unlink(where.first, where.second);
}

Status FileSystemImpl::RmdirPath(const std::string& path) {
  PS_ASSIGN_OR_RETURN(auto where, ResolveParent(path));
  return Rmdir(where.first, where.second);
}

Status FileSystemImpl::RenamePath(const std::string& from, const std::string& to, unsigned flags) {
  PS_ASSIGN_OR_RETURN(auto a, ResolveParent(from));
  PS_ASSIGN_OR_RETURN(auto b, ResolveParent(to));
  return Rename(a.first, a.second, b.first, b.second, flags);
}

Result<DirPage> FileSystemImpl::ReadDirPath(const std::string& path, const std::string& cursor, uint32_t limit) {
  PS_ASSIGN_OR_RETURN(Inode i, Resolve(path, true));
  if (i.type != FileType::kDirectory) return FsError(ENOTDIR, "'" + path + "' is not a directory");
  return ReadDir(i.ino, cursor, limit);
}

Result<Attr> FileSystemImpl::SymlinkPath(const std::string& target, const std::string& path) {
  PS_ASSIGN_OR_RETURN(auto where, ResolveParent(path));
  return Symlink(where.first, where.second, target, getuid(), getgid());
}

}  // namespace penstock::fs
