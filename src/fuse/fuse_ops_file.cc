// fuse_ops_file.cc — FUSE operations on open regular files: create, open, read, write, flush,
// fsync, release.
//
// Every open of an inode in this mount shares one fs::File (open_files.h); the handle the
// kernel keeps (fi->fh) is a FileHandle naming it.
//
// Close-to-open: open never sets keep_cache, so the kernel drops the file's cached pages at
// each open, and it invalidates the inode's cached attributes, so the size another client
// published at close is fetched again before a read past the old end. O_APPEND handles are
// direct_io: the end is where this daemon's File says it is, not the kernel's cached size,
// and their bytes must not sit in the page cache at another offset.
#include <fcntl.h>

#include <cerrno>
#include <vector>

#include "common/log.h"
#include "fuse/mount_context.h"

namespace penstock::fuse {

namespace {

struct FileHandle {
  std::shared_ptr<OpenInode> node;
  bool append = false;
};

FileHandle& Handle(fuse_file_info* fi) { return *reinterpret_cast<FileHandle*>(fi->fh); }

bool Writes(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

unsigned ToOpenFlags(bool writable) { return writable ? (fs::kRead | fs::kWrite) : fs::kRead; }

// Hands `node` to the kernel as a new handle in `fi`, then replies with `reply`.
template <typename Reply>
void ReplyOpened(fuse_req_t req, fuse_ino_t ino, std::shared_ptr<OpenInode> node, fuse_file_info* fi, Reply reply) {
  MountContext& ctx = Ctx(req);
  const bool append = (fi->flags & O_APPEND) != 0;
  fi->fh = reinterpret_cast<uint64_t>(new FileHandle{std::move(node), append});
  fi->keep_cache = 0;
  fi->direct_io = append ? 1 : 0;
  // Attributes only (offset < 0): no page-cache lock is taken, so this is safe inside open.
  if (ctx.session != nullptr) fuse_lowlevel_notify_inval_inode(ctx.session, ino, -1, 0);
  if (reply() != 0) {  // the opener was interrupted: nobody will release this handle
    auto* h = reinterpret_cast<FileHandle*>(fi->fh);
    ctx.open_files.Release(h->node).IgnoreError();
    delete h;
  }
}

// O_TRUNC on an open through the kernel's atomic_o_trunc: cut the shared File to 0.
Status TruncateAtOpen(OpenInode& node, int flags) {
  if (!(flags & O_TRUNC) || !Writes(flags)) return OkStatus();
  std::shared_ptr<fs::File> file = node.file();
  if (file->size() == 0) return OkStatus();
  if (Status s = file->Truncate(0); !s.ok()) return s;
  node.NoteWrite();
  return file->Flush();
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  MountContext& ctx = Ctx(req);
  const bool writable = Writes(fi->flags);
  if (writable || (fi->flags & O_TRUNC)) {
    if (int err = WriteDenied(ctx)) return (void)fuse_reply_err(req, err);
  }
  auto node = ctx.open_files.Acquire(ino, writable, [&](bool w) { return ctx.fs.OpenFile(ino, ToOpenFlags(w)); });
  if (!node.ok()) return ReplyStatus(req, node.status());
  if (Status s = TruncateAtOpen(**node, fi->flags); !s.ok()) {
    ctx.open_files.Release(*node).IgnoreError();
    return ReplyStatus(req, s);
  }
  ReplyOpened(req, ino, std::move(*node), fi, [&] { return fuse_reply_open(req, fi); });
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  MountContext& ctx = Ctx(req);
  if (int err = WriteDenied(ctx)) return (void)fuse_reply_err(req, err);
  if (int err = CheckName(name)) return (void)fuse_reply_err(req, err);
  const fuse_ctx* who = fuse_req_ctx(req);
  auto made = ctx.fs.Create(parent, name, mode & 07777, who->uid, who->gid, (fi->flags & O_EXCL) != 0);
  if (!made.ok()) return ReplyStatus(req, made.status());
  const uint64_t ino = made->first.ino;
  std::shared_ptr<OpenInode> node = ctx.open_files.Adopt(ino, std::move(made->second));
  if (fi->flags & O_EXCL) node->set_known_without_caps(true);  // new: it carries no xattrs
  // An existing file (a create that raced with another) is opened, and cut when O_TRUNC asks.
  if (Status s = TruncateAtOpen(*node, fi->flags); !s.ok()) {
    ctx.open_files.Release(node).IgnoreError();
    return ReplyStatus(req, s);
  }
  fuse_entry_param e = ToEntry(ctx, made->first);
  ReplyOpened(req, ino, std::move(node), fi, [&] { return fuse_reply_create(req, &e, fi); });
}

void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  thread_local std::vector<std::byte> buf;
  if (buf.size() < size) buf.resize(size);
  std::shared_ptr<fs::File> file = Handle(fi).node->file();
  auto n = file->Read(static_cast<uint64_t>(off), std::span<std::byte>(buf.data(), size));
  if (!n.ok()) return ReplyStatus(req, n.status());
  fuse_reply_buf(req, reinterpret_cast<const char*>(buf.data()), *n);
}

void Write(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t off, fuse_file_info* fi) {
  if (int err = WriteDenied(Ctx(req))) return (void)fuse_reply_err(req, err);
  FileHandle& h = Handle(fi);
  std::shared_ptr<fs::File> file = h.node->file();
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Status s;
  if (h.append) {
    std::lock_guard lock(h.node->append_mutex());
    s = file->Write(file->size(), bytes);
  } else {
    s = file->Write(static_cast<uint64_t>(off), bytes);
  }
  if (!s.ok()) return ReplyStatus(req, s);
  h.node->NoteWrite();
  fuse_reply_write(req, size);
}

// close() of any descriptor of the file: publish size and mtime so other clients see them.
void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { ReplyStatus(req, Handle(fi).node->file()->Flush()); }

void Fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) { ReplyStatus(req, Handle(fi).node->file()->Fsync()); }

void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  if (Status s = Ctx(req).open_files.Release(h->node); !s.ok()) {
    // Nobody is left to tell: close(2) returned with the flush before this.
    PS_LOG_WARN("fuse: closing inode {}: {}", ino, s.ToString());
  }
  delete h;
  fuse_reply_err(req, 0);
}

}  // namespace

void SetFileOps(fuse_lowlevel_ops& ops) {
  ops.create = Create;
  ops.open = Open;
  ops.read = Read;
  ops.write = Write;
  ops.flush = Flush;
  ops.fsync = Fsync;
  ops.release = Release;
}

}  // namespace penstock::fuse
