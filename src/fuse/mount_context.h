// mount_context.h — what every FUSE operation of one mount shares, and the small pieces they
// all use: the reply for an error, attributes in the kernel's shape, name checks.
//
// One MountContext per mount, the session's userdata (fuse_req_userdata); the FileSystem is
// thread-safe and OpenFiles locks itself, so FUSE worker threads use it at once.
#pragma once

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

#include <string>

#include "fuse/open_files.h"
#include "penstock/fs.h"

namespace penstock::fuse {

struct MountContext {
  fs::FileSystem& fs;
  bool read_only = false;
  double attr_timeout = 1.0;   // seconds the kernel may trust attributes we reply
  double entry_timeout = 1.0;  // seconds it may trust a name -> inode answer
  fuse_session* session = nullptr;
  OpenFiles open_files;
};

inline MountContext& Ctx(fuse_req_t req) { return *static_cast<MountContext*>(fuse_req_userdata(req)); }

// Replies the errno `s` carries (fs::ErrnoOf).
void ReplyStatus(fuse_req_t req, const Status& s);

// `a` as struct stat.
struct stat ToStat(const fs::Attr& a);
// The entry reply for `a`, with the mount's timeouts, after overlaying what this mount has
// open (OpenFiles::Overlay).
fuse_entry_param ToEntry(MountContext& ctx, fs::Attr a);

// 0, or the errno for a name the file system cannot hold (ENAMETOOLONG over 255 bytes).
int CheckName(const char* name);

// EROFS on a read-only mount, else 0.
inline int WriteDenied(const MountContext& ctx) { return ctx.read_only ? EROFS : 0; }

// The operations of each concern (fuse_ops_*.cc) set their members of `ops`.
void SetNodeOps(fuse_lowlevel_ops& ops);
void SetFileOps(fuse_lowlevel_ops& ops);
void SetDirOps(fuse_lowlevel_ops& ops);
void SetXattrOps(fuse_lowlevel_ops& ops);

}  // namespace penstock::fuse
