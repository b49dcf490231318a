// fs_tree.h — what `penstock fs` commands share: errors that name the path and the errno, a
// depth-first walk of a directory tree in a file system container, and a progress line for
// walks whose size is not known beforehand (du, rm -r).
//
// WalkFs calls back on the calling thread; WalkProgress is used from that thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "cli/progress.h"
#include "penstock/fs.h"

namespace penstock::cli {

// `s` about `path`: "'/a/b': ENOTDIR: ..." (the errno's name added when `s` lacks it).
Status FsPathError(const std::string& path, const Status& s);

// "ENOENT" for ENOENT ("errno N" when unnamed).
std::string ErrnoName(int err);

// Prints `s` as `penstock: error: ...` on stderr, or with --json as
// {"error": {"code", "errno", "message"}} on stdout; returns 1.
int ReportFsError(const Status& s, bool json);

// "/a/b" + "c" -> "/a/b/c"; "/" + "c" -> "/c".
std::string JoinFsPath(const std::string& dir, const std::string& name);

struct WalkVisitor {
  // Each entry below the start, a directory before what it holds: its path from the root, its
  // directory's inode, the entry. Returning an error stops the walk with it.
  std::function<Status(const std::string& path, uint64_t parent, const fs::DirEntry& e)> enter;
  // Each directory below the start (optional), after what it holds.
  std::function<Status(const std::string& path, uint64_t parent, const fs::DirEntry& e)> leave;
};

// Walks the tree under directory `dir_ino` (whose path is `dir_path`), a page of entries at a
// time, following no symbolic links.
Status WalkFs(fs::FileSystem& fs, const std::string& dir_path, uint64_t dir_ino, const WalkVisitor& v);

// "du 12345 entries, 3.2 GiB" redrawn in place on a terminal (kBar) at most 4 times a second.
class WalkProgress {
 public:
  WalkProgress(ProgressMode mode, std::string verb) : mode_(mode), verb_(std::move(verb)) {}
  ~WalkProgress() { Clear(); }
  void Add(uint64_t entries, uint64_t bytes);
  void Clear();

 private:
  ProgressMode mode_;
  std::string verb_;
  uint64_t entries_ = 0, bytes_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace penstock::cli
