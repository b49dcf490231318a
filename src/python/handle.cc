#include "python/handle.h"

namespace penstock::python {
namespace {

Status ClosedError(const std::string& what) {
  return FailedPrecondition(what + " is closed (or its Client was closed): open it again");
}

class ObjectHandle final : public Handle {
 public:
  explicit ObjectHandle(std::shared_ptr<Object> o) : object_(std::move(o)), name_(object_->name()) {}

  Result<uint64_t> Size() override {
    auto o = Get();
    if (!o) return ClosedError("object '" + name_ + "'");
    return o->size();
  }
  Result<OpId> Submit(IoKind kind, uint64_t offset, IoVec iov, CompletionQueue& cq, uint64_t ud) override {
    auto o = Get();
    if (!o) return ClosedError("object '" + name_ + "'");
    return kind == IoKind::kRead ? o->ReadAsync(offset, {iov}, cq, ud) : o->WriteAsync(offset, {iov}, cq, ud);
  }
  void Cancel(OpId id) override {
    if (auto o = Get()) o->Cancel(id);
  }
  Status Truncate(uint64_t size) override {
    auto o = Get();
    return o ? o->Truncate(size) : ClosedError("object '" + name_ + "'");
  }
  Status Flush() override { return OkStatus(); }
  Status Close() override {
    Detach();
    return OkStatus();
  }
  void Detach() override {
    std::lock_guard<std::mutex> lock(mu_);
    object_.reset();
  }
  void Abandon() override {
    std::lock_guard<std::mutex> lock(mu_);
    new std::shared_ptr<Object>(std::move(object_));  // leaked on purpose
  }
  bool cancellable() const override { return true; }
  std::shared_ptr<void> Pin() override { return Get(); }

 private:
  std::shared_ptr<Object> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return object_;
  }
  std::mutex mu_;
  std::shared_ptr<Object> object_;  // guarded by mu_; null once closed
  const std::string name_;
};

class FileHandle final : public Handle {
 public:
  FileHandle(std::shared_ptr<fs::File> f, std::shared_ptr<fs::FileSystem> fs, std::string path)
      : file_(std::move(f)), fs_(std::move(fs)), path_(std::move(path)) {}

  Result<uint64_t> Size() override {
    auto f = Get();
    if (!f) return ClosedError("file '" + path_ + "'");
    return f->size();
  }
  Result<OpId> Submit(IoKind kind, uint64_t offset, IoVec iov, CompletionQueue& cq, uint64_t ud) override {
    auto f = Get();
    if (!f) return ClosedError("file '" + path_ + "'");
    if (kind == IoKind::kRead) {
      f->ReadAsync(offset, {iov}, cq, ud);
    } else {
      f->WriteAsync(offset, {iov}, cq, ud);
    }
    return OpId{0};
  }
  void Cancel(OpId) override {}
  Status Truncate(uint64_t size) override {
    auto f = Get();
    return f ? f->Truncate(size) : ClosedError("file '" + path_ + "'");
  }
  Status Flush() override {
    auto f = Get();
    return f ? f->Flush() : ClosedError("file '" + path_ + "'");
  }
  Status Close() override {
    std::shared_ptr<fs::File> f;
    std::shared_ptr<fs::FileSystem> fs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      f.swap(file_);
      fs.swap(fs_);
    }
    Status s = f ? f->Close() : OkStatus();
    f.reset();  // before its FileSystem
    return s;
  }
  void Detach() override { Close().IgnoreError(); }
  void Abandon() override {
    std::lock_guard<std::mutex> lock(mu_);
    new std::shared_ptr<fs::File>(std::move(file_));  // leaked on purpose
    new std::shared_ptr<fs::FileSystem>(std::move(fs_));
  }
  bool cancellable() const override { return false; }
  std::shared_ptr<void> Pin() override { return Get(); }

 private:
  std::shared_ptr<fs::File> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return file_;
  }
  std::mutex mu_;
  std::shared_ptr<fs::File> file_;        // guarded by mu_; null once closed
  std::shared_ptr<fs::FileSystem> fs_;    // guarded by mu_
  const std::string path_;
};

}  // namespace

std::shared_ptr<Handle> MakeObjectHandle(std::shared_ptr<Object> object) {
  return std::make_shared<ObjectHandle>(std::move(object));
}

std::shared_ptr<Handle> MakeFileHandle(std::shared_ptr<fs::File> file, std::shared_ptr<fs::FileSystem> fs,
                                       std::string path) {
  return std::make_shared<FileHandle>(std::move(file), std::move(fs), std::move(path));
}

}  // namespace penstock::python
