#include "common/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace penstock {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

struct PoolState {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // by capacity
  // Slab blocks whose memory went back to the system (MADV_DONTNEED) or was never touched:
  // address space kept for reuse, no memory held. Not counted in `cached`.
  std::map<size_t, std::vector<void*>> cold_blocks;
  size_t cached = 0;
  size_t max_cached = 64ull << 20;
  uint64_t hits = 0, misses = 0;
  // When each size was last taken or given (a counter): at the cap, the sizes used longest
  // ago make room for the one given now.
  std::map<size_t, uint64_t> last_use;
  uint64_t uses = 0;
  // The arena (ReserveArena): [arena_begin, arena_end) fixed for the life of the process,
  // carved at arena_next; its free blocks by capacity, outside the cap.
  std::atomic<std::byte*> arena_begin{nullptr};
  std::atomic<std::byte*> arena_end{nullptr};
  std::byte* arena_next = nullptr;
  std::map<size_t, std::vector<void*>> arena_free;
  uint64_t arena_takes = 0;
};

PoolState& State() {
  static PoolState* s = new PoolState();  // never destroyed: buffers may be freed at exit
  return *s;
}

// How a block of `capacity` bytes is allocated. Blocks of whole huge pages and blocks that
// divide one (256 KiB to 1 MiB: stripe units) lie in 2 MiB-aligned memory the kernel may back
// with transparent huge pages (MADV_HUGEPAGE): copies between processes (process_vm_readv /
// writev, the same-host direct path) pin the other process's pages one by one, and a huge
// page is one pin instead of 512 (1 MiB same-host reads +17% in transport_bench).
enum class Kind { kMalloc, kHuge, kSlab };
Kind KindOf(size_t capacity) {
  if (capacity < BufferPool::kMinPooledBytes) return Kind::kMalloc;
  if (capacity % kHugePage == 0) return Kind::kHuge;
  if (capacity >= (256u << 10) && kHugePage % capacity == 0) return Kind::kSlab;
  return Kind::kMalloc;
}

// `bytes` (a multiple of 2 MiB) of 2 MiB-aligned anonymous memory, advised for huge pages;
// nullptr when out of memory.
void* MapHuge(size_t bytes) {
  void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) munmap(raw, aligned - begin);
  if (const size_t tail = begin + kHugePage - aligned; tail > 0) {
    munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  }
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without THP the memory is ordinary pages
  return p;
}

// Under s.mu: a block of slab size `capacity`, from the cold list or a new huge page cut into
// blocks (the others go to the cold list); nullptr when out of memory.
void* TakeSlabLocked(PoolState& s, size_t capacity) {
  std::vector<void*>& cold = s.cold_blocks[capacity];
  if (cold.empty()) {
    std::byte* chunk = static_cast<std::byte*>(MapHuge(kHugePage));
    if (chunk == nullptr) return nullptr;
    for (size_t at = kHugePage; at > 0; at -= capacity) cold.push_back(chunk + at - capacity);
  }
  void* p = cold.back();
  cold.pop_back();
  return p;
}

// Gives a block the pool does not keep back to the system.
void Release(PoolState& s, void* block, size_t capacity) {
  switch (KindOf(capacity)) {
    case Kind::kMalloc:
      std::free(block);
      return;
    case Kind::kHuge:
      munmap(block, capacity);
      return;
    case Kind::kSlab: {
      madvise(block, capacity, MADV_DONTNEED);  // the memory goes, the address range stays
      std::lock_guard<std::mutex> lock(s.mu);
      s.cold_blocks[capacity].push_back(block);
      return;
    }
  }
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
    if (s.arena_next != nullptr && capacity <= kMaxArenaBlock && capacity % kMinPooledBytes == 0) {
      auto& free = s.arena_free[capacity];
      if (!free.empty()) {
        void* p = free.back();
        free.pop_back();
        ++s.arena_takes;
        return p;
      }
      if (static_cast<size_t>(s.arena_end.load(std::memory_order_relaxed) - s.arena_next) >= capacity) {
        void* p = s.arena_next;
        s.arena_next += capacity;
        ++s.arena_takes;
        return p;
      }
    }
    s.last_use[capacity] = ++s.uses;
    auto it = s.free_blocks.find(capacity);
    if (it != s.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s.cached -= capacity;
      ++s.hits;
      return p;
    }
    ++s.misses;
    if (KindOf(capacity) == Kind::kSlab) return TakeSlabLocked(s, capacity);
  }
  if (KindOf(capacity) == Kind::kHuge) return MapHuge(capacity);
  return std::aligned_alloc(4096, capacity);
}

void BufferPool::Give(void* block, size_t capacity) {
  if (block == nullptr) return;
  PoolState& s = State();
  if (InArena(block, capacity)) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.arena_free[capacity].push_back(block);
    return;
  }
  std::vector<std::pair<void*, size_t>> evicted;  // block, capacity
  bool kept = false;
  if (capacity >= kMinPooledBytes) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.last_use[capacity] = ++s.uses;
    if (s.cached + capacity > s.max_cached && capacity <= s.max_cached) {
      // Full: blocks of the sizes used longest ago go, so that a size in use now is not
      // released and faulted in again on every use while others sit idle (a target's reads of
      // 1 MiB shards did so behind odd sizes its writes had left).
      std::vector<std::pair<uint64_t, size_t>> sizes;  // last use, capacity
      for (const auto& [cap, blocks] : s.free_blocks) {
        if (cap != capacity && !blocks.empty()) sizes.emplace_back(s.last_use[cap], cap);
      }
      std::sort(sizes.begin(), sizes.end());
      for (auto [use, cap] : sizes) {
        std::vector<void*>& blocks = s.free_blocks[cap];
        while (!blocks.empty() && s.cached + capacity > s.max_cached) {
          evicted.emplace_back(blocks.back(), cap);
          blocks.pop_back();
          s.cached -= cap;
        }
        if (s.cached + capacity <= s.max_cached) break;
      }
    }
    if (s.cached + capacity <= s.max_cached) {
      s.free_blocks[capacity].push_back(block);
      s.cached += capacity;
      kept = true;
    }
  }
  for (auto [p, cap] : evicted) Release(s, p, cap);
  if (!kept) Release(s, block, capacity);
}

void BufferPool::set_max_cached_bytes(size_t bytes) {
  PoolState& s = State();
  std::vector<std::pair<void*, size_t>> release;  // block, capacity
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.max_cached = bytes;
    for (auto& [cap, blocks] : s.free_blocks) {
      while (s.cached > s.max_cached && !blocks.empty()) {
        release.emplace_back(blocks.back(), cap);
        blocks.pop_back();
        s.cached -= cap;
      }
    }
  }
  for (auto [p, cap] : release) Release(s, p, cap);
}

Status BufferPool::ReserveArena(size_t bytes) {
  PoolState& s = State();
  bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (bytes == 0) return OkStatus();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.arena_next != nullptr) {
    return AlreadyExists("a buffer arena is reserved already (" +
                         std::to_string(s.arena_end.load() - s.arena_begin.load()) + " bytes)");
  }
  auto* p = static_cast<std::byte*>(MapHuge(bytes));
  if (p == nullptr) {
    return ResourceExhausted("cannot reserve a buffer arena of " + std::to_string(bytes) + " bytes");
  }
  std::memset(p, 0, bytes);  // resident from now on
  s.arena_next = p;
  s.arena_end.store(p + bytes, std::memory_order_release);
  s.arena_begin.store(p, std::memory_order_release);
  return OkStatus();
}

std::span<std::byte> BufferPool::arena() const {
  PoolState& s = State();
  std::byte* begin = s.arena_begin.load(std::memory_order_acquire);
  if (begin == nullptr) return {};
  return {begin, static_cast<size_t>(s.arena_end.load(std::memory_order_acquire) - begin)};
}

bool BufferPool::InArena(const void* p, size_t length) const {
  PoolState& s = State();
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* begin = s.arena_begin.load(std::memory_order_acquire);
  return begin != nullptr && b >= begin && b + length <= s.arena_end.load(std::memory_order_acquire);
}

uint64_t BufferPool::arena_takes() const {
  std::lock_guard<std::mutex> lock(State().mu);
  return State().arena_takes;
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
