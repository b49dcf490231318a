// destination.h — where `penstock get` writes an object, without ever replacing anything but a
// regular file.
//
// - A regular file, or a path where nothing exists yet: the bytes go into a temporary file
//   beside it (".NAME.penstock-XXXXXX", created with O_EXCL), renamed over the destination by
//   Commit(), so a failed get leaves the old file (or nothing) in place. A file that is replaced
//   keeps its permission bits.
// - A character device or a FIFO (/dev/null, a terminal, a pipe, /dev/stdout): written in
//   place, sequentially; nothing is created, truncated or renamed.
// - "-": standard output, in place.
// - Anything else (a directory, a socket, a block device, a dangling symbolic link) is refused
//   with kFailedPrecondition naming the kind.
//
// A Destination is owned by one thread. It writes sequentially (Write appends); callers that
// read out of order put the pieces in order first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "penstock/status.h"

namespace penstock::cli {

class Destination {
 public:
  // `path` as a user typed it: symbolic links are followed (a link to a regular file has that
  // file replaced, the link kept); a path naming this process's standard output (for example
  // /dev/stdout while stdout is redirected to a file) is written through standard output, so
  // the shell's redirection (and its >> append) holds.
  static Result<std::unique_ptr<Destination>> Open(const std::string& path);
  // `leaf` inside the directory `dir_fd` (borrowed, open until Commit or Abort), for `get -r`:
  // a symbolic link is never followed (refused), so nothing lands outside the tree. `shown`
  // names the path in messages.
  static Result<std::unique_ptr<Destination>> OpenIn(int dir_fd, const std::string& leaf, const std::string& shown);

  ~Destination();  // Abort() unless committed
  Destination(const Destination&) = delete;
  Destination& operator=(const Destination&) = delete;

  // Appends `data`. Errors name the path (kResourceExhausted when the disk is full).
  Status Write(std::span<const std::byte> data);
  // Makes the bytes written the destination's content (renames the temporary file over it).
  Status Commit();
  // Removes the temporary file, if any; a device or FIFO keeps what was written.
  void Abort();

  // The path as messages name it.
  const std::string& shown() const { return shown_; }
  // True when writing in place (device, FIFO, standard output).
  bool in_place() const { return tmp_.empty(); }

 private:
  Destination() = default;
  static Result<std::unique_ptr<Destination>> OpenRegular(int dir_fd, bool own_dir, const std::string& leaf,
                                                          const std::string& shown, int mode);
  static Result<std::unique_ptr<Destination>> OpenInPlace(int fd, bool own_fd, const std::string& shown);

  int fd_ = -1;
  bool own_fd_ = true;
  int dir_fd_ = -1;  // where tmp_ and leaf_ live (regular destinations)
  bool own_dir_ = false;
  std::string tmp_;  // empty: in place
  std::string leaf_;
  std::string shown_;
  bool done_ = false;
  bool pipe_ = false;  // fd_ is a FIFO or pipe: written as room appears (see Write)
};

// "a directory", "a socket", ... for a stat mode.
const char* FileKindName(unsigned mode);

}  // namespace penstock::cli
