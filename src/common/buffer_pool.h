// buffer_pool.h — recycles the memory of large AlignedBuffers.
//
// Bulk data moves in buffers of the same few sizes (a stripe unit, typically 1 MiB) that are
// allocated and freed once per request. Left to malloc, each one is a fresh mmap: page faults
// and zeroing on every use and a munmap on free, the largest cost in a profile of
// `penstock bench seq`. Small ones (a 4 KiB write's payload, a batch of replies) are 4 KiB
// aligned allocations, which glibc serves from its slow path (no thread cache for them:
// memalign splits a larger chunk, free consolidates it back; ~4% of a target's CPU under
// random 4 KiB writes). The pool keeps freed blocks of every size (multiples of 4 KiB) by exact
// size and hands them out again, up to a cap on the bytes it holds (at the cap, blocks of the sizes used
// longest ago go back to the system to make room for the one given back; a size that alone
// fills the cap goes back itself), so a process's memory stays bounded by what it has in use
// plus the cap. Blocks of whole
// 2 MiB or that divide 2 MiB (256 KiB to 1 MiB) lie in 2 MiB-aligned memory advised for
// transparent huge pages; one of the latter beyond the cap gives its memory back
// (MADV_DONTNEED) and keeps its address range for reuse.
// A process that drives its own storage I/O (a target, engine_bench) may reserve an arena
// (ReserveArena): a fixed, resident region from which blocks of up to kMaxArenaBlock are taken
// first and to which they return, never to the system, so the engine's io_uring rings can
// register it once as a fixed buffer and read and write blocks in it without the kernel
// pinning their pages on every I/O (engine/io_ring.h). Outside the cap; beyond the arena,
// blocks come from the paths above.
// Thread-safe (one mutex; taken once per allocation and free of a large buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "penstock/status.h"

namespace penstock {

class BufferPool {
 public:
  static constexpr size_t kMinPooledBytes = 4096;

  // The process-wide pool used by AlignedBuffer.
  static BufferPool& Global();

  // A block of exactly `capacity` bytes (a multiple of 4 KiB), 4 KiB aligned; nullptr when out
  // of memory.
  void* Take(size_t capacity);
  // Returns a block obtained from Take(capacity).
  void Give(void* block, size_t capacity);

  // Most bytes of free blocks kept (default 64 MiB); 0 disables pooling.
  void set_max_cached_bytes(size_t bytes);

  static constexpr size_t kMaxArenaBlock = size_t{1} << 20;
  // Reserves the arena: `bytes` rounded up to 2 MiB, resident (faulted in now). Once per
  // process, before the rings that register it are made; a second call keeps the first arena
  // and says so. Errors: kResourceExhausted when the memory cannot be had, kAlreadyExists.
  Status ReserveArena(size_t bytes);
  // The arena (empty when none was reserved). Blocks Take() returns that lie in it stay valid
  // memory of it for the life of the process.
  std::span<std::byte> arena() const;
  // Whether [p, p + length) lies in the arena.
  bool InArena(const void* p, size_t length) const;
  uint64_t arena_takes() const;  // blocks handed out from the arena
  size_t cached_bytes() const;
  uint64_t hits() const;
  uint64_t misses() const;
};

}  // namespace penstock
