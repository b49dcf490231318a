// open_files.h — the files a mount has open: one fs::File per inode, shared by every open of
// it through this mount (as a local file system shares one inode between its file
// descriptors).
//
// Why shared: a File knows its own writes before Flush() publishes them to the inode
// (fs.h). With one File per inode, a second open in this mount, a stat or a truncate sees the
// bytes the first open wrote, whether or not they were flushed yet; separate Files would each
// see only the inode. Other mounts see them after close (close-to-open, fs.h).
//
// Thread-safe: FUSE worker threads call every method at once. The table's mutex guards only
// the map and the open counts; opening a File (a round trip) holds the inode's own mutex, so
// opens of different inodes run in parallel.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "penstock/fs.h"

namespace penstock::fuse {

// One inode open in this mount.
class OpenInode {
 public:
  explicit OpenInode(uint64_t ino) : ino_(ino) {}
  uint64_t ino() const { return ino_; }

  // The File every handle of this inode reads and writes through (null until opened).
  std::shared_ptr<fs::File> file() const;
  // Whether file() was opened for writing.
  bool writable() const;
  // Records a write that just landed (the mtime this mount reports until the inode has it).
  void NoteWrite();
  // The mtime was set explicitly: writes so far no longer count for it.
  void ForgetWrites() { last_write_ns_.store(0, std::memory_order_relaxed); }
  // Whether this inode is known to carry no "security.capability" xattr. The kernel asks for it
  // before every write (to drop file capabilities on change); answering from here after the
  // first miss saves a round trip per write. Reset when this mount sets or removes it.
  bool known_without_caps() const { return no_caps_.load(std::memory_order_relaxed); }
  void set_known_without_caps(bool v) { no_caps_.store(v, std::memory_order_relaxed); }
  // Serialises O_APPEND writes of this mount: each takes the end as it finds it.
  std::mutex& append_mutex() { return append_mu_; }

  // `attr` as this mount should report it: the size the shared File knows, the latest write's
  // time. Also remembers `attr`, so the inode can still be described after its last name is
  // removed (LastAttr).
  void Overlay(fs::Attr& attr);
  std::optional<fs::Attr> LastAttr() const;

 private:
  friend class OpenFiles;
  const uint64_t ino_;
  mutable std::mutex mu_;  // file_, writable_, last_attr_
  std::shared_ptr<fs::File> file_;
  bool writable_ = false;
  std::optional<fs::Attr> last_attr_;
  std::atomic<int64_t> last_write_ns_{0};
  std::atomic<bool> no_caps_{false};
  std::mutex append_mu_;
  int opens_ = 0;  // guarded by OpenFiles::mu_
};

class OpenFiles {
 public:
  // Opens File `f` for writing (true) or reading only (false).
  using OpenFn = std::function<Result<std::shared_ptr<fs::File>>(bool writable)>;

  // Another open of `ino`: the shared File, opened through `open` when this is the first open
  // or the first that writes after read-only ones (the writable File then replaces the
  // read-only one for every handle). Each success needs one Release().
  Result<std::shared_ptr<OpenInode>> Acquire(uint64_t ino, bool writable, const OpenFn& open);
  // Another open of `ino` with a writable File just made (FileSystem::Create). When the inode
  // is open here already, its File is kept and `file` is closed.
  std::shared_ptr<OpenInode> Adopt(uint64_t ino, std::shared_ptr<fs::File> file);
  // One open fewer; the last closes the File (flushing what it wrote) and returns how that went.
  Status Release(const std::shared_ptr<OpenInode>& node);

  // Closes every File still open (the mount ended with files open: the kernel sends no more
  // releases) and logs what failed; the handles are left pointing at closed Files.
  void CloseAll();

  // The inode when it is open here, else null.
  std::shared_ptr<OpenInode> Find(uint64_t ino) const;
  // Overlay (OpenInode::Overlay) when `attr.ino` is open here; else nothing.
  void Overlay(fs::Attr& attr) const;

 private:
  std::shared_ptr<OpenInode> Enter(uint64_t ino);
  void Leave(const std::shared_ptr<OpenInode>& node);

  mutable std::mutex mu_;  // map_ and every OpenInode::opens_
  std::unordered_map<uint64_t, std::shared_ptr<OpenInode>> map_;
};

}  // namespace penstock::fuse
