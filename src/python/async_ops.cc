#include "python/async_ops.h"

#include <chrono>

#include "python/status_error.h"

namespace py = pybind11;

namespace penstock::python {

AsyncOps::AsyncOps(unsigned open_threads) {
  dispatcher_ = std::thread([this] { Dispatch(); });
  for (unsigned i = 0; i < std::max(1u, open_threads); ++i) pool_.emplace_back([this] { PoolLoop(); });
}

AsyncOps::~AsyncOps() { Stop(); }

std::pair<uint64_t, py::object> AsyncOps::Track(std::unique_ptr<PendingOp> op) {
  py::object future = py::module_::import("concurrent.futures").attr("Future")();
  future.attr("set_running_or_notify_cancel")();
  op->future = future;
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  pending_.emplace(id, std::move(op));
  return {id, future};
}

PendingOp* AsyncOps::Find(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(id);
  return it == pending_.end() ? nullptr : it->second.get();
}

void AsyncOps::Submit(uint64_t id, Handle& handle, IoKind kind, uint64_t offset) {
  PendingOp* op = Find(id);  // stays in pending_ until resolved, by us or the dispatcher
  IoVec iov = op->buffer ? IoVec{op->buffer->data(), op->buffer->size()}
                         : IoVec{op->owned.data(), op->owned.size()};
  op->pin = handle.Pin();
  if (!op->pin) return Resolve(id, handle.Size().status());
  if (iov.size == 0) return Resolve(id, OkStatus(), 0);
  Result<OpId> submitted = handle.Submit(kind, offset, iov, cq_, id);
  if (!submitted.ok()) Resolve(id, submitted.status());
}

void AsyncOps::Post(uint64_t id, std::function<void(uint64_t)> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back([id, job = std::move(job)] { job(id); });
  }
  cv_.notify_one();
}

void AsyncOps::OpenThenSubmit(uint64_t id, const std::function<Result<std::shared_ptr<Handle>>()>& open,
                              IoKind kind, uint64_t offset) {
  Result<std::shared_ptr<Handle>> handle = open();
  if (!handle.ok()) return Resolve(id, handle.status());
  PendingOp* op = Find(id);
  if (kind == IoKind::kRead && !op->buffer) {
    Result<uint64_t> size = (*handle)->Size();
    if (!size.ok()) return Resolve(id, size.status());
    op->owned.resize(*size > offset ? *size - offset : 0);
  }
  op->handle = *handle;
  Submit(id, **handle, kind, offset);
}

void AsyncOps::Resolve(uint64_t id, const Status& status, uint64_t bytes) {
  py::gil_scoped_acquire gil;
  Finish(id, status, bytes);
}

void AsyncOps::Finish(uint64_t id, const Status& status, uint64_t bytes) {
  std::unique_ptr<PendingOp> op;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    op = std::move(it->second);
    pending_.erase(it);
  }
  try {
    if (!status.ok()) {
      op->future.attr("set_exception")(StatusException(status));
    } else if (op->value == FutureValue::kCount) {
      op->future.attr("set_result")(py::int_(bytes));
    } else if (op->value == FutureValue::kBytes) {
      op->future.attr("set_result")(py::bytes(reinterpret_cast<const char*>(op->owned.data()), bytes));
    } else {
      op->future.attr("set_result")(py::none());
    }
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("penstock: resolving a future");
  }
  cv_.notify_all();
}

void AsyncOps::Dispatch() {
  while (true) {
    std::vector<IoCompletion> done = cq_.Wait(1, std::chrono::milliseconds(100));
    if (!done.empty()) {
      py::gil_scoped_acquire gil;
      for (const IoCompletion& c : done) Finish(c.user_data, c.status, c.bytes);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && pending_.empty() && jobs_.empty()) return;
  }
}

void AsyncOps::PoolLoop() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void AsyncOps::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : pool_) {
    if (t.joinable()) t.join();
  }
  if (dispatcher_.joinable()) dispatcher_.join();
}

}  // namespace penstock::python
