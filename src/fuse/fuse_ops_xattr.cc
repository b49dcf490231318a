// fuse_ops_xattr.cc — extended attributes: setxattr, getxattr, listxattr, removexattr.
//
// POSIX ACLs are not kept: "system.*" names (system.posix_acl_access, ...) are refused with
// EOPNOTSUPP and never listed, so cp -a and tar fall back to plain permission bits (stored as a
// plain xattr, an ACL would leave the mode as the copy's first cautious 0600 and mean nothing
// to the kernel, which enforces the mode: default_permissions).
//
// getxattr and listxattr follow the system calls' size probe: asked with size 0 they answer
// the size the value (or the NUL-separated name list) needs; asked with a smaller buffer,
// ERANGE.
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "fuse/mount_context.h"

namespace penstock::fuse {

namespace {

bool IsSystemName(const char* name) { return std::strncmp(name, "system.", 7) == 0; }

constexpr const char* kCapsName = "security.capability";

// The inode's open state when `name` is the capability xattr and the inode is open here.
std::shared_ptr<OpenInode> CapsNode(MountContext& ctx, fuse_ino_t ino, const char* name) {
  return std::strcmp(name, kCapsName) == 0 ? ctx.open_files.Find(ino) : nullptr;
}

// Replies `bytes` under the size-probe rules above.
void ReplySized(fuse_req_t req, const char* bytes, size_t n, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, n);
  if (size < n) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, bytes, n);
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  MountContext& ctx = Ctx(req);
  if (int err = WriteDenied(ctx)) return (void)fuse_reply_err(req, err);
  if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) return (void)fuse_reply_err(req, EINVAL);
  if (IsSystemName(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  unsigned f = 0;
  if (flags & XATTR_CREATE) f |= fs::kXattrCreate;
  if (flags & XATTR_REPLACE) f |= fs::kXattrReplace;
  std::span<const std::byte> v(reinterpret_cast<const std::byte*>(value), size);
  if (auto node = CapsNode(ctx, ino, name)) node->set_known_without_caps(false);
  ReplyStatus(req, ctx.fs.SetXattr(ino, name, v, f));
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (IsSystemName(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  MountContext& ctx = Ctx(req);
  std::shared_ptr<OpenInode> caps = CapsNode(ctx, ino, name);
  if (caps && caps->known_without_caps()) return (void)fuse_reply_err(req, ENODATA);
  auto v = ctx.fs.GetXattr(ino, name);
  if (!v.ok()) {
    if (caps && fs::ErrnoOf(v.status()) == ENODATA) caps->set_known_without_caps(true);
    return ReplyStatus(req, v.status());
  }
  ReplySized(req, reinterpret_cast<const char*>(v->data()), v->size(), size);
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto names = Ctx(req).fs.ListXattr(ino);
  if (!names.ok()) return ReplyStatus(req, names.status());
  std::string list;
  for (const std::string& n : *names) {
    if (IsSystemName(n.c_str())) continue;
    list += n;
    list += '\0';
  }
  ReplySized(req, list.data(), list.size(), size);
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  MountContext& ctx = Ctx(req);
  if (int err = WriteDenied(ctx)) return (void)fuse_reply_err(req, err);
  if (IsSystemName(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  if (auto node = CapsNode(ctx, ino, name)) node->set_known_without_caps(false);
  ReplyStatus(req, ctx.fs.RemoveXattr(ino, name));
}

}  // namespace

void SetXattrOps(fuse_lowlevel_ops& ops) {
  ops.setxattr = SetXattr;
  ops.getxattr = GetXattr;
  ops.listxattr = ListXattr;
  ops.removexattr = RemoveXattr;
}

}  // namespace penstock::fuse
