// fuse_ops_node.cc — FUSE operations on names and inodes: lookup, attributes, mkdir, mknod,
// symlink, link, unlink, rmdir, rename, statfs.
//
// Inode numbers are the file system's own (fs::kRootIno == FUSE_ROOT_ID == 1) and stay valid
// while the inode exists, so the kernel's lookup counts need no bookkeeping here: forget is
// a no-op. A failed lookup answers ENOENT without a negative entry, so a name another client
// creates is found at once.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>

#include "fuse/mount_context.h"

namespace penstock::fuse {

namespace {

void ReplyEntry(fuse_req_t req, const Result<fs::Attr>& a) {
  if (!a.ok()) return ReplyStatus(req, a.status());
  fuse_entry_param e = ToEntry(Ctx(req), *a);
  fuse_reply_entry(req, &e);
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (int err = CheckName(name)) return (void)fuse_reply_err(req, err);
  ReplyEntry(req, Ctx(req).fs.Lookup(parent, name));
}

void Forget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }
void ForgetMulti(fuse_req_t req, size_t, fuse_forget_data*) { fuse_reply_none(req); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An inode whose last name was removed while this mount has it open: described from what the
// mount knows (fs.h keeps the File working until closed).
std::optional<fs::Attr> UnlinkedButOpen(MountContext& ctx, fuse_ino_t ino) {
  std::shared_ptr<OpenInode> node = ctx.open_files.Find(ino);
  if (!node) return std::nullopt;
  fs::Attr a = node->LastAttr().value_or(fs::Attr{.ino = ino, .mode = 0600, .mtime_ns = NowNs()});
  a.nlink = 0;
  node->Overlay(a);
  return a;
}

void ReplyAttr(fuse_req_t req, fuse_ino_t ino, Result<fs::Attr> a) {
  MountContext& ctx = Ctx(req);
  if (!a.ok()) {
    std::optional<fs::Attr> open = fs::ErrnoOf(a.status()) == ENOENT ? UnlinkedButOpen(ctx, ino) : std::nullopt;
    if (!open) return ReplyStatus(req, a.status());
    a = *open;
  }
  ctx.open_files.Overlay(*a);
  struct stat st = ToStat(*a);
  fuse_reply_attr(req, &st, ctx.attr_timeout);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) { ReplyAttr(req, ino, Ctx(req).fs.GetAttr(ino)); }

fs::AttrChange ToChange(const struct stat& attr, int to_set) {
  fs::AttrChange c;
  if (to_set & FUSE_SET_ATTR_MODE) c.mode = attr.st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) c.uid = attr.st_uid;
  if (to_set & FUSE_SET_ATTR_GID) c.gid = attr.st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) c.size = static_cast<uint64_t>(attr.st_size);
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    c.atime_ns = fs::kNow;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    c.atime_ns = attr.st_atim.tv_sec * 1'000'000'000LL + attr.st_atim.tv_nsec;
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    c.mtime_ns = fs::kNow;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    c.mtime_ns = attr.st_mtim.tv_sec * 1'000'000'000LL + attr.st_mtim.tv_nsec;
  }
  return c;
}

// A truncate of a file open here for writing goes through its shared File, which would
// otherwise keep (and later publish) the size it knew; Flush makes the new size visible to
// other clients now. (A file open only for reading is cut by SetAttr: FileSystem then fixes
// the size its own open File knows.)
Status TruncateOpen(MountContext& ctx, fuse_ino_t ino, fs::AttrChange& change) {
  if (!change.size) return OkStatus();
  std::shared_ptr<OpenInode> node = ctx.open_files.Find(ino);
  std::shared_ptr<fs::File> file = node && node->writable() ? node->file() : nullptr;
  if (!file) return OkStatus();
  if (Status s = file->Truncate(*change.size); !s.ok()) return s;
  node->NoteWrite();
  change.size.reset();
  return file->Flush();
}

// Times set explicitly (touch -d, cp -a, tar) on a file open here with unpublished writes:
// those are published first, so that the close after cannot stamp its own mtime over them.
Status PublishBeforeTimes(MountContext& ctx, fuse_ino_t ino, const fs::AttrChange& change) {
  if (!change.mtime_ns || *change.mtime_ns == fs::kNow) return OkStatus();
  std::shared_ptr<OpenInode> node = ctx.open_files.Find(ino);
  std::shared_ptr<fs::File> file = node ? node->file() : nullptr;
  if (!file) return OkStatus();
  node->ForgetWrites();
  return file->Flush();
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  MountContext& ctx = Ctx(req);
  if (int err = WriteDenied(ctx)) return (void)fuse_reply_err(req, err);
  fs::AttrChange change = ToChange(*attr, to_set);
  if (Status s = TruncateOpen(ctx, ino, change); !s.ok()) return ReplyStatus(req, s);
  if (Status s = PublishBeforeTimes(ctx, ino, change); !s.ok()) return ReplyStatus(req, s);
  ReplyAttr(req, ino, ctx.fs.SetAttr(ino, change));
}

void Readlink(fuse_req_t req, fuse_ino_t ino) {
  auto target = Ctx(req).fs.Readlink(ino);
  if (!target.ok()) return ReplyStatus(req, target.status());
  fuse_reply_readlink(req, target->c_str());
}

// EROFS, ENAMETOOLONG or 0 for an operation that makes `name`.
int CheckMake(fuse_req_t req, const char* name) {
  if (int err = WriteDenied(Ctx(req))) return err;
  return CheckName(name);
}

void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  if (int err = CheckMake(req, name)) return (void)fuse_reply_err(req, err);
  const fuse_ctx* who = fuse_req_ctx(req);
  ReplyEntry(req, Ctx(req).fs.Mkdir(parent, name, mode & 07777, who->uid, who->gid));
}

// Only regular files: the file system holds no devices, FIFOs or sockets.
void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  if (int err = CheckMake(req, name)) return (void)fuse_reply_err(req, err);
  if (!S_ISREG(mode)) return (void)fuse_reply_err(req, EPERM);
  const fuse_ctx* who = fuse_req_ctx(req);
  auto made = Ctx(req).fs.Create(parent, name, mode & 07777, who->uid, who->gid, /*exclusive=*/true);
  if (!made.ok()) return ReplyStatus(req, made.status());
  if (Status s = made->second->Close(); !s.ok()) return ReplyStatus(req, s);
  ReplyEntry(req, made->first);
}

void Symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  if (int err = CheckMake(req, name)) return (void)fuse_reply_err(req, err);
  const fuse_ctx* who = fuse_req_ctx(req);
  ReplyEntry(req, Ctx(req).fs.Symlink(parent, name, target, who->uid, who->gid));
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  if (int err = CheckMake(req, new_name)) return (void)fuse_reply_err(req, err);
  ReplyEntry(req, Ctx(req).fs.Link(ino, new_parent, new_name));
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (int err = WriteDenied(Ctx(req))) return (void)fuse_reply_err(req, err);
  ReplyStatus(req, Ctx(req).fs.Unlink(parent, name));
}

void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (int err = WriteDenied(Ctx(req))) return (void)fuse_reply_err(req, err);
  ReplyStatus(req, Ctx(req).fs.Rmdir(parent, name));
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name,
            unsigned int flags) {
  if (int err = CheckMake(req, new_name)) return (void)fuse_reply_err(req, err);
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return (void)fuse_reply_err(req, EINVAL);  // RENAME_WHITEOUT
  unsigned fs_flags = 0;
  if (flags & RENAME_NOREPLACE) fs_flags |= fs::kNoReplace;
  if (flags & RENAME_EXCHANGE) fs_flags |= fs::kExchange;
  ReplyStatus(req, Ctx(req).fs.Rename(parent, name, new_parent, new_name, fs_flags));
}

void StatFs(fuse_req_t req, fuse_ino_t) {
  auto s = Ctx(req).fs.StatFs();
  if (!s.ok()) return ReplyStatus(req, s.status());
  struct statvfs v {};
  const uint64_t bs = s->block_size ? s->block_size : 4096;
  v.f_bsize = bs;
  v.f_frsize = bs;
  v.f_blocks = s->total_bytes / bs;
  v.f_bfree = s->free_bytes / bs;
  v.f_bavail = v.f_bfree;
  // Inodes are records, limited only by space: report as many as there are free blocks.
  v.f_files = v.f_blocks;
  v.f_ffree = v.f_bfree;
  v.f_favail = v.f_bfree;
  v.f_namemax = s->max_name;
  fuse_reply_statfs(req, &v);
}

}  // namespace

void SetNodeOps(fuse_lowlevel_ops& ops) {
  ops.lookup = Lookup;
  ops.forget = Forget;
  ops.forget_multi = ForgetMulti;
  ops.getattr = GetAttr;
  ops.setattr = SetAttr;
  ops.readlink = Readlink;
  ops.mknod = Mknod;
  ops.mkdir = Mkdir;
  ops.symlink = Symlink;
  ops.link = Link;
  ops.unlink = Unlink;
  ops.rmdir = Rmdir;
  ops.rename = Rename;
  ops.statfs = StatFs;
}

}  // namespace penstock::fuse
