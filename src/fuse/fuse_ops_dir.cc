// fuse_ops_dir.cc — FUSE operations on open directories: opendir, readdir, readdirplus,
// releasedir, fsyncdir.
//
// A handle is a DirHandle (dir_handle.h): pages of FileSystem::ReadDir fetched as the kernel
// asks for more, kept for the handle's life so offsets stay stable. readdirplus adds each
// entry's attributes (a GetAttr per entry) so that `ls -l` needs no lookups; the kernel picks
// plain readdir when nobody looks at attributes (os.walk, find without -type), as
// FUSE_CAP_READDIRPLUS_AUTO lets it.
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "fuse/dir_handle.h"
#include "fuse/mount_context.h"

namespace penstock::fuse {

namespace {

// Entries asked of FileSystem::ReadDir at once: enough to fill a few kernel buffers (4 KiB of
// names is ~100 entries) without holding a huge directory in memory.
constexpr uint32_t kPageEntries = 512;

DirHandle& Handle(fuse_file_info* fi) { return *reinterpret_cast<DirHandle*>(fi->fh); }

void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  // The kernel sends opendir only for inodes it knows as directories.
  fs::FileSystem* fs = &Ctx(req).fs;
  auto* dh = new DirHandle([fs, ino](const std::string& cursor) { return fs->ReadDir(ino, cursor, kPageEntries); });
  fi->fh = reinterpret_cast<uint64_t>(dh);
  if (fuse_reply_open(req, fi) != 0) delete dh;  // interrupted: no releasedir will come
}

// The name, inode and type at listing offset `off` (dir_handle.h); false past the end.
struct Slot {
  std::string name;
  uint64_t ino = 0;
  fs::FileType type = fs::FileType::kDirectory;
};

Result<bool> SlotAt(DirHandle& dh, fuse_ino_t dir, off_t off, Slot& out) {
  if (off < 2) {
    out = Slot{off == 0 ? "." : "..", off == 0 ? dir : fs::kRootIno, fs::FileType::kDirectory};  // ".." unknown here
    return true;
  }
  auto e = dh.Entry(static_cast<size_t>(off - 2));
  if (!e.ok()) return e.status();
  if (*e == nullptr) return false;
  out = Slot{(*e)->name, (*e)->ino, (*e)->type};
  return true;
}

// Adds `s` (at offset `off`, continuing at off + 1) to `buf` when it fits; returns the bytes
// used, or 0 when it does not fit.
size_t AddPlain(fuse_req_t req, char* buf, size_t room, const Slot& s, off_t off) {
  struct stat st {};
  st.st_ino = s.ino;
  st.st_mode = ToStat(fs::Attr{.type = s.type}).st_mode;
  const size_t need = fuse_add_direntry(req, buf, room, s.name.c_str(), &st, off + 1);
  return need <= room ? need : 0;
}

size_t AddPlus(fuse_req_t req, char* buf, size_t room, const Slot& s, off_t off) {
  if (fuse_add_direntry_plus(req, nullptr, 0, s.name.c_str(), nullptr, 0) > room) return 0;
  MountContext& ctx = Ctx(req);
  fuse_entry_param e{};
  e.attr.st_ino = s.ino;
  e.attr.st_mode = ToStat(fs::Attr{.type = s.type}).st_mode;
  // "." and "..", and an entry removed since the page was read, go without attributes
  // (ino 0: the kernel then links nothing and looks the name up when it needs it).
  if (s.name != "." && s.name != "..") {
    if (auto a = ctx.fs.GetAttr(s.ino); a.ok()) e = ToEntry(ctx, *a);
  }
  return fuse_add_direntry_plus(req, buf, room, s.name.c_str(), &e, off + 1);
}

void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  DirHandle& dh = Handle(fi);
  std::lock_guard lock(dh.mutex());
  if (off == 0) dh.Rewind();
  std::string buf(size, '\0');
  size_t used = 0;
  for (;; ++off) {
    Slot s;
    auto more = SlotAt(dh, ino, off, s);
    if (!more.ok()) {
      if (used > 0) break;  // what fits is answered; the error comes with the next call
      return ReplyStatus(req, more.status());
    }
    if (!*more) break;
    const size_t n = plus ? AddPlus(req, buf.data() + used, size - used, s, off)
                          : AddPlain(req, buf.data() + used, size - used, s, off);
    if (n == 0) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, /*plus=*/false);
}

void ReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, /*plus=*/true);
}

void ReleaseDir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete &Handle(fi);
  fuse_reply_err(req, 0);
}

// Namespace changes are durable when they return (fs.h): nothing to wait for.
void FsyncDir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }

}  // namespace

void SetDirOps(fuse_lowlevel_ops& ops) {
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.readdirplus = ReadDirPlus;
  ops.releasedir = ReleaseDir;
  ops.fsyncdir = FsyncDir;
}

}  // namespace penstock::fuse
