// `penstock fs ls|mkdir|cp|rm|stat|du|format`: a file system container used without a mount
// (scripts, machines without FUSE). Paths are the container's, from its root ("/a/b"; an
// "fs:" prefix is accepted and, for cp, marks which side is the container's).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "cli/fs_copy.h"
#include "cli/fs_session.h"
#include "cli/fs_tree.h"
#include "common/config.h"
#include "penstock/fs.h"

namespace penstock::cli {

namespace {

using nlohmann::json;


const char* TypeName(fs::FileType t) {
  switch (t) {
    case fs::FileType::kDirectory: return "directory";
    case fs::FileType::kSymlink: return "symlink";
    case fs::FileType::kRegular: break;
  }
  return "file";
}

// "drwxr-xr-x"
std::string ModeString(const fs::Attr& a) {
  std::string s = a.type == fs::FileType::kDirectory ? "d" : a.type == fs::FileType::kSymlink ? "l" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (a.mode & (0400u >> i)) ? rwx[i] : '-';
  return s;
}

std::string Octal(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", mode & 07777);
  return buf;
}

json AttrJson(const std::string& name, const fs::Attr& a) {
  return {{"name", name},         {"ino", a.ino},      {"type", TypeName(a.type)},
          {"mode", Octal(a.mode)}, {"uid", a.uid},      {"gid", a.gid},
          {"nlink", a.nlink},     {"size", a.size},    {"mtime_ns", a.mtime_ns},
          {"mtime", LocalIsoTime(a.mtime_ns / 1000000)}};
}

void PrintLong(const std::string& name, const fs::Attr& a, const std::string& target) {
  std::printf("%s %3u %5u %5u %12llu %s %s%s\n", ModeString(a).c_str(), a.nlink, a.uid, a.gid,
              static_cast<unsigned long long>(a.size), LocalIsoTime(a.mtime_ns / 1000000).c_str(), name.c_str(),
              target.empty() ? "" : (" -> " + target).c_str());
}

// One entry of `ls`: a line (-l: with attributes) or a JSON object.
Status ListOne(fs::FileSystem& fs, const FsFlags& f, const std::string& path, const fs::DirEntry& e, json& out) {
  if (!f.long_format) {
    if (f.g.json) {
      out.push_back({{"name", e.name}, {"ino", e.ino}, {"type", TypeName(e.type)}});
    } else {
      std::printf("%s\n", e.name.c_str());
    }
    return OkStatus();
  }
  auto a = fs.GetAttr(e.ino);
  if (!a.ok()) return FsPathError(path, a.status());
  std::string target;
  if (a->type == fs::FileType::kSymlink) {
    auto t = fs.Readlink(e.ino);
    if (t.ok()) target = *t;
  }
  if (f.g.json) {
    json j = AttrJson(e.name, *a);
    if (!target.empty()) j["target"] = target;
    out.push_back(j);
  } else {
    PrintLong(e.name, *a, target);
  }
  return OkStatus();
}

int Ls(const FsFlags& f) {
  auto s = OpenFsSession(f);
  if (!s.ok()) return ReportFsError(s.status(), f.g.json);
  const std::string path = f.paths.empty() ? "/" : StripFs(f.paths[0]);
  auto a = s->fs->StatPath(path);
  if (!a.ok()) return ReportFsError(FsPathError(path, a.status()), f.g.json);
  json out = json::array();
  if (a->type != fs::FileType::kDirectory) {
    Status st = ListOne(*s->fs, f, path, {path, a->ino, a->type}, out);
    if (!st.ok()) return ReportFsError(st, f.g.json);
  } else {
    std::string cursor;
    do {
      auto page = s->fs->ReadDir(a->ino, cursor);
      if (!page.ok()) return ReportFsError(FsPathError(path, page.status()), f.g.json);
      for (const fs::DirEntry& e : page->entries) {
        Status st = ListOne(*s->fs, f, JoinFsPath(path, e.name), e, out);
        if (!st.ok()) return ReportFsError(st, f.g.json);
      }
      cursor = page->next;
    } while (!cursor.empty());
  }
  if (f.g.json) PrintJson(out);
  return 0;
}

int Mkdir(const FsFlags& f) {
  auto s = OpenFsSession(f);
  if (!s.ok()) return ReportFsError(s.status(), f.g.json);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  json made = json::array();
  for (const std::string& given : f.paths) {
    const std::string path = StripFs(given);
    auto a = s->fs->MkdirPath(path, 0777 & ~mask, f.parents);
    if (!a.ok()) return ReportFsError(FsPathError(path, a.status()), f.g.json);
    made.push_back(path);
  }
  if (f.g.json) PrintJson({{"created", made}});
  return 0;
}

json StatJson(fs::FileSystem& fs, const std::string& path, const fs::Attr& a) {
  json j = AttrJson(path, a);
  j["path"] = path;
  j.erase("name");
  j["atime_ns"] = a.atime_ns;
  j["ctime_ns"] = a.ctime_ns;
  if (a.type == fs::FileType::kSymlink) {
    if (auto t = fs.Readlink(a.ino); t.ok()) j["target"] = *t;
  }
  return j;
}

int Stat(const FsFlags& f) {
  auto s = OpenFsSession(f);
  if (!s.ok()) return ReportFsError(s.status(), f.g.json);
  for (const std::string& given : f.paths) {
    const std::string path = StripFs(given);
    auto a = s->fs->StatPath(path);
    if (!a.ok()) return ReportFsError(FsPathError(path, a.status()), f.g.json);
    const json j = StatJson(*s->fs, path, *a);
    if (f.g.json) {
      PrintJson(j);
      continue;
    }
    std::printf("path %s\ntype %s\nino %llu\nmode %s (%s)\nuid %u\ngid %u\nnlink %u\nsize %llu\nmtime %s\n",
                path.c_str(), TypeName(a->type), static_cast<unsigned long long>(a->ino), Octal(a->mode).c_str(),
                ModeString(*a).c_str(), a->uid, a->gid, a->nlink, static_cast<unsigned long long>(a->size),
                LocalIsoTime(a->mtime_ns / 1000000).c_str());
    if (j.contains("target")) std::printf("target %s\n", j["target"].get<std::string>().c_str());
  }
  return 0;
}

int Format(const FsFlags& f) {
  auto client = ConnectClient(f.g);
  if (!client.ok()) return ReportFsError(client.status(), f.g.json);
  if (Status s = fs::FileSystem::Format(**client, f.container); !s.ok()) {
    return ReportFsError(s.WithContext("container '" + f.container + "'"), f.g.json);
  }
  if (f.g.json) {
    PrintJson({{"formatted", f.container}});
  } else {
    std::printf("wrote an empty file system into container '%s'; mount it with `penstock mount %s DIR`\n",
                f.container.c_str(), f.container.c_str());
  }
  return 0;
}

}  // namespace

Result<FsSession> OpenFsSession(const FsFlags& f) {
  auto client = ConnectClient(f.g);
  if (!client.ok()) return client.status();
  auto fs = fs::FileSystem::Open(**client, f.container);
  if (!fs.ok()) {
    if (fs::ErrnoOf(fs.status()) != ENOENT) return fs.status();
    return NotFound("container '" + f.container + "' holds no file system: " + fs.status().message() +
                    " (make one with `penstock container create NAME --type fs`, or `penstock fs format "
                    "--container " + f.container + "` on an empty container)");
  }
  return FsSession{std::move(*client), std::move(*fs)};
}

std::string StripFs(const std::string& p) { return p.rfind("fs:", 0) == 0 ? p.substr(3) : p; }

void AddFsCommands(CLI::App& root, std::vector<Command>& out) {
  CLI::App* fsapp = root.add_subcommand(
      "fs", "use a file system container without mounting it; paths are the container's (/a/b); cp marks the "
            "container's side with fs: (`penstock fs cp -r ./data fs:/data --container C`)");
  fsapp->require_subcommand(1);
  // Each subcommand binds its own options (see AddObjectCommands for why).
  auto add = [&](const char* name, const char* help, int (*run)(const FsFlags&), const char* paths_help,
                 bool paths_required) {
    auto f = std::make_shared<FsFlags>();
    CLI::App* app = fsapp->add_subcommand(name, help);
    AddClientFlags(*app, f->g);
    AddSetting(*app, "container", &f->container, "the file system container")->required();
    if (paths_help != nullptr) {
      auto* opt = app->add_option("PATH", f->paths, paths_help);
      if (paths_required) opt->required();
    }
    out.push_back({app, [f, run] { return run(*f); }});
    return std::make_pair(app, f);
  };
  {
    auto [app, f] = add("ls", "list a directory (or show one file)", Ls, "directory or file (default /)", false);
    app->add_flag("-l,--long", f->long_format, "mode, links, owner, size, time; a symlink's target");
  }
  {
    auto [app, f] = add("mkdir", "make directories", Mkdir, "directories to make", true);
    app->add_flag("-p,--parents", f->parents, "make missing parents too; an existing directory is fine");
  }
  add("stat", "show a path's attributes (a symlink itself, not what it points to)", Stat, "paths", true);
  {
    auto [app, f] = add("rm", "remove files, symlinks and (with -r) directory trees", FsRemove, "paths", true);
    app->add_flag("-r,--recursive", f->recursive, "remove directories and what they hold");
    app->add_flag("-f,--force", f->force, "a path that does not exist is no error");
    app->add_flag("--progress", f->progress, "show progress even when stderr is not a terminal");
  }
  {
    auto [app, f] = add("du", "bytes held by files under a path (hard links counted once)", FsDu,
                        "paths (default /)", false);
    app->add_flag("--progress", f->progress, "show progress even when stderr is not a terminal");
  }
  {
    auto [app, f] = add("cp", "copy between local files and the container: `cp LOCAL fs:PATH` or `cp fs:PATH LOCAL`",
                        FsCopy, "SRC DST (one of them fs:PATH)", true);
    app->add_flag("-r,--recursive", f->recursive, "copy directory trees");
    AddSetting(*app, "jobs", &f->jobs, "with -r: files copied at once")->check(CLI::Range(1u, 256u));
    app->add_flag("--quiet", f->quiet, "print nothing on success");
    app->add_flag("--progress", f->progress, "show progress even when stderr is not a terminal");
  }
  add("format", "write an empty file system into an (empty) container", Format, nullptr, false);
}

}  // namespace penstock::cli
