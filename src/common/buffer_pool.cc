#include "common/buffer_pool.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace penstock {

namespace {

struct PoolState {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // by capacity
  size_t cached = 0;
  size_t max_cached = 64ull << 20;
  uint64_t hits = 0, misses = 0;
};

PoolState& State() {
  static PoolState* s = new PoolState();  // never destroyed: buffers may be freed at exit
  return *s;
}

}  // namespace

BufferPool& BufferPool::Global() {
  static BufferPool pool;
  return pool;
}

void* BufferPool::Take(size_t capacity) {
  PoolState& s = State();
  if (capacity >= kMinPooledBytes) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.free_blocks.find(capacity);
    if (it != s.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s.cached -= capacity;
      ++s.hits;
      return p;
    }
    ++s.misses;
  }
  return std::aligned_alloc(4096, capacity);
}

void BufferPool::Give(void* block, size_t capacity) {
  if (block == nullptr) return;
  PoolState& s = State();
  if (capacity >= kMinPooledBytes) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.cached + capacity <= s.max_cached) {
      s.free_blocks[capacity].push_back(block);
      s.cached += capacity;
      return;
    }
  }
  std::free(block);
}

void BufferPool::set_max_cached_bytes(size_t bytes) {
  PoolState& s = State();
  std::vector<void*> release;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.max_cached = bytes;
    for (auto& [cap, blocks] : s.free_blocks) {
      while (s.cached > s.max_cached && !blocks.empty()) {
        release.push_back(blocks.back());
        blocks.pop_back();
        s.cached -= cap;
      }
    }
  }
  for (void* p : release) std::free(p);
}

size_t BufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(State().mu);
  return State().cached;
}

uint64_t BufferPool::hits() const {
  std::lock_guard<std::mutex> lock(State().mu);
  return State().hits;
}

uint64_t BufferPool::misses() const {
  std::lock_guard<std::mutex> lock(State().mu);
  return State().misses;
}

}  // namespace penstock
