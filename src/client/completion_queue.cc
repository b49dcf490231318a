#include <condition_variable>
#include <deque>
#include <mutex>

#include "client/completion_queue_access.h"

namespace penstock {

struct CompletionQueue::State {
  std::function<void(IoCompletion)> callback;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<IoCompletion> done;  // guarded by mu
  size_t in_flight = 0;           // guarded by mu
};

CompletionQueue::CompletionQueue() : state_(std::make_unique<State>()) {}

CompletionQueue::CompletionQueue(std::function<void(IoCompletion)> callback) : CompletionQueue() {
  state_->callback = std::move(callback);
}

CompletionQueue::~CompletionQueue() = default;

void CompletionQueueAccess::Started(CompletionQueue& cq) {
  std::lock_guard<std::mutex> lock(cq.state_->mu);
  ++cq.state_->in_flight;
}

void CompletionQueueAccess::Complete(CompletionQueue& cq, IoCompletion c) {
  CompletionQueue::State& st = *cq.state_;
  if (st.callback) {
    st.callback(std::move(c));
    std::lock_guard<std::mutex> lock(st.mu);
    --st.in_flight;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(st.mu);
    --st.in_flight;
    st.done.push_back(std::move(c));
  }
  st.cv.notify_all();
}

std::vector<IoCompletion> CompletionQueue::Poll(size_t max) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<IoCompletion> out;
  while (!state_->done.empty() && out.size() < max) {
    out.push_back(std::move(state_->done.front()));
    state_->done.pop_front();
  }
  return out;
}

std::vector<IoCompletion> CompletionQueue::Wait(size_t min, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_for(lock, timeout, [&] { return state_->done.size() >= min; });
  std::vector<IoCompletion> out(std::make_move_iterator(state_->done.begin()),
                                std::make_move_iterator(state_->done.end()));
  state_->done.clear();
  return out;
}

size_t CompletionQueue::in_flight() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->in_flight;
}

}  // namespace penstock
