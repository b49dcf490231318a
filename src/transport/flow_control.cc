#include "transport/flow_control.h"

#include <algorithm>

namespace penstock {

bool InflightWindow::TryAcquire(uint64_t bytes) {
  if (ops_ > 0) {
    if (max_ops_ != 0 && ops_ >= max_ops_) return false;
    if (max_bytes_ != 0 && bytes_ + bytes > max_bytes_) return false;
  }
  ++ops_;
  bytes_ += bytes;
  return true;
}

void InflightWindow::Release(uint64_t bytes) {
  ops_ = ops_ > 0 ? ops_ - 1 : 0;
  bytes_ -= std::min(bytes_, bytes);
}

bool ByteBudget::TryReserve(uint64_t bytes) {
  if (held_ > 0 && limit_ != 0 && held_ + bytes > limit_) return false;
  held_ += bytes;
  return true;
}

void ByteBudget::Release(uint64_t bytes) { held_ -= std::min(held_, bytes); }

}  // namespace penstock
