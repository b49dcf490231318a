#include "python/native_fs.h"

namespace penstock::python {

NativeFs::NativeFs(std::shared_ptr<NativeClient> owner, std::string container, std::unique_ptr<fs::FileSystem> fs)
    : owner_(std::move(owner)), container_(std::move(container)), fs_(std::move(fs)) {}

Result<std::shared_ptr<NativeFs>> NativeFs::Open(std::shared_ptr<NativeClient> owner, Client& client,
                                                 const std::string& container, bool format) {
  if (format) {
    Status s = fs::FileSystem::Format(client, container);
    if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
  }
  Result<std::unique_ptr<fs::FileSystem>> fs = fs::FileSystem::Open(client, container);
  if (!fs.ok()) return fs.status();
  return std::shared_ptr<NativeFs>(new NativeFs(std::move(owner), container, std::move(*fs)));
}

Result<std::shared_ptr<fs::FileSystem>> NativeFs::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fs_) return FailedPrecondition("the file system of container '" + container_ +
                                      "' is closed (its Client was closed): open it again");
  return fs_;
}

Result<std::vector<fs::DirEntry>> NativeFs::ListDir(const std::string& path) {
  PS_ASSIGN_OR_RETURN(std::shared_ptr<fs::FileSystem> fs, Get());
  std::vector<fs::DirEntry> out;
  std::string cursor;
  do {
    PS_ASSIGN_OR_RETURN(fs::DirPage page, fs->ReadDirPath(path, cursor));
    for (fs::DirEntry& e : page.entries) out.push_back(std::move(e));
    cursor = page.next;
  } while (!cursor.empty());
  return out;
}

Result<std::shared_ptr<Handle>> NativeFs::OpenFile(const std::string& path, unsigned flags, uint32_t mode) {
  PS_ASSIGN_OR_RETURN(std::shared_ptr<fs::FileSystem> fs, Get());
  PS_ASSIGN_OR_RETURN(std::shared_ptr<fs::File> file, fs->OpenPath(path, flags, mode));
  return MakeFileHandle(std::move(file), std::move(fs), container_ + ":" + path);
}

void NativeFs::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  fs_.reset();
}

void NativeFs::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  new std::shared_ptr<fs::FileSystem>(std::move(fs_));  // leaked on purpose (see handle.h)
}

}  // namespace penstock::python
