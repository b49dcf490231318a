// test_util.h — helpers shared by the engine's tests: a scratch directory and engine options.
// Test-only; not thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "engine/engine.h"

namespace penstock::engine::testing {

// A fresh directory, removed with everything in it at destruction.
using ScratchDir = ::penstock::testing::TempDir;

// Opens an engine, failing the test (and returning null) when it cannot.
inline std::unique_ptr<Engine> MustOpen(const EngineOptions& o) {
  auto e = Engine::Open(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

// Options for a small engine inside `dir`: `segments` segments of `segment_bytes`.
inline EngineOptions SmallOptions(const ScratchDir& dir, uint64_t segments = 16,
                                  uint64_t segment_bytes = 1 << 20) {
  EngineOptions o;
  o.data_path = dir.path() + "/data";
  o.index_dir = dir.path() + "/index";
  o.segment_bytes = segment_bytes;
  o.capacity_bytes = (1 << 20) + segments * segment_bytes;  // + the 1 MiB header
  o.queue_depth = 32;
  return o;
}

// Deterministic pseudo-random bytes.
inline std::vector<std::byte> Pattern(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    for (size_t j = 0; j < 8 && i + j < n; ++j) v[i + j] = static_cast<std::byte>(x >> (8 * j));
  }
  return v;
}

inline ShardKey Key(uint64_t container, uint64_t object, uint64_t stripe = 0, uint32_t shard = 0) {
  return ShardKey{container, ObjectId{object, ~object}, stripe, shard};
}

inline bool SameBytes(const AlignedBuffer& got, const std::vector<std::byte>& want) {
  return got.size() == want.size() &&
         (want.empty() || std::memcmp(got.data(), want.data(), want.size()) == 0);
}

// Flips one bit of the byte `at` bytes into the first copy of `data` found in the file `path`
// (data must be at least at + 64 bytes, and distinctive). False if not found.
inline bool FlipByteOf(const std::string& path, const std::vector<std::byte>& data, size_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string needle(reinterpret_cast<const char*>(data.data()) + at, 64);
  size_t pos = file.find(needle);
  if (pos == std::string::npos) return false;
  f.seekp(static_cast<std::streamoff>(pos));
  f.put(static_cast<char>(file[pos] ^ 0x01));
  return f.good();
}

// Copies the engine files of `from` (SmallOptions layout: data, index/) into `to`, replacing
// what was there: the image a crash (kill -9) would leave if it struck now, while the engine
// is idle. RocksDB's unsynced WAL buffer lives in the process and is not in the copy; neither
// is anything else the engine has not written to its files yet.
inline void CrashImage(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  fs::remove_all(to + "/index");
  fs::remove(to + "/data");
  fs::copy(from + "/data", to + "/data");
  fs::copy(from + "/index", to + "/index", fs::copy_options::recursive);
  fs::remove(to + "/index/LOCK");
}

// `o` moved to the crash image in `dir` (CrashImage's layout), to open it.
inline EngineOptions InImage(EngineOptions o, const std::string& dir) {
  o.data_path = dir + "/data";
  o.index_dir = dir + "/index";
  return o;
}

}  // namespace penstock::engine::testing
