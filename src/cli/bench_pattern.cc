#include "cli/bench_pattern.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace penstock::cli {

namespace {

constexpr size_t kHeaderBytes = 16;  // key, then the block's object offset

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void StoreLittleEndian(uint64_t v, std::byte* out) {
  for (int i = 0; i < 8; ++i) out[i] = std::byte{static_cast<unsigned char>(v >> (8 * i))};
}

// The body of every block (its first kHeaderBytes are not used).
const std::array<std::byte, kBenchPatternBlock>& Body() {
  static const auto body = [] {
    std::array<std::byte, kBenchPatternBlock> b{};
    uint64_t state = 0x70656e73746f636bULL;  // "penstock"
    for (size_t i = 0; i < b.size(); i += 8) StoreLittleEndian(SplitMix64(state), &b[i]);
    return b;
  }();
  return body;
}

std::array<std::byte, kHeaderBytes> Header(uint64_t key, uint64_t block_offset) {
  std::array<std::byte, kHeaderBytes> h;
  StoreLittleEndian(key, h.data());
  StoreLittleEndian(block_offset, h.data() + 8);
  return h;
}

// The part of one block that a buffer covers: object offset `block` + [from, from + length),
// at `at` in the buffer.
struct Piece {
  uint64_t block;
  size_t from, length, at;
};

// Calls fn(Piece) for each block that [offset, offset + size) touches, in order.
template <typename Fn>
void ForEachPiece(uint64_t offset, size_t size, Fn&& fn) {
  size_t at = 0;
  while (at < size) {
    const uint64_t x = offset + at;
    const size_t from = static_cast<size_t>(x % kBenchPatternBlock);
    const size_t length = std::min(size - at, static_cast<size_t>(kBenchPatternBlock) - from);
    fn(Piece{x - from, from, length, at});
    at += length;
  }
}

// Writes the header bytes of `p` (those in [0, kHeaderBytes)) into `out`.
void StampHeader(uint64_t key, const Piece& p, std::byte* out) {
  if (p.from >= kHeaderBytes) return;
  const auto h = Header(key, p.block);
  const size_t end = std::min(p.from + p.length, kHeaderBytes);
  std::memcpy(out + p.at, h.data() + p.from, end - p.from);
}

}  // namespace

uint64_t BenchObjectKey(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return SplitMix64(h);
}

void FillBenchPattern(uint64_t key, uint64_t offset, std::span<std::byte> out) {
  const auto& body = Body();
  ForEachPiece(offset, out.size(), [&](const Piece& p) {
    StampHeader(key, p, out.data());
    const size_t from = std::max(p.from, kHeaderBytes), end = p.from + p.length;
    if (end > from) std::memcpy(out.data() + p.at + (from - p.from), body.data() + from, end - from);
  });
}

void RestampBenchPattern(uint64_t key, uint64_t offset, std::span<std::byte> out) {
  ForEachPiece(offset, out.size(), [&](const Piece& p) { StampHeader(key, p, out.data()); });
}

BenchPatternCheck CheckBenchPattern(uint64_t key, uint64_t offset, std::span<const std::byte> data) {
  BenchPatternCheck check;
  const auto& body = Body();
  ForEachPiece(offset, data.size(), [&](const Piece& p) {
    const std::byte* got = data.data() + p.at;
    const size_t head = p.from < kHeaderBytes ? std::min(p.from + p.length, kHeaderBytes) - p.from : 0;
    bool same = head == 0 || std::memcmp(got, Header(key, p.block).data() + p.from, head) == 0;
    same = same && std::memcmp(got + head, body.data() + p.from + head, p.length - head) == 0;
    if (same) return;
    ++check.mismatched_blocks;
    if (check.first_offset) return;
    std::array<std::byte, kBenchPatternBlock> want;
    FillBenchPattern(key, p.block + p.from, std::span(want).first(p.length));
    const size_t i = static_cast<size_t>(std::mismatch(got, got + p.length, want.data()).first - got);
    check.first_offset = p.block + p.from + i;
  });
  return check;
}

}  // namespace penstock::cli
