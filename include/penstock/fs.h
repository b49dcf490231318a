// fs.h — a POSIX file system in a Penstock container: the native API (used by `penstock mount`,
// `penstock fs` and applications that skip FUSE).
//
//   auto client = penstock::Client::Connect({.mgmt_address = "127.0.0.1:7000"}).value();
//   penstock::fs::FileSystem::Format(*client, "data");          // once, on an empty container
//   auto fs = penstock::fs::FileSystem::Open(*client, "data").value();
//   fs->MkdirPath("/images", 0755);
//   auto f = fs->OpenPath("/images/cat.jpg", penstock::fs::kWrite | penstock::fs::kCreate, 0644).value();
//   f->Write(0, bytes);
//   f->Close();                                                  // size and mtime now visible
//
// Layout (docs/architecture.md, "File system"): every inode is a record (records.h) of group
// "i" keyed by its number; every directory's entries are records of group "d<number>" keyed by
// name (listed a page at a time, spread over all targets); a regular file's bytes are the object
// "fs-data/<number>" (striped with the container's redundancy; up to 16 KiB stored in its head).
// No metadata server: each call is a few record reads and conditional writes on the targets
// placement picks, and no mgmt call.
//
// Consistency between clients: close-to-open. A file's size and mtime reach its inode when the
// writer calls Flush() or Close() (or Fsync); an Open after that sees the bytes and the size.
// Namespace changes (create, mkdir, unlink, rename, link, setattr) are visible to every client
// as soon as they return. Creating one name from several clients at once: exactly one wins, the
// others get EEXIST. Rename is atomic for other clients' lookups: the new name shows the moved
// inode (or, until it lands, whatever it named before), never nothing; the old name is removed
// after the new one is written, so a lookup between the two finds both. Concurrent renames are
// serialised per name by the names' write leases; two renames that would each move a directory
// into the other may both succeed (no cycle check across clients), as on most network file
// systems. A client that dies in the middle of a rename can leave both names pointing to the
// inode (its link count then says 1: unlink one of them with care).
//
// Limits: names 1..255 bytes without '/' or NUL, not "." or ".."; paths up to 4096 bytes;
// symlink targets up to 4095 bytes; xattrs of one inode together up to 8 KiB. Hard links are
// supported for files. Permissions are stored, not enforced: FUSE enforces them
// (default_permissions); native callers have the access of the container's tenant.
//
// Errors carry the errno that POSIX gives for the case, as a prefix of the message
// ("ENOTDIR: 'a' in directory 12 is not a directory"); ErrnoOf(status) reads it back, or maps the
// status code (kNotFound ENOENT, kAlreadyExists EEXIST, kUnavailable EIO, kResourceExhausted
// ENOSPC, kDataLoss EIO, kPermissionDenied EACCES, kInvalidArgument EINVAL, kUnimplemented
// ENOTSUP).
//
// Thread-safe: a FileSystem and its Files may be used from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "penstock/client.h"
#include "penstock/export.h"
#include "penstock/object_io.h"
#include "penstock/status.h"

namespace penstock::fs {

inline constexpr uint64_t kRootIno = 1;
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxSymlinkBytes = 4095;
inline constexpr size_t kMaxXattrBytes = 8 * 1024;  // names and values of one inode together

enum class FileType : uint8_t { kRegular = 1, kDirectory = 2, kSymlink = 3 };

struct Attr {
  uint64_t ino = 0;
  FileType type = FileType::kRegular;
  uint32_t mode = 0;  // permission bits and set-id/sticky bits (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 1;  // files: their names; directories: 1 (as btrfs: "not counted")
  uint64_t size = 0;   // files: bytes; symlinks: the target's length; directories: 0
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
};

// What SetAttr changes (unset: left as is). kNow: the current time.
inline constexpr int64_t kNow = INT64_MIN;
struct AttrChange {
  std::optional<uint32_t> mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;  // truncate (files only)
  std::optional<int64_t> atime_ns;
  std::optional<int64_t> mtime_ns;
};

struct DirEntry {
  std::string name;
  uint64_t ino = 0;
  FileType type = FileType::kRegular;
};

struct DirPage {
  std::vector<DirEntry> entries;
  std::string next;  // pass to the next ReadDir; empty when this was the last page
};

struct FsStats {
  uint64_t total_bytes = 0;  // the cluster's capacity, and what is free of it
  uint64_t free_bytes = 0;
  uint32_t block_size = 4096;
  uint32_t max_name = kMaxNameBytes;
};

// Open flags (a bit set).
enum OpenFlag : unsigned {
  kRead = 1,
  kWrite = 2,
  kCreate = 4,     // OpenPath: create the file when it does not exist
  kExclusive = 8,  // with kCreate: EEXIST when it does
  kTruncate = 16,  // cut to 0 bytes at open (needs kWrite)
  kAppend = 32,    // every Write goes to the end
};

// Rename flags (a bit set), as renameat2's.
enum RenameFlag : unsigned {
  kNoReplace = 1,  // EEXIST when the new name exists
  kExchange = 2,   // swap the two names (both must exist)
};

// xattr set flags, as setxattr's.
enum XattrFlag : unsigned {
  kXattrCreate = 1,   // EEXIST when it exists
  kXattrReplace = 2,  // ENODATA when it does not
};

// An open regular file. Reads and writes go straight to the file's object (object_io.h: the
// same ranged, asynchronous I/O); Flush publishes size and mtime to the inode.
class PENSTOCK_API File {
 public:
  virtual ~File() = default;
  virtual uint64_t ino() const = 0;
  // The size as this handle knows it (its own writes included).
  virtual uint64_t size() const = 0;
  virtual Result<uint64_t> Read(uint64_t offset, std::span<std::byte> out) = 0;
  virtual Status Write(uint64_t offset, std::span<const std::byte> data) = 0;
  // As Object's: buffers belong to the library until the completion is delivered.
  virtual OpId ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data) = 0;
  virtual OpId WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq, uint64_t user_data) = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Waits for this handle's writes in flight, then writes size and mtime to the inode when
  // they changed. Fsync is the same (every acknowledged write is already durable).
  virtual Status Flush() = 0;
  virtual Status Fsync() { return Flush(); }
  // Flush, then the handle is done (further calls fail with EBADF). Also run by the destructor
  // (errors then only logged).
  virtual Status Close() = 0;
};

class PENSTOCK_API FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Writes the root directory of a new file system into `container` (EEXIST when it holds one).
  static Status Format(Client& client, const std::string& container, uint32_t root_mode = 0755,
                       uint32_t uid = 0, uint32_t gid = 0);
  // The file system of `container` (ENOENT naming the fix when it was never formatted).
  // `client` must outlive it.
  static Result<std::unique_ptr<FileSystem>> Open(Client& client, const std::string& container);

  // --- By inode number (what FUSE calls) ---
  virtual Result<Attr> Lookup(uint64_t parent, const std::string& name) = 0;
  virtual Result<Attr> GetAttr(uint64_t ino) = 0;
  virtual Result<Attr> SetAttr(uint64_t ino, const AttrChange& change) = 0;
  virtual Result<Attr> Mkdir(uint64_t parent, const std::string& name, uint32_t mode, uint32_t uid,
                             uint32_t gid) = 0;
  // A new regular file (EEXIST when the name exists and `exclusive`; otherwise the existing
  // one is opened, EISDIR if it is a directory). The handle is open for reading and writing.
  virtual Result<std::pair<Attr, std::shared_ptr<File>>> Create(uint64_t parent, const std::string& name,
                                                                uint32_t mode, uint32_t uid, uint32_t gid,
                                                                bool exclusive) = 0;
  // Opens regular file `ino` (EISDIR for a directory; `flags`: kRead, kWrite, kTruncate, kAppend).
  virtual Result<std::shared_ptr<File>> OpenFile(uint64_t ino, unsigned flags) = 0;
  virtual Result<Attr> Symlink(uint64_t parent, const std::string& name, const std::string& target,
                               uint32_t uid, uint32_t gid) = 0;
  virtual Result<std::string> Readlink(uint64_t ino) = 0;
  // A new name for file `ino` (EPERM for a directory).
  virtual Result<Attr> Link(uint64_t ino, uint64_t new_parent, const std::string& new_name) = 0;
  // Removes a name; the inode and its data go with its last name. A File open on it in this
  // FileSystem keeps working until closed (its data is removed then).
  virtual Status Unlink(uint64_t parent, const std::string& name) = 0;
  virtual Status Rmdir(uint64_t parent, const std::string& name) = 0;  // ENOTEMPTY unless empty
  virtual Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                        const std::string& new_name, unsigned flags = 0) = 0;
  // A page of at most `limit` entries (without "." and ".."), from `cursor` (a page's `next`).
  virtual Result<DirPage> ReadDir(uint64_t dir, const std::string& cursor = "", uint32_t limit = 1000) = 0;
  virtual Status SetXattr(uint64_t ino, const std::string& name, std::span<const std::byte> value,
                          unsigned flags = 0) = 0;
  virtual Result<std::vector<std::byte>> GetXattr(uint64_t ino, const std::string& name) = 0;  // ENODATA
  virtual Result<std::vector<std::string>> ListXattr(uint64_t ino) = 0;
  virtual Status RemoveXattr(uint64_t ino, const std::string& name) = 0;
  virtual Result<FsStats> StatFs() = 0;

  // --- By path ("/a/b", or "a/b" from the root; symlinks in the middle are followed, up to 40;
  // the last component is not, except by OpenPath) ---
  virtual Result<Attr> StatPath(const std::string& path) = 0;
  virtual Result<Attr> MkdirPath(const std::string& path, uint32_t mode = 0755, bool parents = false) = 0;
  virtual Result<std::shared_ptr<File>> OpenPath(const std::string& path, unsigned flags, uint32_t mode = 0644) = 0;
  virtual Status UnlinkPath(const std::string& path) = 0;
  virtual Status RmdirPath(const std::string& path) = 0;
  virtual Status RenamePath(const std::string& from, const std::string& to, unsigned flags = 0) = 0;
  virtual Result<DirPage> ReadDirPath(const std::string& path, const std::string& cursor = "",
                                      uint32_t limit = 1000) = 0;
  virtual Result<Attr> SymlinkPath(const std::string& target, const std::string& path) = 0;
};

// The errno of an error from this API (0 for OK): see the top of this file.
PENSTOCK_API int ErrnoOf(const Status& status);

}  // namespace penstock::fs
