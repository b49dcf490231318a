// inode.h — the records a file system is made of (fs.h, "Layout"): inodes (group "i", keyed by
// the inode number in hex) and directory entries (group "d<number in hex>", keyed by name),
// and their binary encodings (version byte first, little-endian, decoded with bounds checks).
// Pure functions and values; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "penstock/fs.h"
#include "penstock/status.h"

namespace penstock::fs {

struct Inode {
  uint64_t ino = 0;
  FileType type = FileType::kRegular;
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 1;
  uint64_t size = 0;  // regular files: as last published (File::Flush); symlinks: target length
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t parent = 0;  // directories: the directory holding their entry ("..")
  std::string target;   // symlinks
  std::map<std::string, std::vector<std::byte>> xattrs;

  Attr ToAttr() const;
  // Bytes the xattrs take against kMaxXattrBytes.
  size_t xattr_bytes() const;
  bool operator==(const Inode&) const = default;
};

// An inode as stored, with its record's version.
struct VersionedInode {
  Inode inode;
  uint64_t version = 0;
};

struct Dirent {
  uint64_t ino = 0;
  FileType type = FileType::kRegular;
  bool operator==(const Dirent&) const = default;
};

std::vector<std::byte> EncodeInode(const Inode& inode);
// kDataLoss naming what is wrong when the bytes are not an inode record.
Result<Inode> DecodeInode(std::span<const std::byte> bytes, uint64_t ino);
std::vector<std::byte> EncodeDirent(const Dirent& d);
Result<Dirent> DecodeDirent(std::span<const std::byte> bytes);

// Record groups and keys.
inline const std::string kInodeGroup = "i";
std::string InodeKey(uint64_t ino);
std::string DirGroup(uint64_t dir);
// The object holding a regular file's bytes.
std::string DataObjectName(uint64_t ino);

// Now, in nanoseconds since the epoch.
int64_t NowNs();

}  // namespace penstock::fs
