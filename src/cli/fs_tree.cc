// fs_tree.cc — see fs_tree.h.
#include "cli/fs_tree.h"

#include <cstdio>
#include <cstring>

#include "cli/commands.h"

namespace penstock::cli {

std::string ErrnoName(int err) {
  const char* name = ::strerrorname_np(err);
  return name != nullptr ? name : "errno " + std::to_string(err);
}

Status FsPathError(const std::string& path, const Status& s) {
  if (s.ok()) return s;
  const std::string name = ErrnoName(fs::ErrnoOf(s));
  const bool named = s.message().rfind(name + ":", 0) == 0;
  return Status(s.code(), "'" + path + "': " + (named ? "" : name + ": ") + s.message());
}

int ReportFsError(const Status& s, bool json) {
  if (!json) return ReportError(s, false);
  // The errno is the first "ENAME:" after a ": " in the message (FsPathError and WithContext
  // put context before it), else the one the status code maps to.
  int err = fs::ErrnoOf(s);
  const std::string& m = s.message();
  for (size_t at = m.find(": E"); at != std::string::npos; at = m.find(": E", at + 1)) {
    const int inner = fs::ErrnoOf(Status(s.code(), m.substr(at + 2)));
    if (ErrnoName(inner) == m.substr(at + 2, ErrnoName(inner).size())) {
      err = inner;
      break;
    }
  }
  PrintJson({{"error", {{"code", std::string(StatusCodeName(s.code()))}, {"errno", ErrnoName(err)},
                        {"message", s.message()}}}});
  return 1;
}

std::string JoinFsPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Status WalkFs(fs::FileSystem& fs, const std::string& dir_path, uint64_t dir_ino, const WalkVisitor& v) {
  std::string cursor;
  do {
    auto page = fs.ReadDir(dir_ino, cursor);
    if (!page.ok()) return FsPathError(dir_path, page.status());
    for (const fs::DirEntry& e : page->entries) {
      const std::string path = JoinFsPath(dir_path, e.name);
      if (Status s = v.enter(path, dir_ino, e); !s.ok()) return s;
      if (e.type != fs::FileType::kDirectory) continue;
      if (Status s = WalkFs(fs, path, e.ino, v); !s.ok()) return s;
      if (v.leave) {
        if (Status s = v.leave(path, dir_ino, e); !s.ok()) return s;
      }
    }
    cursor = std::move(page->next);
  } while (!cursor.empty());
  return OkStatus();
}

void WalkProgress::Add(uint64_t entries, uint64_t bytes) {
  entries_ += entries;
  bytes_ += bytes;
  if (mode_ != ProgressMode::kBar) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  std::fprintf(stderr, "\r\033[K%s %llu entries, %s", verb_.c_str(), static_cast<unsigned long long>(entries_),
               HumanBytes(static_cast<double>(bytes_)).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void WalkProgress::Clear() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

}  // namespace penstock::cli
