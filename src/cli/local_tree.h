// local_tree.h — local directory trees as `put -r` and `get -r` see them: the regular files
// under a directory with their names relative to it ('/' between components), and the
// directories to create for an object's name under a destination directory, never leaving it.
// Functions over the file system only; thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "penstock/status.h"

namespace penstock::cli {

struct LocalFile {
  std::string path;  // as given: DIR/sub/name
  std::string rel;   // sub/name
  uint64_t size = 0;
};

// Something under the tree that is not stored, and why.
struct TreeProblem {
  std::string path;
  std::string why;
};

struct TreeListing {
  std::vector<LocalFile> files;       // sorted by rel, byte-wise
  std::vector<TreeProblem> skipped;   // symbolic links and special files (not followed, not stored)
  std::vector<TreeProblem> failed;    // directories that could not be read
};

// Every regular file under `dir` (which may itself be a symbolic link to a directory; links
// below it are not followed). Errors: kFailedPrecondition when `dir` is not a directory,
// errno-based ones when it cannot be opened.
Result<TreeListing> ListTree(const std::string& dir);

// "PREFIX/" for a non-empty prefix without a trailing '/', PREFIX otherwise: a PREFIX names a
// directory of objects.
std::string DirectoryPrefix(const std::string& prefix);

// Checks that `rel` (an object's name after its prefix) can name a file under a directory:
// non-empty components, none "." or "..", no leading or trailing '/'.
Status CheckRelativePath(const std::string& rel);

// Opens (creating as needed, mode 0777 less the umask) the directories of `rel`'s parent under
// `root_fd`, refusing a component that is a symbolic link or not a directory; returns the
// parent's descriptor (the caller closes it) and sets `*leaf` to the last component. `shown`
// is the root as messages name it.
Result<int> OpenParentIn(int root_fd, const std::string& shown, const std::string& rel, std::string* leaf);

}  // namespace penstock::cli
