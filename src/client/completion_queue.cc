#include "penstock/object_io.h"

namespace penstock {

void CompletionQueue::Started() {
  std::lock_guard<std::mutex> lock(mu_);
  ++in_flight_;
}

void CompletionQueue::Complete(IoCompletion c) {
  if (callback_) {
    callback_(std::move(c));
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    done_.push_back(std::move(c));
  }
  cv_.notify_all();
}

std::vector<IoCompletion> CompletionQueue::Poll(size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IoCompletion> out;
  while (!done_.empty() && out.size() < max) {
    out.push_back(std::move(done_.front()));
    done_.pop_front();
  }
  return out;
}

std::vector<IoCompletion> CompletionQueue::Wait(size_t min, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_.size() >= min; });
  std::vector<IoCompletion> out(std::make_move_iterator(done_.begin()), std::make_move_iterator(done_.end()));
  done_.clear();
  return out;
}

size_t CompletionQueue::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

}  // namespace penstock
