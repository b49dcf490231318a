// fuse_ops_dir.cc — FUSE operations on open directories: opendir, readdir, readdirplus,
// releasedir, fsyncdir.
//
// A handle is a DirHandle (dir_handle.h): pages of FileSystem::ReadDir fetched as the kernel
// asks for more, kept for the handle's life so offsets stay stable. readdirplus adds each
// entry's attributes (a GetAttr per entry, those of one reply in parallel) so that `ls -l` needs no lookups; the kernel picks
// plain readdir when nobody looks at attributes (os.walk, find without -type), as
// FUSE_CAP_READDIRPLUS_AUTO lets it.
#include <sys/stat.h>

#include <cerrno>
#include <future>
#include <string>
#include <vector>

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

// The slots from `off` on whose entries fit in `size` bytes (fewer at the listing's end).
Result<std::vector<Slot>> SlotsThatFit(fuse_req_t req, DirHandle& dh, fuse_ino_t ino, off_t off, size_t size,
                                       bool plus) {
  std::vector<Slot> slots;
  for (size_t used = 0;; ++off) {
    Slot s;
    auto more = SlotAt(dh, ino, off, s);
    if (!more.ok()) {
      if (!slots.empty()) break;  // what fits is answered; the error comes with the next call
      return more.status();
    }
    if (!*more) break;
    used += plus ? fuse_add_direntry_plus(req, nullptr, 0, s.name.c_str(), nullptr, 0)
                 : fuse_add_direntry(req, nullptr, 0, s.name.c_str(), nullptr, 0);
    if (used > size) break;
    slots.push_back(std::move(s));
  }
  return slots;
}

// Entries with attributes for readdirplus, fetched in parallel (each a round trip). "." and
// "..", and an entry removed since its page was read, go without attributes (ino 0: the
// kernel then links nothing and looks the name up when it needs it).
std::vector<fuse_entry_param> EntriesOf(fuse_req_t req, const std::vector<Slot>& slots) {
  MountContext& ctx = Ctx(req);
  std::vector<fuse_entry_param> entries(slots.size());
  std::vector<std::future<Result<fs::Attr>>> attrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    entries[i].attr.st_ino = slots[i].ino;
    entries[i].attr.st_mode = ToStat(fs::Attr{.type = slots[i].type}).st_mode;
    if (slots[i].name == "." || slots[i].name == "..") continue;
    attrs[i] = std::async(std::launch::async, [&ctx, ino = slots[i].ino] { return ctx.fs.GetAttr(ino); });
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!attrs[i].valid()) continue;
    if (auto a = attrs[i].get(); a.ok()) entries[i] = ToEntry(ctx, *a);
  }
  return entries;
}

// The reply to a readdir(plus) from `off` in at most `size` bytes, built under the handle's lock.
Result<std::string> ListingReply(fuse_req_t req, DirHandle& dh, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  std::lock_guard lock(dh.mutex());
  if (off == 0) dh.Rewind();
  PS_ASSIGN_OR_RETURN(std::vector<Slot> slots, SlotsThatFit(req, dh, ino, off, size, plus));
  std::vector<fuse_entry_param> entries;
  if (plus) entries = EntriesOf(req, slots);
  std::string buf(size, '\0');
  size_t used = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    const off_t next = off + static_cast<off_t>(i) + 1;
    char* at = buf.data() + used;
    if (plus) {
      used += fuse_add_direntry_plus(req, at, size - used, s.name.c_str(), &entries[i], next);
    } else {
      struct stat st {};
      st.st_ino = s.ino;
      st.st_mode = ToStat(fs::Attr{.type = s.type}).st_mode;
      used += fuse_add_direntry(req, at, size - used, s.name.c_str(), &st, next);
    }
  }
  buf.resize(used);
  return buf;
}

// Replies only once the handle's lock is released: as soon as the kernel has the reply the
// directory may be closed, and releasedir (on another thread) deletes the handle and its mutex.
void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  Result<std::string> reply = ListingReply(req, Handle(fi), ino, size, off, plus);
  if (!reply.ok()) return ReplyStatus(req, reply.status());
  fuse_reply_buf(req, reply->data(), reply->size());
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
