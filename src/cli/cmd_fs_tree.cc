// `penstock fs rm|du|cp`: the commands that may walk whole trees (fs_session.h).
#include <cerrno>
#include <cstdio>
#include <unordered_set>

#include "cli/fs_copy.h"
#include "cli/fs_session.h"
#include "cli/fs_tree.h"
#include "fs/fs_errors.h"

namespace penstock::cli {

namespace {

// Removes everything under directory `dir` (at `path`), entries by inode and name (no path
// walks), then nothing else: the caller removes `dir` itself.
Status RemoveBelow(fs::FileSystem& fs, const std::string& path, uint64_t dir, WalkProgress& progress) {
  WalkVisitor v;
  v.enter = [&](const std::string& p, uint64_t parent, const fs::DirEntry& e) -> Status {
    if (e.type == fs::FileType::kDirectory) return OkStatus();  // emptied first, removed on leave
    progress.Add(1, 0);
    return FsPathError(p, fs.Unlink(parent, e.name));
  };
  v.leave = [&](const std::string& p, uint64_t parent, const fs::DirEntry& e) -> Status {
    progress.Add(1, 0);
    return FsPathError(p, fs.Rmdir(parent, e.name));
  };
  return WalkFs(fs, path, dir, v);
}

Status RemoveOne(fs::FileSystem& fs, const FsFlags& f, const std::string& path, WalkProgress& progress) {
  auto a = fs.StatPath(path);
  if (!a.ok()) {
    if (f.force && fs::ErrnoOf(a.status()) == ENOENT) return OkStatus();
    return FsPathError(path, a.status());
  }
  if (a->type != fs::FileType::kDirectory) return FsPathError(path, fs.UnlinkPath(path));
  if (!f.recursive) return FsPathError(path, fs::FsError(EISDIR, "is a directory; remove trees with -r"));
  if (Status s = RemoveBelow(fs, path, a->ino, progress); !s.ok()) return s;
  return FsPathError(path, fs.RmdirPath(path));
}

struct Usage {
  uint64_t bytes = 0, files = 0, dirs = 0, symlinks = 0;
};

Result<Usage> DiskUsage(fs::FileSystem& fs, const std::string& path, WalkProgress& progress) {
  auto top = fs.StatPath(path);
  if (!top.ok()) return FsPathError(path, top.status());
  Usage u;
  if (top->type != fs::FileType::kDirectory) {
    (top->type == fs::FileType::kSymlink ? u.symlinks : u.files) = 1;
    u.bytes = top->type == fs::FileType::kRegular ? top->size : 0;
    return u;
  }
  u.dirs = 1;
  std::unordered_set<uint64_t> linked;  // inodes with several names, counted once
  WalkVisitor v;
  v.enter = [&](const std::string& p, uint64_t, const fs::DirEntry& e) -> Status {
    if (e.type == fs::FileType::kDirectory) return ++u.dirs, progress.Add(1, 0), OkStatus();
    if (e.type == fs::FileType::kSymlink) return ++u.symlinks, progress.Add(1, 0), OkStatus();
    auto a = fs.GetAttr(e.ino);
    if (!a.ok()) return FsPathError(p, a.status());
    if (a->nlink > 1 && !linked.insert(e.ino).second) return OkStatus();
    ++u.files;
    u.bytes += a->size;
    progress.Add(1, a->size);
    return OkStatus();
  };
  if (Status s = WalkFs(fs, path, top->ino, v); !s.ok()) return s;
  return u;
}

ProgressMode WalkMode(const FsFlags& f) { return ChooseProgressMode(f.g.json || f.quiet, f.progress, ProgressMode::kNone); }

}  // namespace

int FsRemove(const FsFlags& f) {
  auto s = OpenFsSession(f);
  if (!s.ok()) return ReportFsError(s.status(), f.g.json);
  WalkProgress progress(WalkMode(f), "rm");
  nlohmann::json removed = nlohmann::json::array();
  for (const std::string& given : f.paths) {
    const std::string path = StripFs(given);
    if (Status st = RemoveOne(*s->fs, f, path, progress); !st.ok()) {
      progress.Clear();
      return ReportFsError(st, f.g.json);
    }
    removed.push_back(path);
  }
  progress.Clear();
  if (f.g.json) PrintJson({{"removed", removed}});
  return 0;
}

int FsDu(const FsFlags& f) {
  auto s = OpenFsSession(f);
  if (!s.ok()) return ReportFsError(s.status(), f.g.json);
  std::vector<std::string> paths = f.paths;
  if (paths.empty()) paths.push_back("/");
  for (const std::string& given : paths) {
    const std::string path = StripFs(given);
    WalkProgress progress(WalkMode(f), "du");
    auto u = DiskUsage(*s->fs, path, progress);
    progress.Clear();
    if (!u.ok()) return ReportFsError(u.status(), f.g.json);
    if (f.g.json) {
      PrintJson({{"path", path}, {"bytes", u->bytes}, {"files", u->files}, {"directories", u->dirs},
                 {"symlinks", u->symlinks}});
    } else {
      std::printf("%-10s %llu bytes in %llu files, %llu directories, %llu symlinks  %s\n",
                  HumanBytes(static_cast<double>(u->bytes)).c_str(), static_cast<unsigned long long>(u->bytes),
                  static_cast<unsigned long long>(u->files), static_cast<unsigned long long>(u->dirs),
                  static_cast<unsigned long long>(u->symlinks), path.c_str());
    }
  }
  return 0;
}

int FsCopy(const FsFlags& f) {
  if (f.paths.size() != 2) {
    std::fprintf(stderr, "penstock: error: cp needs SRC and DST, one of them fs:PATH (see --help)\n");
    return 2;
  }
  const bool src_fs = f.paths[0].rfind("fs:", 0) == 0;
  const bool dst_fs = f.paths[1].rfind("fs:", 0) == 0;
  if (src_fs == dst_fs) {
    std::fprintf(stderr, "penstock: error: cp copies between a local path and the container: mark exactly one "
                         "of SRC and DST with fs: (`cp ./a fs:/a` or `cp fs:/a ./a`) (see --help)\n");
    return 2;
  }
  auto s = OpenFsSession(f);
  if (!s.ok()) return ReportFsError(s.status(), f.g.json);
  CopyOptions o{f.recursive, f.jobs, f.g.json, f.quiet, f.progress};
  if (dst_fs) return CopyIn(*s->fs, f.paths[0], StripFs(f.paths[1]), o);
  return CopyOut(*s->fs, StripFs(f.paths[0]), f.paths[1], o);
}

}  // namespace penstock::cli
