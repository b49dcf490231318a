// dir_handle.h — an open directory: the entries of its listing fetched so far, page by page
// (FileSystem::ReadDir and its cursor), so that readdir offsets stay stable for the life of
// the handle.
//
// Offsets (what the kernel passes back to continue a listing, and what telldir/seekdir see):
// 0 the start, 1 after ".", 2 after "..", 2 + i after the listing's entry i. An offset names a
// position in the entries this handle fetched, never a name, so entries created or removed
// during a listing cannot make it skip or repeat others. Reading from offset 0 again
// (rewinddir) starts a fresh listing.
//
// Not thread-safe: the kernel sends one readdir of a handle at a time; the caller holds mutex().
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "penstock/fs.h"

namespace penstock::fuse {

class DirHandle {
 public:
  // Fetches the page that starts at `cursor` ("" for the first).
  using FetchPage = std::function<Result<fs::DirPage>(const std::string& cursor)>;

  explicit DirHandle(FetchPage fetch) : fetch_(std::move(fetch)) {}

  // The listing's entry `index` (fetching pages until it is buffered), or null when the
  // listing has fewer entries. Errors: those of FetchPage.
  Result<const fs::DirEntry*> Entry(size_t index);
  // Forgets what was fetched: the next Entry() starts a fresh listing.
  void Rewind();

  std::mutex& mutex() { return mu_; }

 private:
  FetchPage fetch_;
  std::vector<fs::DirEntry> entries_;
  std::string cursor_;  // where the next page starts
  bool started_ = false;
  bool done_ = false;  // the last page is in entries_
  std::mutex mu_;
};

}  // namespace penstock::fuse
