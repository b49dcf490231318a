// dir_handle.cc — see dir_handle.h.
#include "fuse/dir_handle.h"

namespace penstock::fuse {

Result<const fs::DirEntry*> DirHandle::Entry(size_t index) {
  while (index >= entries_.size() && !done_) {
    auto page = fetch_(cursor_);
    if (!page.ok()) return page.status();
    started_ = true;
    for (auto& e : page->entries) entries_.push_back(std::move(e));
    cursor_ = std::move(page->next);
    done_ = cursor_.empty();
  }
  if (index >= entries_.size()) return static_cast<const fs::DirEntry*>(nullptr);
  return &entries_[index];
}

void DirHandle::Rewind() {
  if (!started_) return;
  entries_.clear();
  cursor_.clear();
  started_ = false;
  done_ = false;
}

}  // namespace penstock::fuse
