// file_system.h — FileSystemImpl: the namespace calls of fs.h over records (records.h) and
// objects (object_io.h) of one container.
//
// Every call is a handful of record operations: a lookup reads the entry, then the inode; a
// create checks the parent (no read when seen lately: known_dirs.h), writes the new inode (a
// fresh random number: it cannot exist) and then the entry with a create-only condition,
// which is where concurrent creators of one name are decided (the loser removes its inode
// again); an inode change is a read and a write under the inode's write lease (three round
// trips), so changes from several clients take turns. Order makes crashes leave garbage
// rather than dangling names: an inode is written before its first entry and removed after
// its last. A directory's mtime is not bumped by entry changes (it would make every create in
// a shared directory contend for one record).
//
// Files by concern: file_system.cc (open, format, lookups, attributes, xattrs, statfs),
// fs_create.cc (mkdir, create, symlink, link), fs_remove.cc (unlink, rmdir, the last link),
// fs_rename.cc, fs_paths.cc (the path calls), file_impl.cc (open files).
//
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fs/inode.h"
#include "fs/known_dirs.h"
#include "penstock/client.h"
#include "penstock/fs.h"

namespace penstock::fs {

class FileImpl;

class FileSystemImpl : public FileSystem, public std::enable_shared_from_this<FileSystemImpl> {
 public:
  FileSystemImpl(Client& client, std::string container) : client_(client), container_(std::move(container)) {}

  Result<Attr> Lookup(uint64_t parent, const std::string& name) override;
  Result<Attr> GetAttr(uint64_t ino) override;
  Result<Attr> SetAttr(uint64_t ino, const AttrChange& change) override;
  Result<Attr> Mkdir(uint64_t parent, const std::string& name, uint32_t mode, uint32_t uid, uint32_t gid) override;
  Result<std::pair<Attr, std::shared_ptr<File>>> Create(uint64_t parent, const std::string& name, uint32_t mode,
                                                        uint32_t uid, uint32_t gid, bool exclusive) override;
  Result<std::shared_ptr<File>> OpenFile(uint64_t ino, unsigned flags) override;
  Result<Attr> Symlink(uint64_t parent, const std::string& name, const std::string& target, uint32_t uid,
                       uint32_t gid) override;
  Result<std::string> Readlink(uint64_t ino) override;
  Result<Attr> Link(uint64_t ino, uint64_t new_parent, const std::string& new_name) override;
  Status Unlink(uint64_t parent, const std::string& name) override;
  Status Rmdir(uint64_t parent, const std::string& name) override;
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
                unsigned flags) override;
  Result<DirPage> ReadDir(uint64_t dir, const std::string& cursor, uint32_t limit) override;
  Status SetXattr(uint64_t ino, const std::string& name, std::span<const std::byte> value, unsigned flags) override;
  Result<std::vector<std::byte>> GetXattr(uint64_t ino, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(uint64_t ino) override;
  Status RemoveXattr(uint64_t ino, const std::string& name) override;
  Result<FsStats> StatFs() override;

  Result<Attr> StatPath(const std::string& path) override;
  Result<Attr> MkdirPath(const std::string& path, uint32_t mode, bool parents) override;
  Result<std::shared_ptr<File>> OpenPath(const std::string& path, unsigned flags, uint32_t mode) override;
  Status UnlinkPath(const std::string& path) override;
  Status RmdirPath(const std::string& path) override;
  Status RenamePath(const std::string& from, const std::string& to, unsigned flags) override;
  Result<DirPage> ReadDirPath(const std::string& path, const std::string& cursor, uint32_t limit) override;
  Result<Attr> SymlinkPath(const std::string& target, const std::string& path) override;

  // For FileImpl.
  Client& client() { return client_; }
  const std::string& container() const { return container_; }
  // Open files of this FileSystem, per inode: an unlinked inode's data stays while one is open.
  void Opened(FileImpl* f);
  void Closed(FileImpl* f);
  // Writes a file's size and mtime to its inode (File::Flush). With `known` (the inode as
  // this handle last wrote it), one conditional write over that version (no lease, no read),
  // `known` updated; when another writer changed the inode since, `known` is dropped and the
  // inode updated under its lease.
  Status PublishSize(uint64_t ino, uint64_t size, std::optional<VersionedInode>* known = nullptr);

 private:
  using Versioned = VersionedInode;
  struct Entry {
    Dirent dirent;
    uint64_t version = 0;
  };
  // Record helpers (file_system.cc).
  Result<Versioned> ReadInode(uint64_t ino);
  // Reads, changes and writes the inode under its write lease. `change` may fail the update.
  Result<Inode> UpdateInode(uint64_t ino, const std::function<Status(Inode&)>& change);
  Result<Entry> ReadEntry(uint64_t parent, const std::string& name);
  // The inode of `dir`, ENOTDIR unless it is a directory.
  Result<Inode> ReadDirectory(uint64_t dir);
  // ENOTDIR unless `dir` is a directory, ENOENT when it is gone; without a read when it was
  // seen lately (KnownDirs).
  Status CheckDirectory(uint64_t dir);
  // Sets the size of file `ino`'s data (through a File of ours open on it, if any).
  Status TruncateData(uint64_t ino, uint64_t size);
  // Creation (fs_create.cc): writes `inode` (a fresh number) and its entry `name` in `parent`;
  // EEXIST (the inode removed again) when the name is taken.
  // `version` (optional): the inode record's version as written.
  Result<Inode> AddNew(uint64_t parent, const std::string& name, Inode inode, bool parent_checked = false,
                       uint64_t* version = nullptr);
  // A new regular file `name` in `parent`, open for reading and writing; EEXIST when the name
  // is taken. `parent_checked`: the caller knows `parent` is a directory.
  Result<std::pair<Attr, std::shared_ptr<File>>> CreateIn(uint64_t parent, const std::string& name, uint32_t mode,
                                                          uint32_t uid, uint32_t gid, bool parent_checked);
  // OpenFile of an inode just read.
  Result<std::shared_ptr<File>> OpenInode(const Inode& inode, unsigned flags);
  // `a` with the size this client's unflushed writes gave the file.
  Attr WithOwnSize(Attr a);
  // Removal (fs_remove.cc): one name of `ino` is gone; the inode (and its data) goes with its
  // last unless a File of this FileSystem is open on it (then at the last Close).
  Status DropLink(uint64_t ino);
  // Whether directory `dir` holds no live entry (rmdir, rename over a directory).
  Result<bool> IsEmptyDir(uint64_t dir);
  // Removes the inode record, then its data (a crash between leaves the data as garbage, not
  // an inode without data).
  Status RemoveInode(uint64_t ino, FileType type);
  Status RemoveData(uint64_t ino, FileType type);
  // Rename (fs_rename.cc): EINVAL when moving directory `ino` under `new_parent` would put it
  // inside itself.
  Status CheckNotInside(uint64_t ino, uint64_t new_parent);
  Status RenameOnce(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
                    unsigned flags);
  Status Exchange(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name);
  // Paths (fs_paths.cc): the inode `path` names (following symlinks in the middle, and at the
  // end when `follow`), or its parent directory and last name. Without `whole`, a directory
  // at the end may come back as only what its entry tells (number, type, "..").
  Result<Inode> Resolve(const std::string& path, bool follow, bool whole = true);
  Result<std::pair<uint64_t, std::string>> ResolveParent(const std::string& path);

  Client& client_;
  const std::string container_;
  std::mutex mu_;
  struct OpenState {
    std::vector<FileImpl*> files;
    bool unlinked = false;  // its last name went while open: remove at the last Close
  };
  std::map<uint64_t, OpenState> open_;
  KnownDirs dirs_;
};

}  // namespace penstock::fs
