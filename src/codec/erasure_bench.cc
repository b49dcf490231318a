// erasure_bench — the raw speed of ISA-L Reed-Solomon on this machine, one thread: the bound
// for Penstock's ec write path (encode) and degraded reads (reconstruct). Prints one JSON
// object per (K, M) with encode and reconstruct throughput in MB/s of data bytes.
// Usage: erasure_bench [SECONDS_PER_CASE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "codec/erasure.h"

using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const double secs = argc > 1 ? std::atof(argv[1]) : 1.0;
  const size_t stripe = 1 << 20;  // the default stripe unit
  for (auto [k, m] : std::vector<std::pair<uint32_t, uint32_t>>{{2, 1}, {4, 2}, {8, 3}}) {
    penstock::ErasureCoder ec(k, m);
    const size_t cell = (stripe / k + 63) / 64 * 64;
    std::vector<std::vector<std::byte>> cells(k + m, std::vector<std::byte>(cell));
    std::mt19937 rng(1);
    for (uint32_t i = 0; i < k; ++i) {
      for (auto& b : cells[i]) b = static_cast<std::byte>(rng());
    }
    std::vector<const std::byte*> data;
    std::vector<std::byte*> parity;
    for (uint32_t i = 0; i < k; ++i) data.push_back(cells[i].data());
    for (uint32_t i = k; i < k + m; ++i) parity.push_back(cells[i].data());

    auto measure = [&](auto&& fn) {
      uint64_t n = 0;
      const auto start = Clock::now();
      double elapsed = 0;
      do {
        fn();
        ++n;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      } while (elapsed < secs);
      return static_cast<double>(n) * static_cast<double>(k * cell) / elapsed / 1e6;
    };
    const double encode = measure([&] { ec.Encode(cell, data, parity); });
    // Reconstruct: the first m data cells lost (the worst case), rebuilt from the rest.
    std::vector<const std::byte*> present(k + m);
    std::vector<uint32_t> want;
    for (uint32_t i = 0; i < k + m; ++i) {
      if (i < m && i < k) {
        want.push_back(i);
      } else {
        present[i] = cells[i].data();
      }
    }
    std::vector<std::vector<std::byte>> out(want.size(), std::vector<std::byte>(cell));
    std::vector<std::byte*> out_ptrs;
    for (auto& o : out) out_ptrs.push_back(o.data());
    const double decode = measure([&] {
      if (!ec.Reconstruct(cell, present, want, out_ptrs).ok()) std::abort();
    });
    std::printf("{\"k\": %u, \"m\": %u, \"cell_bytes\": %zu, \"encode_mb_per_s\": %.0f, \"reconstruct_mb_per_s\": %.0f}\n",
                k, m, cell, encode, decode);
  }
  return 0;
}
