#include "cli/bench_pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace penstock::cli {
namespace {

std::vector<std::byte> Filled(uint64_t key, uint64_t offset, size_t size) {
  std::vector<std::byte> b(size);
  FillBenchPattern(key, offset, b);
  return b;
}

TEST(BenchPattern, ThePatternIsFixed) {
  // Objects written by one version of `penstock bench` are checked by the next: the key of a
  // name and the bytes of a block never change.
  EXPECT_EQ(BenchObjectKey("bench-0"), 0xa554490393b93dffULL);
  const auto b = Filled(BenchObjectKey("bench-0"), 8192, 24);
  const std::vector<unsigned char> want = {
      0xff, 0x3d, 0xb9, 0x93, 0x03, 0x49, 0x54, 0xa5,  // the key, little-endian
      0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // the block's object offset, 8192
      0xf3, 0xcf, 0x73, 0x3a, 0x81, 0xd9, 0xf6, 0x4e};  // the body's first bytes
  std::vector<unsigned char> got(b.size());
  for (size_t i = 0; i < b.size(); ++i) got[i] = static_cast<unsigned char>(b[i]);
  EXPECT_EQ(got, want);
}

TEST(BenchPattern, AnyRangeIsTheSliceOfTheWhole) {
  const uint64_t key = BenchObjectKey("bench-7");
  const auto whole = Filled(key, 0, 5 * kBenchPatternBlock);
  for (auto [offset, size] : {std::pair<uint64_t, size_t>{0, 1}, {1, 10000}, {4090, 30}, {4096, 4096},
                              {8191, 2}, {12, 4}, {20, 4076}, {0, 5 * kBenchPatternBlock}}) {
    const auto part = Filled(key, offset, size);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + static_cast<ptrdiff_t>(offset)))
        << offset << "+" << size;
    const auto check = CheckBenchPattern(key, offset, part);
    EXPECT_EQ(check.mismatched_blocks, 0u) << offset << "+" << size;
    EXPECT_FALSE(check.first_offset.has_value());
  }
}

TEST(BenchPattern, NamesBlocksAndObjectsDiffer) {
  EXPECT_NE(BenchObjectKey("bench-0"), BenchObjectKey("bench-1"));
  EXPECT_NE(BenchObjectKey("bench-1"), BenchObjectKey("bench-10"));
  const uint64_t key = BenchObjectKey("bench-3");
  const auto b = Filled(key, 4096, 3 * kBenchPatternBlock);
  // Read as another object, or as the same object's neighbouring blocks: every block differs,
  // first at its header.
  auto other = CheckBenchPattern(BenchObjectKey("bench-4"), 4096, b);
  EXPECT_EQ(other.mismatched_blocks, 3u);
  EXPECT_EQ(other.first_offset, 4096u);
  auto shifted = CheckBenchPattern(key, 8192, b);
  EXPECT_EQ(shifted.mismatched_blocks, 3u);
  EXPECT_EQ(shifted.first_offset, 8192u + 9);  // offsets 4096 and 8192 differ in their second byte
  // Zeros (a range never written) differ everywhere.
  std::vector<std::byte> zeros(kBenchPatternBlock);
  auto z = CheckBenchPattern(key, 0, zeros);
  EXPECT_EQ(z.mismatched_blocks, 1u);
  EXPECT_EQ(z.first_offset, 0u);
}

TEST(BenchPattern, OneChangedByteIsFoundWhereItIs) {
  const uint64_t key = BenchObjectKey("bench-12");
  const uint64_t offset = 3 * kBenchPatternBlock + 100;  // reads need not start on a block
  for (size_t at : {size_t{0}, size_t{3995}, size_t{3996 + 9}, size_t{3996 + 4095}, size_t{9000}}) {
    auto b = Filled(key, offset, 3 * kBenchPatternBlock);
    b[at] ^= std::byte{0x01};
    const auto check = CheckBenchPattern(key, offset, b);
    EXPECT_EQ(check.mismatched_blocks, 1u) << at;
    EXPECT_EQ(check.first_offset, offset + at) << at;
  }
  // Two bad blocks: both counted, the first named.
  auto b = Filled(key, offset, 3 * kBenchPatternBlock);
  b[10000] ^= std::byte{0x80};
  b[50] ^= std::byte{0x80};
  const auto check = CheckBenchPattern(key, offset, b);
  EXPECT_EQ(check.mismatched_blocks, 2u);
  EXPECT_EQ(check.first_offset, offset + 50);
}

TEST(BenchPattern, RestampingMatchesAFreshFill) {
  // A buffer filled for one object and offset becomes another's of the same alignment.
  for (auto [from, to, size] : {std::tuple<uint64_t, uint64_t, size_t>{0, 1 << 20, 1 << 22},
                                {4100, 3 * 4096 + 4, 10000}, {7, 4096 + 7, 9}, {4090, 8186, 20}}) {
    auto b = Filled(BenchObjectKey("bench-1"), from, size);
    RestampBenchPattern(BenchObjectKey("bench-2"), to, b);
    EXPECT_EQ(b, Filled(BenchObjectKey("bench-2"), to, size)) << from << " -> " << to;
  }
}

}  // namespace
}  // namespace penstock::cli
