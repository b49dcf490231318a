// mount_context.cc — see mount_context.h.
#include "fuse/mount_context.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace penstock::fuse {

namespace {

mode_t TypeBits(fs::FileType t) {
  switch (t) {
    case fs::FileType::kDirectory: return S_IFDIR;
    case fs::FileType::kSymlink: return S_IFLNK;
    case fs::FileType::kRegular: break;
  }
  return S_IFREG;
}

timespec ToTimespec(int64_t ns) {
  int64_t sec = ns / 1'000'000'000;
  int64_t rem = ns % 1'000'000'000;
  if (rem < 0) {
    rem += 1'000'000'000;
    --sec;
  }
  return timespec{static_cast<time_t>(sec), static_cast<long>(rem)};
}

}  // namespace

void ReplyStatus(fuse_req_t req, const Status& s) {
  const int err = fs::ErrnoOf(s);
  // Expected answers (no such name, exists, ...) are the normal traffic of a file system; an
  // EIO means the cluster failed us and deserves a line in the log.
  if (err == EIO) PS_LOG_WARN("fuse: {}", s.ToString());
  fuse_reply_err(req, err);
}

struct stat ToStat(const fs::Attr& a) {
  struct stat st {};
  st.st_ino = a.ino;
  st.st_mode = TypeBits(a.type) | (a.mode & 07777);
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blksize = 4096;
  st.st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st.st_atim = ToTimespec(a.atime_ns);
  st.st_mtim = ToTimespec(a.mtime_ns);
  st.st_ctim = ToTimespec(a.ctime_ns);
  return st;
}

fuse_entry_param ToEntry(MountContext& ctx, fs::Attr a) {
  ctx.open_files.Overlay(a);
  fuse_entry_param e{};
  e.ino = a.ino;
  e.generation = 1;
  e.attr = ToStat(a);
  e.attr_timeout = ctx.attr_timeout;
  e.entry_timeout = ctx.entry_timeout;
  return e;
}

int CheckName(const char* name) { return std::strlen(name) > fs::kMaxNameBytes ? ENAMETOOLONG : 0; }

}  // namespace penstock::fuse
