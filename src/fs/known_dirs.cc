// known_dirs.cc — KnownDirs (known_dirs.h).
#include "fs/known_dirs.h"

namespace penstock::fs {

void KnownDirs::Seen(uint64_t ino, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.size() >= capacity_ && !seen_.contains(ino)) seen_.clear();
  seen_[ino] = now;
}

void KnownDirs::Forget(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  seen_.erase(ino);
}

bool KnownDirs::IsDirectory(uint64_t ino) const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.contains(ino);
}

bool KnownDirs::Fresh(uint64_t ino, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(ino);
  return it != seen_.end() && now - it->second < ttl_;
}

}  // namespace penstock::fs
