#include "client/write_version.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace penstock {

uint64_t NewerThan(uint64_t version, uint64_t stored) { return std::max(version, stored + 1); }

uint64_t NewVersion() {
  static std::atomic<uint64_t> last{0};
  const uint64_t now = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  uint64_t prev = last.load();
  uint64_t next;
  do {
    next = std::max(now, prev + 1);
  } while (!last.compare_exchange_weak(prev, next));
  return next;
}

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace penstock
