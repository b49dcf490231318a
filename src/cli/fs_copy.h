// fs_copy.h — `penstock fs cp`: files and directory trees between the local disk and a file
// system container, as cp(1) does it: into an existing directory under the source's name,
// else to the name given; trees only with -r (directories, regular files and symbolic links;
// other kinds are skipped and said so); permission bits kept.
//
// A tree is listed first (so progress knows the totals), then its directories are made in
// order and its files copied by `jobs` threads at once. A file that fails is reported and the
// others go on; the exit code is then 1. Used from main's thread (it starts the others).
#pragma once

#include <string>

#include "penstock/fs.h"

namespace penstock::cli {

struct CopyOptions {
  bool recursive = false;
  unsigned jobs = 8;
  bool json = false;
  bool quiet = false;
  bool progress = false;  // progress even when stderr is not a terminal
};

// Local `src` into the container at `dst`; returns the exit code (errors printed).
int CopyIn(fs::FileSystem& fs, const std::string& src, const std::string& dst, const CopyOptions& o);
// The container's `src` to local `dst`; returns the exit code (errors printed).
int CopyOut(fs::FileSystem& fs, const std::string& src, const std::string& dst, const CopyOptions& o);

}  // namespace penstock::cli
