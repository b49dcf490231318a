// dataset.h — `penstock put -r DIR [PREFIX]` and `penstock get -r PREFIX DIR`: a directory tree
// moved file by file, --jobs at a time, over one Client.
//
// Names: object = PREFIX + the file's path relative to DIR with '/' between components; a
// non-empty PREFIX names a directory of objects ('/' is added when it does not end with one),
// so `put -r ./photos 2024` stores photos/cat.jpg as 2024/cat.jpg and `get -r 2024 ./back`
// writes ./back/cat.jpg. get -r recreates the tree under DIR, never following a symbolic link
// and never writing outside DIR (names with empty, "." or ".." components are refused).
//
// How the work is spread: each of the --jobs threads moves one whole file at a time (put:
// Client::PutFile, atomic per object; get: an ObjectReader over Client::Open/ReadAsync into a
// Destination, so nothing but a regular file is replaced), the stripes of a large file in
// flight together (64 MiB in flight overall). A file that fails does not stop the others.
// Symbolic links and special files are skipped with a warning; anything failed or skipped
// makes the exit code 1, and the summary says what.
//
// Output: progress on stderr (progress.h), then a summary line on stderr (files, bytes,
// seconds, MB/s, files/s, failures), or with --json one object on stdout.
#pragma once

#include <string>

#include "penstock/client.h"

namespace penstock::cli {

struct TreeOptions {
  std::string container;
  std::string dir;     // local directory
  std::string prefix;  // as typed (see DirectoryPrefix)
  unsigned jobs = 16;
  bool progress = false;  // a bar even when stderr is not a terminal
  bool quiet = false;     // no progress, no summary on success
  bool json = false;
};

// Stripes in flight per file for `jobs` files at once (64 MiB of 1 MiB stripes overall).
unsigned StripesPerJob(unsigned jobs);

// Exit codes: 0 all stored/written, 1 some failed or skipped (or nothing to get), 130
// interrupted (SIGINT/SIGTERM; temporary files removed).
int RunPutTree(Client& client, const TreeOptions& options);
int RunGetTree(Client& client, const TreeOptions& options);

}  // namespace penstock::cli
