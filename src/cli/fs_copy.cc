// fs_copy.cc — see fs_copy.h.
#include "cli/fs_copy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/fs_copy_file.h"
#include "cli/fs_tree.h"
#include "cli/progress.h"

namespace penstock::cli {

namespace {

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Where a copy of `src` lands: inside `dst` when that is an existing directory, else `dst`.
std::string TargetIn(bool dst_is_dir, const std::string& dst, const std::string& src) {
  return dst_is_dir ? JoinFsPath(dst, BaseName(src)) : dst;
}

// How one run went, and its summary at the end. Thread-safe.
class CopyRun {
 public:
  CopyRun(const CopyOptions& o, uint64_t files, uint64_t bytes)
      : o_(o), progress_(ChooseProgressMode(o.quiet || o.json, o.progress, ProgressMode::kNone), "cp", files, bytes,
                         std::chrono::seconds(10)) {}
  void Moved(uint64_t n) { progress_.AddBytes(static_cast<int64_t>(n)); }
  void Done(const CopyItem& item, const Status& s);
  int Finish();

 private:
  const CopyOptions& o_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  TreeProgress progress_;
  std::mutex mu_;
  uint64_t files_ = 0, dirs_ = 0, links_ = 0, bytes_ = 0, failed_ = 0, skipped_ = 0;
};

void CopyRun::Done(const CopyItem& item, const Status& s) {
  if (item.kind == CopyItem::Kind::kFile) progress_.FileDone(s.ok());
  std::lock_guard lock(mu_);
  if (item.kind == CopyItem::Kind::kSkip) {
    ++skipped_;
    if (!o_.quiet) progress_.Warn("penstock: skipped '" + item.from + "': " + item.why);
    return;
  }
  if (!s.ok()) {
    ++failed_;
    progress_.Warn("penstock: error: " + s.message());
    return;
  }
  switch (item.kind) {
    case CopyItem::Kind::kDirectory: ++dirs_; break;
    case CopyItem::Kind::kSymlink: ++links_; break;
    default: ++files_; bytes_ += item.size;
  }
}

int CopyRun::Finish() {
  progress_.Stop();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (o_.json) {
    PrintJson({{"files", files_}, {"directories", dirs_}, {"symlinks", links_}, {"bytes", bytes_},
               {"failed", failed_}, {"skipped", skipped_}, {"seconds", secs}});
  } else if (!o_.quiet) {
    std::fprintf(stderr, "cp %llu files (%s), %llu directories, %llu symlinks in %.2f s; %llu failed, %llu skipped\n",
                 static_cast<unsigned long long>(files_), HumanBytes(static_cast<double>(bytes_)).c_str(),
                 static_cast<unsigned long long>(dirs_), static_cast<unsigned long long>(links_), secs,
                 static_cast<unsigned long long>(failed_), static_cast<unsigned long long>(skipped_));
  }
  return failed_ > 0 ? 1 : 0;
}

// Makes directories (in order: each before what it holds), then files on `jobs` threads, then
// symbolic links. `make` does one item.
int RunPlan(const std::vector<CopyItem>& items, const CopyOptions& o,
            const std::function<Status(const CopyItem&, CopyRun&)>& make) {
  uint64_t files = 0, bytes = 0;
  std::vector<const CopyItem*> file_items;
  for (const CopyItem& i : items) {
    if (i.kind != CopyItem::Kind::kFile) continue;
    ++files;
    bytes += i.size;
    file_items.push_back(&i);
  }
  CopyRun run(o, files, bytes);
  for (const CopyItem& i : items) {
    if (i.kind == CopyItem::Kind::kDirectory || i.kind == CopyItem::Kind::kSkip) {
      run.Done(i, i.kind == CopyItem::Kind::kSkip ? OkStatus() : make(i, run));
    }
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(1u, std::min<unsigned>(o.jobs, file_items.size())); ++t) {
    threads.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < file_items.size();) run.Done(*file_items[k], make(*file_items[k], run));
    });
  }
  for (auto& t : threads) t.join();
  for (const CopyItem& i : items) {
    if (i.kind == CopyItem::Kind::kSymlink) run.Done(i, make(i, run));
  }
  return run.Finish();
}

Status MakeIn(fs::FileSystem& fs, const CopyItem& i, CopyRun& run) {
  switch (i.kind) {
    case CopyItem::Kind::kDirectory: {
      auto made = fs.MkdirPath(i.to, i.mode);
      if (!made.ok() && fs::ErrnoOf(made.status()) == EEXIST) {
        auto st = fs.StatPath(i.to);
        if (st.ok() && st->type == fs::FileType::kDirectory) return OkStatus();
      }
      return made.ok() ? OkStatus() : FsPathError(i.to, made.status());
    }
    case CopyItem::Kind::kSymlink: {
      std::error_code ec;
      const std::string target = std::filesystem::read_symlink(i.from, ec).string();
      if (ec) return ErrnoStatus(ec.value(), "cannot read link '" + i.from + "'");
      auto made = fs.SymlinkPath(target, i.to);
      return made.ok() ? OkStatus() : FsPathError(i.to, made.status());
    }
    default: return PutFsFile(fs, i.from, i.to, i.mode, [&](uint64_t n) { run.Moved(n); });
  }
}

Status MakeOut(fs::FileSystem& fs, const CopyItem& i, CopyRun& run) {
  switch (i.kind) {
    case CopyItem::Kind::kDirectory: {
      if (::mkdir(i.to.c_str(), i.mode | 0700) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, "cannot create directory '" + i.to + "'");
      }
      return OkStatus();
    }
    case CopyItem::Kind::kSymlink: {
      auto st = fs.StatPath(i.from);
      if (!st.ok()) return FsPathError(i.from, st.status());
      auto target = fs.Readlink(st->ino);
      if (!target.ok()) return FsPathError(i.from, target.status());
      if (::symlink(target->c_str(), i.to.c_str()) != 0) return ErrnoStatus(errno, "cannot create link '" + i.to + "'");
      return OkStatus();
    }
    default: return GetFsFile(fs, i.from, i.to, i.mode, [&](uint64_t n) { run.Moved(n); });
  }
}

int OneFile(const CopyItem& item, const CopyOptions& o, const std::function<Status(const CopyItem&, CopyRun&)>& make) {
  return RunPlan({item}, o, make);
}

}  // namespace

int CopyIn(fs::FileSystem& fs, const std::string& src, const std::string& dst, const CopyOptions& o) {
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) return ReportFsError(ErrnoStatus(errno, "cannot read '" + src + "'"), o.json);
  auto d = fs.StatPath(dst);
  const bool dst_dir = d.ok() && d->type == fs::FileType::kDirectory;
  const std::string to = TargetIn(dst_dir, dst, src);
  auto make = [&fs](const CopyItem& i, CopyRun& run) { return MakeIn(fs, i, run); };
  if (S_ISDIR(st.st_mode)) {
    if (!o.recursive) return ReportFsError(InvalidArgument("'" + src + "' is a directory; copy trees with -r"), o.json);
    auto plan = PlanLocalTree(src, to);
    if (!plan.ok()) return ReportFsError(plan.status(), o.json);
    return RunPlan(*plan, o, make);
  }
  if (!S_ISREG(st.st_mode)) return ReportFsError(InvalidArgument("'" + src + "' is not a regular file"), o.json);
  return OneFile({CopyItem::Kind::kFile, src, to, st.st_mode & 07777, static_cast<uint64_t>(st.st_size), ""}, o,
                 make);
}

int CopyOut(fs::FileSystem& fs, const std::string& src, const std::string& dst, const CopyOptions& o) {
  auto a = fs.StatPath(src);
  if (!a.ok()) return ReportFsError(FsPathError(src, a.status()), o.json);
  struct stat st {};
  const bool dst_dir = ::stat(dst.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string to = TargetIn(dst_dir, dst, src);
  auto make = [&fs](const CopyItem& i, CopyRun& run) { return MakeOut(fs, i, run); };
  if (a->type == fs::FileType::kDirectory) {
    if (!o.recursive) return ReportFsError(InvalidArgument("'" + src + "' is a directory; copy trees with -r"), o.json);
    auto plan = PlanFsTree(fs, src, a->ino, a->mode & 07777, to);
    if (!plan.ok()) return ReportFsError(plan.status(), o.json);
    return RunPlan(*plan, o, make);
  }
  const auto kind = a->type == fs::FileType::kSymlink ? CopyItem::Kind::kSymlink : CopyItem::Kind::kFile;
  return OneFile({kind, src, to, a->mode & 07777, a->size, ""}, o, make);
}

}  // namespace penstock::cli
