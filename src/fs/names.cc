// names.cc — see names.h.
#include "fs/names.h"

#include <cerrno>

#include "fs/fs_errors.h"
#include "penstock/fs.h"

namespace penstock::fs {

Status CheckName(const std::string& name) {
  if (name.empty()) return FsError(EINVAL, "an empty name");
  if (name.size() > kMaxNameBytes) {
    return FsError(ENAMETOOLONG, "a name of " + std::to_string(name.size()) + " bytes; at most " +
                                     std::to_string(kMaxNameBytes) + " are allowed");
  }
  if (name == "." || name == "..") return FsError(EINVAL, "'" + name + "' cannot be the name of an entry");
  if (name.find('/') != std::string::npos) return FsError(EINVAL, "'" + name + "': a name cannot contain '/'");
  if (name.find('\0') != std::string::npos) return FsError(EINVAL, "a name cannot contain a NUL byte");
  return OkStatus();
}

Result<std::vector<std::string>> SplitPath(const std::string& path) {
  if (path.size() > kMaxPathBytes) {
    return FsError(ENAMETOOLONG, "a path of " + std::to_string(path.size()) + " bytes; at most " +
                                     std::to_string(kMaxPathBytes) + " are allowed");
  }
  if (path.find('\0') != std::string::npos) return FsError(EINVAL, "a path cannot contain a NUL byte");
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(at, end - at);
    if (part.size() > kMaxNameBytes) {
      return FsError(ENAMETOOLONG, "'" + part.substr(0, 32) + "...' in '" + path.substr(0, 256) + "' is " +
                                       std::to_string(part.size()) + " bytes; at most " +
                                       std::to_string(kMaxNameBytes) + " are allowed");
    }
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    at = end + 1;
  }
  return out;
}

}  // namespace penstock::fs
