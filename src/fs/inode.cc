// inode.cc — see inode.h.
#include "fs/inode.h"

#include <chrono>
#include <cstdio>
#include <cstring>

namespace penstock::fs {

namespace {

constexpr uint8_t kInodeVersion = 1;
constexpr uint8_t kDirentVersion = 1;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);  // little-endian hosts only (x86, arm64)
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void Bytes(std::span<const std::byte> b) {
    Put<uint32_t>(static_cast<uint32_t>(b.size()));
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void Text(const std::string& s) { Bytes({reinterpret_cast<const std::byte*>(s.data()), s.size()}); }
  std::vector<std::byte> Take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  bool Get(T& v) {
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool Bytes(std::vector<std::byte>& b) {
    uint32_t n = 0;
    if (!Get(n) || in_.size() - at_ < n) return false;
    b.assign(in_.begin() + at_, in_.begin() + at_ + n);
    at_ += n;
    return true;
  }
  bool Text(std::string& s) {
    std::vector<std::byte> b;
    if (!Bytes(b)) return false;
    s.assign(reinterpret_cast<const char*>(b.data()), b.size());
    return true;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  size_t at_ = 0;
};

bool ValidType(uint8_t t) { return t >= 1 && t <= 3; }

}  // namespace

Attr Inode::ToAttr() const {
  return Attr{ino, type, mode, uid, gid, nlink, size, atime_ns, mtime_ns, ctime_ns};
}

size_t Inode::xattr_bytes() const {
  size_t n = 0;
  for (const auto& [k, v] : xattrs) n += k.size() + v.size();
  return n;
}

std::vector<std::byte> EncodeInode(const Inode& i) {
  Writer w;
  w.Put(kInodeVersion);
  w.Put(static_cast<uint8_t>(i.type));
  for (uint32_t v : {i.mode, i.uid, i.gid, i.nlink}) w.Put(v);
  w.Put(i.size);
  for (int64_t t : {i.atime_ns, i.mtime_ns, i.ctime_ns}) w.Put(t);
  w.Put(i.parent);
  w.Text(i.target);
  w.Put<uint32_t>(static_cast<uint32_t>(i.xattrs.size()));
  for (const auto& [k, v] : i.xattrs) {
    w.Text(k);
    w.Bytes(v);
  }
  return w.Take();
}

Result<Inode> DecodeInode(std::span<const std::byte> bytes, uint64_t ino) {
  auto bad = [&](const std::string& why) {
    return DataLoss("inode " + std::to_string(ino) + "'s record is unreadable: " + why);
  };
  Reader r(bytes);
  Inode i;
  i.ino = ino;
  uint8_t version = 0, type = 0;
  if (!r.Get(version)) return bad("empty");
  if (version != kInodeVersion) return bad("version " + std::to_string(version) + " (this client reads 1)");
  if (!r.Get(type) || !ValidType(type)) return bad("no valid type");
  i.type = static_cast<FileType>(type);
  if (!r.Get(i.mode) || !r.Get(i.uid) || !r.Get(i.gid) || !r.Get(i.nlink) || !r.Get(i.size) || !r.Get(i.atime_ns) ||
      !r.Get(i.mtime_ns) || !r.Get(i.ctime_ns) || !r.Get(i.parent) || !r.Text(i.target)) {
    return bad("cut short");
  }
  uint32_t n = 0;
  if (!r.Get(n)) return bad("cut short in its xattrs");
  for (uint32_t k = 0; k < n; ++k) {
    std::string name;
    std::vector<std::byte> value;
    if (!r.Text(name) || !r.Bytes(value)) return bad("cut short in its xattrs");
    i.xattrs[name] = std::move(value);
  }
  if (!r.done()) return bad("bytes left over");
  return i;
}

std::vector<std::byte> EncodeDirent(const Dirent& d) {
  Writer w;
  w.Put(kDirentVersion);
  w.Put(static_cast<uint8_t>(d.type));
  w.Put(d.ino);
  return w.Take();
}

Result<Dirent> DecodeDirent(std::span<const std::byte> bytes) {
  Reader r(bytes);
  uint8_t version = 0, type = 0;
  Dirent d;
  if (!r.Get(version) || version != kDirentVersion || !r.Get(type) || !ValidType(type) || !r.Get(d.ino) ||
      !r.done()) {
    return DataLoss("a directory entry record is unreadable (" + std::to_string(bytes.size()) + " bytes)");
  }
  d.type = static_cast<FileType>(type);
  return d;
}

std::string InodeKey(uint64_t ino) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(ino));
  return buf;
}

std::string DirGroup(uint64_t dir) { return "d" + InodeKey(dir); }

std::string DataObjectName(uint64_t ino) { return "fs-data/" + InodeKey(ino); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace penstock::fs
