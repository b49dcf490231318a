// names.h — checks of names and paths, and a path's components (fs.h, "Limits").
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "penstock/status.h"

namespace penstock::fs {

// One directory entry's name: 1..kMaxNameBytes bytes, no '/' or NUL, not "." or "..".
// ENAMETOOLONG or EINVAL naming the name.
Status CheckName(const std::string& name);

// The components of `path` ("/a//b/./c" → a, b, c; ".." kept for the walker). ENAMETOOLONG
// for a path over kMaxPathBytes or a component over kMaxNameBytes, EINVAL for a NUL.
Result<std::vector<std::string>> SplitPath(const std::string& path);

}  // namespace penstock::fs
