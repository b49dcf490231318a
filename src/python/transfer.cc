#include "python/transfer.h"

#include <pybind11/pybind11.h>

#include <chrono>
#include <vector>

#include "python/status_error.h"

namespace py = pybind11;

namespace penstock::python {
namespace {

// The state of one Transfer: which chunks are submitted, in flight and done.
struct ChunkRun {
  ChunkRun(Handle& h, IoKind k, uint64_t off, std::byte* d, size_t n)
      : handle(h), kind(k), offset(off), data(d), len(n), ids(chunks(), 0), finished(chunks(), false) {}

  Handle& handle;
  IoKind kind;
  uint64_t offset;
  std::byte* data;
  size_t len;
  CompletionQueue cq;
  std::vector<OpId> ids;       // per chunk, once submitted
  std::vector<bool> finished;  // per chunk
  size_t next = 0, in_flight = 0;
  uint64_t moved = 0;
  Status error;
  bool stop = false;

  size_t chunks() const { return (len + kTransferChunk - 1) / kTransferChunk; }

  void SubmitWindow() {
    while (!stop && next < chunks() && in_flight < kTransferWindow) {
      const size_t at = next * kTransferChunk;
      IoVec iov{data + at, std::min(kTransferChunk, len - at)};
      Result<OpId> id = handle.Submit(kind, offset + at, iov, cq, next);
      if (!id.ok()) {
        error = id.status();
        stop = true;
        return;
      }
      ids[next++] = *id;
      ++in_flight;
    }
  }

  void Reap() {
    for (const IoCompletion& c : cq.Wait(1, std::chrono::milliseconds(100))) {
      --in_flight;
      finished[c.user_data] = true;
      moved += c.bytes;
      if (!c.status.ok() && error.ok()) {
        error = c.status;
        stop = true;
      }
    }
  }

  void CancelInFlight() {
    stop = true;
    if (!handle.cancellable()) return;
    for (size_t i = 0; i < next; ++i) {
      if (!finished[i]) handle.Cancel(ids[i]);
    }
  }
};

}  // namespace

uint64_t Transfer(Handle& handle, IoKind kind, uint64_t offset, std::byte* data, size_t len) {
  std::shared_ptr<void> pin = handle.Pin();
  if (!pin) ThrowIfError(handle.Size().status());  // closed: says so
  ChunkRun run(handle, kind, offset, data, len);
  bool interrupted = false;
  while (true) {
    {
      py::gil_scoped_release nogil;
      run.SubmitWindow();
      if (run.in_flight == 0) break;
      run.Reap();
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;  // the handler's exception stays set until we raise it
      py::gil_scoped_release nogil;
      run.CancelInFlight();
    }
  }
  if (interrupted) throw py::error_already_set();
  ThrowIfError(run.error);
  return run.moved;
}

}  // namespace penstock::python
