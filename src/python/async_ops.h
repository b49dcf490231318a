// async_ops.h — Python futures over the client's asynchronous I/O.
//
// Every asynchronous call of a NativeClient returns a concurrent.futures.Future (already
// running: cancel() refuses) that asyncio can await with asyncio.wrap_future. Reads and writes
// of open objects and files are submitted to one CompletionQueue; one dispatcher thread waits
// on it and resolves the futures, taking the GIL once per batch of completions. The C++ API
// has no asynchronous open or whole-object put, so those steps (Client::Open, fs OpenPath,
// Client::Put) run on a fixed pool of `open_threads` threads: an open there is followed by its
// read submitted to the queue, and the pool thread moves on.
//
// Ownership: a pending operation owns its future, the caller's buffer (held as a HeldBuffer,
// or bytes it allocated) and a pin on its Handle until it is resolved; all of it is released
// with the GIL held. Thread-safe. Stop() (the client's close) waits for every pending operation.
// In the child of a fork its threads do not exist: the owner leaks it there (NativeClient::Abandon)
// instead of destroying it.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "penstock/object_io.h"
#include "python/buffer.h"
#include "python/handle.h"

namespace penstock::python {

// What a resolved future holds.
enum class FutureValue : uint8_t {
  kCount,  // the bytes moved, as an int
  kBytes,  // the bytes read into `owned`, as a bytes object
  kNone,
};

struct PendingOp {
  pybind11::object future;
  FutureValue value = FutureValue::kNone;
  std::unique_ptr<HeldBuffer> buffer;  // the caller's, for reads into it and writes from it
  std::vector<std::byte> owned;        // read into here for kBytes
  std::shared_ptr<void> pin;           // keeps the Object or File alive while in flight
  std::shared_ptr<Handle> handle;      // opened by a pool job
};

class AsyncOps {
 public:
  explicit AsyncOps(unsigned open_threads);
  ~AsyncOps();
  AsyncOps(const AsyncOps&) = delete;
  AsyncOps& operator=(const AsyncOps&) = delete;

  // A new running concurrent.futures.Future for `op`, registered under the returned id. GIL held.
  std::pair<uint64_t, pybind11::object> Track(std::unique_ptr<PendingOp> op);
  // Submits a read or write of the tracked op `id` through `handle` into its buffer (or
  // `owned`) at `offset`; a failure to submit resolves the future with it. Any thread.
  void Submit(uint64_t id, Handle& handle, IoKind kind, uint64_t offset);
  // Runs `job(id)` on the pool (GIL not held there). The job must resolve op `id`: by Submit,
  // Resolve, or ReadWhole.
  void Post(uint64_t id, std::function<void(uint64_t id)> job);
  // A pool job's steps: opens with `open`, then submits `kind` at `offset` (a read without a
  // caller buffer reads from `offset` to the end into the op's `owned` bytes).
  void OpenThenSubmit(uint64_t id, const std::function<Result<std::shared_ptr<Handle>>()>& open, IoKind kind,
                      uint64_t offset);
  // Resolves op `id` with `status` (and `bytes`). Any thread (takes the GIL).
  void Resolve(uint64_t id, const Status& status, uint64_t bytes = 0);

  CompletionQueue& cq() { return cq_; }
  // Waits for every pending operation and job, then ends the threads. Call without the GIL.
  void Stop();

 private:
  void Dispatch();
  void PoolLoop();
  void Finish(uint64_t id, const Status& status, uint64_t bytes);  // GIL held
  PendingOp* Find(uint64_t id);

  CompletionQueue cq_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, std::unique_ptr<PendingOp>> pending_;  // guarded by mu_
  std::deque<std::function<void()>> jobs_;                            // guarded by mu_
  uint64_t next_id_ = 1;                                              // guarded by mu_
  bool stopping_ = false;                                             // guarded by mu_
  std::thread dispatcher_;
  std::vector<std::thread> pool_;
};

}  // namespace penstock::python
