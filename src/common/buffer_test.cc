#include "common/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace penstock {
namespace {

TEST(AlignedBufferTest, AlignedSizedAndMovable) {
  AlignedBuffer b(5000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_EQ(b.size(), 5000u);
  EXPECT_EQ(b.capacity(), 8192u);
  std::memset(b.data(), 7, b.size());
  AlignedBuffer c = std::move(b);
  EXPECT_EQ(c.size(), 5000u);
  EXPECT_EQ(b.data(), nullptr);
  AlignedBuffer d = AlignedBuffer::CopyOf(c.span());
  EXPECT_EQ(0, std::memcmp(c.data(), d.data(), 5000));
  c.resize_within_capacity(100000);
  EXPECT_EQ(c.size(), 8192u);
}

TEST(BufferPoolTest, RecyclesLargeBlocksUpToTheCap) {
  BufferPool& pool = BufferPool::Global();
  pool.set_max_cached_bytes(4 << 20);
  uint64_t hits0 = pool.hits();
  void* first;
  {
    AlignedBuffer a(1 << 20);
    first = a.data();
  }
  EXPECT_GE(pool.cached_bytes(), 1u << 20);
  {
    AlignedBuffer b(1 << 20);  // same size: the same block comes back
    EXPECT_EQ(b.data(), first);
  }
  EXPECT_EQ(pool.hits(), hits0 + 1);
  {
    std::vector<AlignedBuffer> many;
    for (int i = 0; i < 8; ++i) many.emplace_back(1 << 20);
  }
  EXPECT_LE(pool.cached_bytes(), 4u << 20);  // the rest went back to the system
  pool.set_max_cached_bytes(0);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  pool.set_max_cached_bytes(64 << 20);
}

// Small blocks (a 4 KiB payload) come back too: glibc has no thread cache for 4 KiB-aligned
// allocations.
TEST(BufferPoolTest, RecyclesSmallBlocks) {
  BufferPool& pool = BufferPool::Global();
  pool.set_max_cached_bytes(4 << 20);
  void* first;
  {
    AlignedBuffer a(4096);
    first = a.data();
  }
  const uint64_t hits0 = pool.hits();
  {
    AlignedBuffer b(100);  // rounded up to the same 4 KiB
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  }
  EXPECT_EQ(pool.hits(), hits0 + 1);
  pool.set_max_cached_bytes(64 << 20);
}

// At the cap, the sizes used longest ago make room for the size given back now: blocks of a
// size in use are kept warm even when another size filled the pool earlier.
TEST(BufferPoolTest, AtTheCapSizesUsedLongestAgoMakeRoom) {
  BufferPool& pool = BufferPool::Global();
  pool.set_max_cached_bytes(0);
  pool.set_max_cached_bytes(4 << 20);
  {
    std::vector<AlignedBuffer> odd;  // fill the pool with an odd size
    for (int i = 0; i < 4; ++i) odd.emplace_back((1 << 20) + 8192);
  }
  EXPECT_GE(pool.cached_bytes(), 3u << 20);
  const uint64_t hits0 = pool.hits();
  void* kept;
  {
    AlignedBuffer a(1 << 20);  // a miss; given back, it displaces an odd block
    kept = a.data();
  }
  for (int i = 0; i < 5; ++i) {
    AlignedBuffer b(1 << 20);
    EXPECT_EQ(b.data(), kept) << "round " << i;
  }
  EXPECT_EQ(pool.hits(), hits0 + 5);
  EXPECT_LE(pool.cached_bytes(), 4u << 20);
  {
    std::vector<AlignedBuffer> many;  // more of one size than the cap: the rest is released
    for (int i = 0; i < 8; ++i) many.emplace_back(1 << 20);
  }
  EXPECT_LE(pool.cached_bytes(), 4u << 20);
  pool.set_max_cached_bytes(0);
  pool.set_max_cached_bytes(64 << 20);
}

// Stripe-sized blocks (256 KiB to 1 MiB) are cut from 2 MiB-aligned chunks and whole 2 MiB
// multiples are 2 MiB-aligned (huge pages possible). A slab block beyond the cap gives its
// memory back but keeps its address: it comes back next, reading as zeros.
TEST(BufferPoolTest, StripeSizedBlocksLieInHugePageChunks) {
  BufferPool& pool = BufferPool::Global();
  pool.set_max_cached_bytes(0);  // nothing kept warm: every block given back is released
  constexpr uintptr_t kHuge = 2 << 20;
  {
    AlignedBuffer a(1 << 20), b(1 << 20);
    const uintptr_t pa = reinterpret_cast<uintptr_t>(a.data()), pb = reinterpret_cast<uintptr_t>(b.data());
    EXPECT_EQ(pa % (1 << 20), 0u);
    EXPECT_EQ(pb % (1 << 20), 0u);
    EXPECT_EQ(pa / kHuge, pb / kHuge) << "two 1 MiB blocks share one 2 MiB chunk";
    AlignedBuffer quarter(256 << 10);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(quarter.data()) % (256 << 10), 0u);
    AlignedBuffer big(4 << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % kHuge, 0u);
    std::memset(big.data(), 1, big.size());
    AlignedBuffer odd(3 << 18);  // 768 KiB divides no huge page: ordinary memory
    EXPECT_EQ(reinterpret_cast<uintptr_t>(odd.data()) % 4096, 0u);
  }
  void* released;
  {
    AlignedBuffer a(1 << 20);
    std::memset(a.data(), 0x5a, a.size());
    released = a.data();
  }
  EXPECT_EQ(pool.cached_bytes(), 0u);
  {
    AlignedBuffer again(1 << 20);
    EXPECT_EQ(again.data(), released) << "the released block's address is reused";
    EXPECT_EQ(again.data()[0], std::byte{0});
    EXPECT_EQ(again.data()[(1 << 20) - 1], std::byte{0});
  }
  pool.set_max_cached_bytes(64 << 20);
}

// A borrowed view reads and writes the owner's memory and never frees or pools it.
TEST(AlignedBufferTest, BorrowedViewLeavesTheMemoryToItsOwner) {
  std::vector<std::byte> owner(5000, std::byte{1});
  const size_t cached = BufferPool::Global().cached_bytes();
  {
    AlignedBuffer view = AlignedBuffer::Borrowed(owner);
    EXPECT_EQ(view.data(), owner.data());
    EXPECT_EQ(view.size(), owner.size());
    view.data()[0] = std::byte{9};
    AlignedBuffer moved = std::move(view);
    EXPECT_EQ(moved.data(), owner.data());
    moved = AlignedBuffer(8192);  // the view is dropped, the new buffer owned
  }
  EXPECT_EQ(owner[0], std::byte{9});
  EXPECT_GE(BufferPool::Global().cached_bytes(), cached);  // only the owned 8 KiB went back
}

}  // namespace
}  // namespace penstock
