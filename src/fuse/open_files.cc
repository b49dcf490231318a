// open_files.cc — see open_files.h.
#include "fuse/open_files.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace penstock::fuse {

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::shared_ptr<fs::File> OpenInode::file() const {
  std::lock_guard lock(mu_);
  return file_;
}

bool OpenInode::writable() const {
  std::lock_guard lock(mu_);
  return writable_;
}

void OpenInode::NoteWrite() { last_write_ns_.store(NowNs(), std::memory_order_relaxed); }

void OpenInode::Overlay(fs::Attr& attr) {
  std::shared_ptr<fs::File> f = file();
  if (f) attr.size = f->size();
  const int64_t written = last_write_ns_.load(std::memory_order_relaxed);
  attr.mtime_ns = std::max(attr.mtime_ns, written);
  attr.ctime_ns = std::max(attr.ctime_ns, written);
  std::lock_guard lock(mu_);
  last_attr_ = attr;
}

std::optional<fs::Attr> OpenInode::LastAttr() const {
  std::lock_guard lock(mu_);
  return last_attr_;
}

std::shared_ptr<OpenInode> OpenFiles::Enter(uint64_t ino) {
  std::lock_guard lock(mu_);
  auto& slot = map_[ino];
  if (!slot) slot = std::make_shared<OpenInode>(ino);
  ++slot->opens_;
  return slot;
}

void OpenFiles::Leave(const std::shared_ptr<OpenInode>& node) {
  std::lock_guard lock(mu_);
  if (--node->opens_ == 0) map_.erase(node->ino());
}

Result<std::shared_ptr<OpenInode>> OpenFiles::Acquire(uint64_t ino, bool writable, const OpenFn& open) {
  std::shared_ptr<OpenInode> node = Enter(ino);
  std::unique_lock lock(node->mu_);
  if (node->file_ && (node->writable_ || !writable)) return node;
  // First open, or the first writer after readers: open (again) for what is asked.
  auto file = open(writable || node->writable_);
  if (!file.ok()) {
    lock.unlock();
    Leave(node);
    return file.status();
  }
  node->file_ = std::move(*file);  // a replaced read-only File closes with its last reader
  node->writable_ = writable || node->writable_;
  return node;
}

std::shared_ptr<OpenInode> OpenFiles::Adopt(uint64_t ino, std::shared_ptr<fs::File> file) {
  std::shared_ptr<OpenInode> node = Enter(ino);
  std::shared_ptr<fs::File> spare;
  {
    std::lock_guard lock(node->mu_);
    if (!node->file_ || !node->writable_) {
      spare = std::move(node->file_);
      node->file_ = std::move(file);
      node->writable_ = true;
    } else {
      spare = std::move(file);
    }
  }
  if (spare) spare->Close().IgnoreError();  // nothing written through it
  return node;
}

Status OpenFiles::Release(const std::shared_ptr<OpenInode>& node) {
  std::shared_ptr<fs::File> last;
  {
    std::lock_guard lock(mu_);
    if (--node->opens_ > 0) return OkStatus();
    map_.erase(node->ino());
    std::lock_guard node_lock(node->mu_);
    last = std::move(node->file_);
  }
  return last ? last->Close() : OkStatus();
}

void OpenFiles::CloseAll() {
  std::unordered_map<uint64_t, std::shared_ptr<OpenInode>> left;
  {
    std::lock_guard lock(mu_);
    left.swap(map_);
  }
  for (auto& [ino, node] : left) {
    std::shared_ptr<fs::File> file;
    {
      std::lock_guard lock(node->mu_);
      file = std::move(node->file_);
    }
    if (!file) continue;
    if (Status s = file->Close(); !s.ok()) PS_LOG_WARN("fuse: closing inode {} at unmount: {}", ino, s.ToString());
  }
}

std::shared_ptr<OpenInode> OpenFiles::Find(uint64_t ino) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(ino);
  return it == map_.end() ? nullptr : it->second;
}

void OpenFiles::Overlay(fs::Attr& attr) const {
  if (std::shared_ptr<OpenInode> node = Find(attr.ino)) node->Overlay(attr);
}

}  // namespace penstock::fuse
