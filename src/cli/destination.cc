#include "cli/destination.h"

#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <random>

#include "cli/interrupt.h"

namespace penstock::cli {

namespace {

constexpr const char* kWhatGetWrites =
    "penstock get writes a regular file (through a temporary file beside it), a character device or a FIFO";

std::string RandomSuffix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
  std::string s(8, 'x');
  for (char& c : s) c = kChars[pick(rng)];
  return s;
}

// (directory, last component) of `path`; "" as the last component when `path` ends with '/'.
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

bool SameFile(const struct stat& a, int fd) {
  struct stat b;
  return ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

Status Refuse(const std::string& shown, unsigned mode) {
  return FailedPrecondition("'" + shown + "' is " + FileKindName(mode) + "; " + kWhatGetWrites);
}

// Bytes a write into pipe `fd` can take without blocking, once poll said POLLOUT (a free page):
// its capacity less what it holds, less two pages for partly filled ones; at least PIPE_BUF.
size_t PipeRoom(int fd) {
  int held = 0;
  const int size = ::fcntl(fd, F_GETPIPE_SZ);
  if (size <= 0 || ::ioctl(fd, FIONREAD, &held) != 0) return PIPE_BUF;
  const long room = (static_cast<long>(size) - held - 2 * 4096) / 4096 * 4096;
  return std::max<size_t>(PIPE_BUF, static_cast<size_t>(std::max(0L, room)));
}

// Opens a character device or FIFO to write in place. A FIFO with no reader yet is waited for
// (every 200 ms, so that Ctrl-C works), as a shell's `> fifo` would.
Result<int> OpenForWriting(int dir_fd, const std::string& path, int flags, const std::string& shown) {
  for (;;) {
    const int fd = ::openat(dir_fd, path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
    if (fd >= 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    if (errno != ENXIO && errno != EINTR) return ErrnoStatus(errno, "cannot open '" + shown + "' for writing");
    if (Interrupted()) return Cancelled("interrupted");
    ::usleep(200 * 1000);
  }
}

}  // namespace

const char* FileKindName(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

Result<std::unique_ptr<Destination>> Destination::Open(const std::string& path) {
  if (path == "-") return OpenInPlace(STDOUT_FILENO, false, "standard output");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat lst;
    if (err == ENOENT && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      return FailedPrecondition("'" + path + "' is a symbolic link to a file that does not exist; remove the "
                                "link or give another path");
    }
    if (err != ENOENT) return ErrnoStatus(err, "cannot use '" + path + "'");
    auto [dir, leaf] = SplitPath(path);
    if (leaf.empty()) return InvalidArgument("'" + path + "' names a directory; give a file path");
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return ErrnoStatus(errno, "cannot create '" + path + "': directory '" + dir + "'");
    return OpenRegular(dir_fd, true, leaf, path, -1);
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    PS_ASSIGN_OR_RETURN(const int fd, OpenForWriting(AT_FDCWD, path, 0, path));
    return OpenInPlace(fd, true, path);
  }
  if (!S_ISREG(st.st_mode)) return Refuse(path, st.st_mode);
  // The file the shell redirected standard output to (get X /dev/stdout > file): written
  // through standard output, as the shell set it up (offset, O_APPEND).
  if (SameFile(st, STDOUT_FILENO)) return OpenInPlace(STDOUT_FILENO, false, path);
  std::string real = path;
  if (struct stat lst; ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    // Replace the file the link names, not the link.
    char buf[PATH_MAX];
    if (::realpath(path.c_str(), buf) == nullptr) return ErrnoStatus(errno, "cannot resolve '" + path + "'");
    real = buf;
  }
  auto [dir, leaf] = SplitPath(real);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoStatus(errno, "cannot open directory '" + dir + "'");
  return OpenRegular(dir_fd, true, leaf, path, static_cast<int>(st.st_mode & 07777));
}

Result<std::unique_ptr<Destination>> Destination::OpenIn(int dir_fd, const std::string& leaf,
                                                         const std::string& shown) {
  struct stat st;
  if (::fstatat(dir_fd, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, "cannot use '" + shown + "'");
    return OpenRegular(dir_fd, false, leaf, shown, -1);
  }
  if (S_ISREG(st.st_mode)) return OpenRegular(dir_fd, false, leaf, shown, static_cast<int>(st.st_mode & 07777));
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    PS_ASSIGN_OR_RETURN(const int fd, OpenForWriting(dir_fd, leaf, O_NOFOLLOW, shown));
    return OpenInPlace(fd, true, shown);
  }
  if (S_ISLNK(st.st_mode)) {
    return FailedPrecondition("'" + shown + "' is a symbolic link; get -r neither follows nor replaces links "
                              "(remove it, or get into another directory)");
  }
  return Refuse(shown, st.st_mode);
}

Result<std::unique_ptr<Destination>> Destination::OpenRegular(int dir_fd, bool own_dir, const std::string& leaf,
                                                              const std::string& shown, int mode) {
  std::unique_ptr<Destination> d(new Destination());
  d->dir_fd_ = dir_fd;
  d->own_dir_ = own_dir;
  d->leaf_ = leaf;
  d->shown_ = shown;
  // Room for the prefix and suffix within NAME_MAX (255).
  const std::string stem = "." + leaf.substr(0, 200) + ".penstock-";
  for (int attempt = 0; attempt < 100 && d->fd_ < 0; ++attempt) {
    d->tmp_ = stem + RandomSuffix();
    d->fd_ = ::openat(dir_fd, d->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (d->fd_ < 0 && errno != EEXIST) break;
  }
  if (d->fd_ < 0) {
    const int err = errno;
    d->tmp_.clear();
    return ErrnoStatus(err, "cannot create a temporary file beside '" + shown + "'");
  }
  if (mode >= 0 && ::fchmod(d->fd_, static_cast<mode_t>(mode)) != 0) {
    return ErrnoStatus(errno, "cannot set the permissions of a temporary file beside '" + shown + "'");
  }
  return d;
}

Result<std::unique_ptr<Destination>> Destination::OpenInPlace(int fd, bool own_fd, const std::string& shown) {
  std::unique_ptr<Destination> d(new Destination());
  d->fd_ = fd;
  d->own_fd_ = own_fd;
  d->shown_ = shown;
  struct stat st;
  d->pipe_ = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  return d;
}

Destination::~Destination() {
  Abort();
  if (own_dir_ && dir_fd_ >= 0) ::close(dir_fd_);
}

Status Destination::Write(std::span<const std::byte> data) {
  size_t done = 0;
  while (done < data.size()) {
    // Into a pipe, only what fits once there is room: such a write never blocks, so a reader
    // that stops reading cannot keep Ctrl-C from working.
    if (pipe_) PS_RETURN_IF_ERROR(WaitReady(fd_, POLLOUT));
    const size_t len = pipe_ ? std::min(PipeRoom(fd_), data.size() - done) : data.size() - done;
    const ssize_t n = ::write(fd_, data.data() + done, len);
    if (n < 0 && errno == EINTR && !Interrupted()) continue;
    if (n < 0 && Interrupted()) return Cancelled("interrupted");
    if (n < 0) return ErrnoStatus(errno, "writing '" + shown_ + "'");
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

Status Destination::Commit() {
  done_ = true;
  const int fd = std::exchange(fd_, -1);
  if (!own_fd_) return OkStatus();
  // close() is where some file systems (NFS) report a failed write.
  if (::close(fd) != 0) {
    const int err = errno;
    if (!tmp_.empty()) ::unlinkat(dir_fd_, tmp_.c_str(), 0);
    return ErrnoStatus(err, "writing '" + shown_ + "'");
  }
  if (tmp_.empty()) return OkStatus();
  if (::renameat(dir_fd_, tmp_.c_str(), dir_fd_, leaf_.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd_, tmp_.c_str(), 0);
    return ErrnoStatus(err, "cannot rename the temporary file '" + tmp_ + "' to '" + shown_ + "'");
  }
  return OkStatus();
}

void Destination::Abort() {
  if (done_) return;
  done_ = true;
  if (own_fd_ && fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlinkat(dir_fd_, tmp_.c_str(), 0);
}

}  // namespace penstock::cli
