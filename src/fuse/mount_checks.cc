// mount_checks.cc — see mount_checks.h.
#include "fuse/mount_checks.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace penstock::fuse {

namespace {

// mountinfo writes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Whether directory `abs` holds anything but "." and "..".
Result<bool> IsEmptyDir(const std::string& abs) {
  DIR* d = ::opendir(abs.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "cannot list mount point '" + abs + "'");
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  std::string p = std::filesystem::absolute(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string FindProgram(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string full = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

Status CheckFuseAvailable() {
  if (::access("/dev/fuse", F_OK) != 0) {
    return FailedPrecondition(
        "FUSE is unavailable: /dev/fuse is missing; load the fuse module (modprobe fuse) or run in a "
        "container with --device /dev/fuse");
  }
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (::geteuid() == 0 || FindProgram("fusermount3").empty()) {
      return ErrnoStatus(err, "FUSE is unavailable: cannot open /dev/fuse (in a container, start it with "
                              "--device /dev/fuse and --cap-add SYS_ADMIN)");
    }
  } else {
    ::close(fd);
  }
  if (::geteuid() != 0 && FindProgram("fusermount3").empty()) {
    return FailedPrecondition(
        "FUSE is unavailable to this user: mounting needs root or fusermount3 (Debian package fuse3)");
  }
  return OkStatus();
}

MountEntry FindMount(const std::string& abs) {
  std::ifstream in("/proc/self/mountinfo");
  MountEntry found;
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - type source super-options
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    if (Unescape(point) != abs) continue;
    std::string word;
    while (f >> word && word != "-") {
    }
    found.mounted = true;  // the last entry for a point is the one on top
    f >> found.fs_type;
  }
  return found;
}

Status CheckMountpoint(const std::string& abs) {
  struct stat st {};
  if (::stat(abs.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("mount point '" + abs + "' does not exist; create it with `mkdir -p " + abs + "`");
    if (err == ENOTCONN) {
      return FailedPrecondition("'" + abs + "' is a mount whose daemon is gone (transport endpoint is not "
                                "connected); run `penstock umount " + abs + "` first");
    }
    return ErrnoStatus(err, "cannot use mount point '" + abs + "'");
  }
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition("mount point '" + abs + "' is not a directory");
  if (MountEntry m = FindMount(abs); m.mounted && m.fs_type.rfind("fuse", 0) == 0) {
    return AlreadyExists("'" + abs + "' is already a mount point (" + m.fs_type + "); `penstock umount " + abs +
                         "` first");
  }
  auto empty = IsEmptyDir(abs);
  if (!empty.ok()) return empty.status();
  if (!*empty) {
    return FailedPrecondition("mount point '" + abs + "' is not empty; mount on an empty directory (the mount "
                              "would hide what it holds)");
  }
  return OkStatus();
}

}  // namespace penstock::fuse
