// bench_pattern.h — the bytes `penstock bench` writes, so that its reads can check them.
//
// Every 4 KiB block of a bench object (the block at object offset B, B a multiple of 4096)
// holds a 16-byte header, the object's key (BenchObjectKey of its name) and then B, both
// little-endian u64, followed by a body of 4080 pseudo-random bytes that is the same in every
// block. So any block, or any part of one, can be checked alone knowing only the object's name
// and where it was read from: a block of another object or another offset, zeros, or one
// changed byte all differ from it.
//
// Writing it costs little: a buffer that holds the pattern for one object and offset serves
// any other object and offset of the same alignment (offset % 4096) once its headers are
// stamped again (RestampBenchPattern: 16 bytes per 4 KiB). The format is fixed: objects
// written by one version of the bench are checked by the next (a test pins it).
//
// Pure functions over buffers; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace penstock::cli {

inline constexpr uint64_t kBenchPatternBlock = 4096;

// The key of the object named `name`: a 64-bit hash of its bytes (FNV-1a, then mixed).
uint64_t BenchObjectKey(std::string_view name);

// Writes into `out` the pattern of object `key` at object offsets [offset, offset + out.size()).
void FillBenchPattern(uint64_t key, uint64_t offset, std::span<std::byte> out);

// The same result as FillBenchPattern(key, offset, out) when `out` already holds the pattern
// of some object at some offset with the same remainder modulo 4096 (only the headers differ,
// and only they are written).
void RestampBenchPattern(uint64_t key, uint64_t offset, std::span<std::byte> out);

struct BenchPatternCheck {
  uint64_t mismatched_blocks = 0;        // blocks (or parts of blocks) with any byte wrong
  std::optional<uint64_t> first_offset;  // object offset of the first wrong byte
};

// Checks every byte of `data`, read from object `key` at object offset `offset`.
BenchPatternCheck CheckBenchPattern(uint64_t key, uint64_t offset, std::span<const std::byte> data);

}  // namespace penstock::cli
