#include "cli/local_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cli/destination.h"

namespace penstock::cli {

namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Adds what directory `fd` (owned: closed here) at `path` holds to `out`, names under `rel`.
void Walk(int fd, const std::string& path, const std::string& rel, TreeListing* out) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    out->failed.push_back({path, "cannot read the directory: " + ErrnoText(errno)});
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  if (errno != 0) out->failed.push_back({path, "cannot read the directory: " + ErrnoText(errno)});
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string p = path + "/" + name, r = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) out->failed.push_back({p, ErrnoText(errno)});  // ENOENT: removed meanwhile
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      out->files.push_back({p, r, static_cast<uint64_t>(st.st_size)});
    } else if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        out->failed.push_back({p, "cannot open the directory: " + ErrnoText(errno)});
        continue;
      }
      Walk(sub, p, r, out);
    } else {
      out->skipped.push_back({p, std::string(FileKindName(st.st_mode)) +
                                     (S_ISLNK(st.st_mode) ? " (not followed)" : " (only regular files are stored)")});
    }
  }
  ::closedir(d);
}

}  // namespace

Result<TreeListing> ListTree(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot read '" + dir + "'");
  if (!S_ISDIR(st.st_mode)) {
    return FailedPrecondition("'" + dir + "' is " + FileKindName(st.st_mode) +
                              ", not a directory; store a single file with `penstock put FILE NAME`");
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open the directory '" + dir + "'");
  TreeListing out;
  std::string shown = dir;
  while (shown.size() > 1 && shown.back() == '/') shown.pop_back();
  Walk(fd, shown, "", &out);
  std::sort(out.files.begin(), out.files.end(), [](const LocalFile& a, const LocalFile& b) { return a.rel < b.rel; });
  return out;
}

std::string DirectoryPrefix(const std::string& prefix) {
  return prefix.empty() || prefix.back() == '/' ? prefix : prefix + "/";
}

Status CheckRelativePath(const std::string& rel) {
  if (rel.empty()) return InvalidArgument("the name is the prefix itself");
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(rel.find('/', start), rel.size());
    const std::string_view part(rel.data() + start, end - start);
    if (part.empty()) return InvalidArgument("it has an empty path component ('//', or '/' at either end)");
    if (part == "." || part == "..") return InvalidArgument("it has a '" + std::string(part) + "' component");
    if (end == rel.size()) return OkStatus();
    start = end + 1;
  }
}

Result<int> OpenParentIn(int root_fd, const std::string& shown, const std::string& rel, std::string* leaf) {
  PS_RETURN_IF_ERROR(CheckRelativePath(rel));
  int fd = ::fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "cannot open '" + shown + "'");
  std::string at = shown;
  size_t start = 0;
  for (size_t slash; (slash = rel.find('/', start)) != std::string::npos; start = slash + 1) {
    const std::string part = rel.substr(start, slash - start);
    at += "/" + part;
    if (::mkdirat(fd, part.c_str(), 0777) != 0 && errno != EEXIST) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot create the directory '" + at + "'");
    }
    const int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(fd);
    if (next < 0) {
      if (err == ELOOP || err == ENOTDIR) {
        return FailedPrecondition("'" + at + "' is in the way: it exists and is not a directory (symbolic links "
                                  "are not followed)");
      }
      return ErrnoStatus(err, "cannot open the directory '" + at + "'");
    }
    fd = next;
  }
  *leaf = rel.substr(start);
  return fd;
}

}  // namespace penstock::cli
