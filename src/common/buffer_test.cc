#include "common/buffer.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace penstock
