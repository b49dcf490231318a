// handle.h — one open thing the Python layer reads and writes: an object (object_io.h) or a
// file of an fs container (fs.h), behind the few calls both have. A Handle can be detached
// (its Client is closing): the Object or File is released then, and every later call fails
// with kFailedPrecondition naming the fix. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "penstock/fs.h"
#include "penstock/object_io.h"
#include "penstock/status.h"

namespace penstock::python {

// Something a NativeClient must release before its Client is destroyed.
class Detachable {
 public:
  virtual ~Detachable() = default;
  // Releases the Object, File or FileSystem (the Client is about to go).
  virtual void Detach() = 0;
  // In the child of a fork: forgets it without destroying it (its Client's threads do not
  // exist there, so nothing of it may run).
  virtual void Abandon() = 0;
};

class Handle : public Detachable {
 public:
  virtual Result<uint64_t> Size() = 0;
  // Submits one read or write; the completion goes to `cq` under `user_data`. Returns the op id
  // (0 when the handle cannot cancel it), or an error before anything was submitted.
  virtual Result<OpId> Submit(IoKind kind, uint64_t offset, IoVec iov, CompletionQueue& cq,
                              uint64_t user_data) = 0;
  // Cancels op `id` (from Submit) if the handle can: an Object can, a file cannot.
  virtual void Cancel(OpId id) = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Publishes what was written (a file's size and mtime; nothing for an object).
  virtual Status Flush() = 0;
  // Flush, then release; later calls fail. Idempotent.
  virtual Status Close() = 0;
  virtual bool cancellable() const = 0;
  // The Object or File itself (null once closed): held by an operation while it runs, so a
  // Close from another thread does not free it under the operation.
  virtual std::shared_ptr<void> Pin() = 0;
};

std::shared_ptr<Handle> MakeObjectHandle(std::shared_ptr<Object> object);
// `fs`: the FileSystem the file belongs to, kept alive with it (a File refers to it).
std::shared_ptr<Handle> MakeFileHandle(std::shared_ptr<fs::File> file, std::shared_ptr<fs::FileSystem> fs,
                                       std::string path);

}  // namespace penstock::python
