// buffer.h — AlignedBuffer: an owned, 4 KiB-aligned byte buffer.
//
// The unit of bulk data between engine, transport and client: O_DIRECT needs aligned memory,
// and the transport can send from (and receive into) it without another copy. The allocation
// is rounded up to a multiple of the alignment; size() is the logical length (may be 0).
// Large allocations are recycled through BufferPool (no page faults on reuse). A Borrowed()
// buffer is a view of memory someone else owns (not aligned, never freed by it).
// Move-only. Not thread-safe; hand it between threads by moving it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include "common/buffer_pool.h"

namespace penstock {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;

  AlignedBuffer() = default;
  // Allocates room for `size` bytes (contents uninitialised). Throws std::bad_alloc.
  explicit AlignedBuffer(size_t size) { Allocate(size); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)),
        borrowed_(std::exchange(o.borrowed_, false)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
      borrowed_ = std::exchange(o.borrowed_, false);
    }
    return *this;
  }
  ~AlignedBuffer() { Release(); }

  // A view of `memory`, which must outlive it: for sending caller memory without a copy (the
  // client's write path). Not aligned; do not hand it to O_DIRECT I/O.
  static AlignedBuffer Borrowed(std::span<std::byte> memory) {
    AlignedBuffer b;
    b.data_ = memory.data();
    b.size_ = b.capacity_ = memory.size();
    b.borrowed_ = true;
    return b;
  }

  // A buffer holding a copy of `src`.
  static AlignedBuffer CopyOf(std::span<const std::byte> src) {
    AlignedBuffer b(src.size());
    if (!src.empty()) std::memcpy(b.data(), src.data(), src.size());
    return b;
  }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // Allocated bytes: size() rounded up to kAlignment.
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

  // Shrinks or grows the logical size within capacity().
  void resize_within_capacity(size_t n) { size_ = n <= capacity_ ? n : capacity_; }

  // Zeroes the bytes between size() and capacity() (padding written to disk).
  void ZeroPadding() {
    if (capacity_ > size_) std::memset(data_ + size_, 0, capacity_ - size_);
  }

  std::span<std::byte> span() { return {data_, size_}; }
  std::span<const std::byte> span() const { return {data_, size_}; }

  static size_t RoundUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

 private:
  void Release() {
    if (!borrowed_) BufferPool::Global().Give(data_, capacity_);
  }

  void Allocate(size_t size) {
    capacity_ = RoundUp(size == 0 ? 1 : size);
    data_ = static_cast<std::byte*>(BufferPool::Global().Take(capacity_));
    if (data_ == nullptr) throw std::bad_alloc();
    size_ = size;
  }

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  bool borrowed_ = false;
};

}  // namespace penstock
