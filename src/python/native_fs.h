// native_fs.h — the file system of one fs container (fs.h) for penstock.Client.fs(): opens
// files as Handles (the same file-like API as objects) and does the namespace calls by path.
// Detached (its FileSystem released) when its client closes. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "penstock/fs.h"
#include "python/handle.h"
#include "python/native_client.h"

namespace penstock::python {

class NativeFs : public Detachable, public std::enable_shared_from_this<NativeFs> {
 public:
  // Opens (formats first when `format` and the container holds no file system). Without the GIL.
  static Result<std::shared_ptr<NativeFs>> Open(std::shared_ptr<NativeClient> owner, Client& client,
                                                const std::string& container, bool format);

  // The FileSystem (kFailedPrecondition once detached). The pointer stays valid while the
  // caller holds the returned shared_ptr.
  Result<std::shared_ptr<fs::FileSystem>> Get();
  NativeClient& owner() { return *owner_; }
  const std::string& container() const { return container_; }

  // Every entry of the directory at `path`, all pages.
  Result<std::vector<fs::DirEntry>> ListDir(const std::string& path);
  Result<std::shared_ptr<Handle>> OpenFile(const std::string& path, unsigned flags, uint32_t mode);

  void Detach() override;
  void Abandon() override;

 private:
  NativeFs(std::shared_ptr<NativeClient> owner, std::string container, std::unique_ptr<fs::FileSystem> fs);
  std::shared_ptr<NativeClient> owner_;
  const std::string container_;
  std::mutex mu_;
  std::shared_ptr<fs::FileSystem> fs_;  // guarded by mu_; null once detached
};

}  // namespace penstock::python
