// disjoint_writes.h — test helper: several threads write disjoint pieces of one object through
// two Objects (as two clients would) and the expected bytes are kept, to check that no update
// is lost. Test-only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "penstock/object_io.h"

namespace penstock::testing {

struct DisjointWrites {
  std::vector<std::byte> model;  // each piece's last acknowledged bytes (zeros if never written)
  uint64_t furthest = 0;         // end of the furthest piece written
  int failures = 0;              // writes that failed
};

// `writers` threads (even ones through `a`, odd ones through `b`) each write `rounds` random
// pieces of `piece` bytes among `pieces`; writer w owns pieces w, w + writers, ..., so the
// pieces of all writers interleave within every stripe.
inline DisjointWrites WriteDisjointPieces(Object& a, Object& b, uint64_t piece, uint64_t pieces, uint64_t writers,
                                          int rounds) {
  DisjointWrites out;
  out.model.assign(piece * pieces, std::byte{0});
  std::mutex mu;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint64_t w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      Object& obj = w % 2 == 0 ? a : b;
      std::mt19937 rng(static_cast<uint32_t>(w + 50));
      for (int i = 0; i < rounds; ++i) {
        const uint64_t p = w + writers * (rng() % (pieces / writers));
        std::vector<std::byte> bytes(piece);
        for (auto& x : bytes) x = std::byte{static_cast<unsigned char>(rng())};
        if (!obj.Write(p * piece, bytes).ok()) {
          ++failures;
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        std::memcpy(out.model.data() + p * piece, bytes.data(), piece);
        out.furthest = std::max(out.furthest, (p + 1) * piece);
      }
    });
  }
  for (auto& t : threads) t.join();
  out.failures = failures.load();
  return out;
}

// Pieces of `read` (the object's bytes from 0) that differ from what was last written.
inline size_t LostPieces(const DisjointWrites& w, std::span<const std::byte> read, uint64_t piece) {
  size_t lost = 0;
  for (uint64_t p = 0; p < w.furthest / piece; ++p) {
    lost += p * piece + piece > read.size() ||
            std::memcmp(read.data() + p * piece, w.model.data() + p * piece, piece) != 0;
  }
  return lost;
}

}  // namespace penstock::testing
