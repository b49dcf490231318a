// fs_copy_file.cc — see fs_copy_file.h.
#include "cli/fs_copy_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "cli/fs_tree.h"

namespace penstock::cli {

namespace {

// Bytes per Read/Write call: several stripes, so a file's stripes move in parallel.
constexpr size_t kChunk = 4u << 20;

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status WriteAll(int fd, const std::byte* p, size_t n, const std::string& local) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoStatus(errno, "cannot write '" + local + "'");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

}  // namespace

Status PutFsFile(fs::FileSystem& fs, const std::string& local, const std::string& path, uint32_t mode,
                 const BytesFn& moved) {
  Fd in{::open(local.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return ErrnoStatus(errno, "cannot open '" + local + "'");
  auto file = fs.OpenPath(path, fs::kWrite | fs::kCreate | fs::kTruncate, mode & 07777);
  if (!file.ok()) return FsPathError(path, file.status());
  std::vector<std::byte> buf(kChunk);
  uint64_t off = 0;
  for (;;) {
    const ssize_t n = ::read(in.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "cannot read '" + local + "'");
    if (n == 0) break;
    if (Status s = (*file)->Write(off, std::span(buf.data(), static_cast<size_t>(n))); !s.ok()) {
      return FsPathError(path, s);
    }
    off += static_cast<uint64_t>(n);
    if (moved) moved(static_cast<uint64_t>(n));
  }
  return FsPathError(path, (*file)->Close());
}

Status GetFsFile(fs::FileSystem& fs, const std::string& path, const std::string& local, uint32_t mode,
                 const BytesFn& moved) {
  auto file = fs.OpenPath(path, fs::kRead);
  if (!file.ok()) return FsPathError(path, file.status());
  Fd out{::open(local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 07777)};
  if (out.fd < 0) return ErrnoStatus(errno, "cannot create '" + local + "'");
  std::vector<std::byte> buf(kChunk);
  for (uint64_t off = 0;;) {
    auto n = (*file)->Read(off, buf);
    if (!n.ok()) return FsPathError(path, n.status());
    if (*n == 0) break;
    if (Status s = WriteAll(out.fd, buf.data(), *n, local); !s.ok()) return s;
    off += *n;
    if (moved) moved(*n);
  }
  if (::close(out.fd) != 0) {
    out.fd = -1;
    return ErrnoStatus(errno, "cannot write '" + local + "'");
  }
  out.fd = -1;
  return (*file)->Close();
}

Result<std::vector<CopyItem>> PlanLocalTree(const std::string& src, const std::string& dst) {
  namespace sfs = std::filesystem;
  std::error_code ec;
  std::vector<CopyItem> items;
  struct stat top {};
  if (::stat(src.c_str(), &top) != 0) return ErrnoStatus(errno, "cannot read '" + src + "'");
  items.push_back({CopyItem::Kind::kDirectory, src, dst, top.st_mode & 07777, 0, ""});
  for (sfs::recursive_directory_iterator it(src, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string from = it->path().string();
    const std::string to = JoinFsPath(dst, it->path().lexically_relative(src).generic_string());
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot read '" + from + "'");
    const uint32_t mode = st.st_mode & 07777;
    if (S_ISDIR(st.st_mode)) {
      items.push_back({CopyItem::Kind::kDirectory, from, to, mode, 0, ""});
    } else if (S_ISREG(st.st_mode)) {
      items.push_back({CopyItem::Kind::kFile, from, to, mode, static_cast<uint64_t>(st.st_size), ""});
    } else if (S_ISLNK(st.st_mode)) {
      items.push_back({CopyItem::Kind::kSymlink, from, to, mode, 0, ""});
    } else {
      items.push_back({CopyItem::Kind::kSkip, from, to, mode, 0, "not a regular file, directory or symbolic link"});
    }
  }
  if (ec) return ErrnoStatus(ec.value(), "cannot list '" + src + "'");
  return items;
}

Result<std::vector<CopyItem>> PlanFsTree(fs::FileSystem& fs, const std::string& src, uint64_t src_ino,
                                         uint32_t src_mode, const std::string& dst) {
  std::vector<CopyItem> items;
  items.push_back({CopyItem::Kind::kDirectory, src, dst, src_mode, 0, ""});
  auto to = [&](const std::string& path) { return dst + path.substr(src.size()); };
  WalkVisitor v;
  v.enter = [&](const std::string& path, uint64_t, const fs::DirEntry& e) -> Status {
    if (e.type == fs::FileType::kSymlink) {
      items.push_back({CopyItem::Kind::kSymlink, path, to(path), 0777, 0, ""});
      return OkStatus();
    }
    auto a = fs.GetAttr(e.ino);
    if (!a.ok()) return FsPathError(path, a.status());
    const auto kind = e.type == fs::FileType::kDirectory ? CopyItem::Kind::kDirectory : CopyItem::Kind::kFile;
    items.push_back({kind, path, to(path), a->mode & 07777, a->size, ""});
    return OkStatus();
  };
  if (Status s = WalkFs(fs, src, src_ino, v); !s.ok()) return s;
  return items;
}

}  // namespace penstock::cli
