// fs_session.h — the options of `penstock fs` commands and the file system they open: a
// connected client and the container's FileSystem. Used from main's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "penstock/fs.h"

namespace penstock::cli {

struct FsFlags {
  GlobalOptions g;
  std::string container;
  std::vector<std::string> paths;
  bool long_format = false;  // ls -l
  bool parents = false;      // mkdir -p
  bool recursive = false;    // rm -r, cp -r
  bool force = false;        // rm -f
  bool quiet = false;
  bool progress = false;
  unsigned jobs = 8;  // cp -r
};

struct FsSession {
  std::unique_ptr<Client> client;
  std::unique_ptr<fs::FileSystem> fs;  // borrows *client
};

// Connects and opens f.container's file system; a container without one is named with the
// fix (`container create --type fs`, `fs format`).
Result<FsSession> OpenFsSession(const FsFlags& f);

// A path as given, without a leading "fs:".
std::string StripFs(const std::string& p);

// rm, du, cp (cmd_fs_tree.cc).
int FsRemove(const FsFlags& f);
int FsDu(const FsFlags& f);
int FsCopy(const FsFlags& f);

}  // namespace penstock::cli
