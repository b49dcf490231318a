// fs_copy_file.h — one file's bytes between a local file and a file system container (the
// pieces `penstock fs cp` is built of), and the plan of a tree copy. Thread-safe: each call
// uses only its own descriptors and File.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "penstock/fs.h"

namespace penstock::cli {

// Called with the bytes just moved.
using BytesFn = std::function<void(uint64_t)>;

// Local regular file `local` -> container file `path` (created with `mode`, or cut to 0).
Status PutFsFile(fs::FileSystem& fs, const std::string& local, const std::string& path, uint32_t mode,
                 const BytesFn& moved);
// Container file `path` -> local file `local` (created with `mode`, or cut to 0).
Status GetFsFile(fs::FileSystem& fs, const std::string& path, const std::string& local, uint32_t mode,
                 const BytesFn& moved);

// One thing a tree copy makes, in the order it must be made (a directory before its
// contents).
struct CopyItem {
  enum class Kind { kDirectory, kFile, kSymlink, kSkip } kind = Kind::kFile;
  std::string from, to;  // paths on each side
  uint32_t mode = 0;
  uint64_t size = 0;
  std::string why;  // kSkip: why it is not copied
};

// The items for copying local directory `src` to container path `dst` (which is made).
Result<std::vector<CopyItem>> PlanLocalTree(const std::string& src, const std::string& dst);
// The items for copying container directory `src` to local path `dst` (which is made).
Result<std::vector<CopyItem>> PlanFsTree(fs::FileSystem& fs, const std::string& src, uint64_t src_ino,
                                         uint32_t src_mode, const std::string& dst);

}  // namespace penstock::cli
