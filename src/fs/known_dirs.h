// known_dirs.h — KnownDirs: the directories a FileSystem has seen lately, so that the checks
// "is the parent a directory?" and "does it still exist?" need not read its inode every time.
//
// An inode's type never changes and its random 64-bit number is never reused, so "this number
// is a directory" stays true forever (a lookup that finds no entry in it answers ENOENT without
// reading the directory again: if it was removed since, ENOENT is still the answer). That it
// still exists is trusted for `ttl` after it was last seen (the FUSE kernel trusts its own
// entries as long): a create in a directory that another client removed within that window
// leaves an entry nobody reaches, the race fs.h documents for creates against rmdir.
//
// Bounded: past `capacity` numbers it starts over. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace penstock::fs {

class KnownDirs {
 public:
  using Clock = std::chrono::steady_clock;
  explicit KnownDirs(Clock::duration ttl = std::chrono::seconds(1), size_t capacity = 1 << 16)
      : ttl_(ttl), capacity_(capacity) {}

  // `ino` was read just now and is a directory.
  void Seen(uint64_t ino, Clock::time_point now = Clock::now());
  // This client removed directory `ino`.
  void Forget(uint64_t ino);
  // Whether `ino` is known to be a directory (whether or not it still exists).
  bool IsDirectory(uint64_t ino) const;
  // Whether directory `ino` was seen within the last `ttl`.
  bool Fresh(uint64_t ino, Clock::time_point now = Clock::now()) const;

 private:
  const Clock::duration ttl_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Clock::time_point> seen_;  // number → when last seen existing
};

}  // namespace penstock::fs
