// erasure.h — Reed-Solomon erasure coding over GF(2^8) with ISA-L: K data cells, M parity
// cells; any K of the K + M cells give back the rest.
//
// The coding matrix is a Cauchy matrix (every K x K submatrix of it is invertible, for any K and
// M ISA-L supports), so the layout on disk is fixed by (K, M) alone. Decode tables are cached per
// erasure pattern. An ErasureCoder is immutable after construction except for that cache, which
// is guarded: one coder may be used from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "penstock/status.h"

namespace penstock {

class ErasureCoder {
 public:
  // 1 <= k, 1 <= m, k + m <= 255.
  ErasureCoder(uint32_t k, uint32_t m);

  uint32_t k() const { return k_; }
  uint32_t m() const { return m_; }

  // Computes the m parity cells from the k data cells; every cell has `len` bytes.
  void Encode(size_t len, std::span<const std::byte* const> data, std::span<std::byte* const> parity) const;

  // Parity update for a change of data cell `index` (0..k-1): XORs into each parity cell's
  // `len` bytes what `delta` (old data XOR new data, `len` bytes) contributes, so that parity
  // computed from the old data becomes parity of the new (Reed-Solomon is linear). For small
  // writes: only the changed range of one cell and of the parity is read and written.
  void Update(size_t len, uint32_t index, const std::byte* delta, std::span<std::byte* const> parity) const;

  // Rebuilds the cells listed in `want` (indexes 0..k+m-1) from any k present cells.
  // `cells[i]` points at cell i's `len` bytes or is null when cell i is missing; the cells in
  // `want` are written through `out` (same order as `want`). Errors: kDataLoss when fewer than k
  // cells are present.
  Status Reconstruct(size_t len, std::span<const std::byte* const> cells, std::span<const uint32_t> want,
                     std::span<std::byte* const> out);

 private:
  const std::vector<uint8_t>& DecodeTables(const std::vector<uint32_t>& sources,
                                           const std::vector<uint32_t>& want);

  uint32_t k_, m_;
  std::vector<uint8_t> matrix_;  // (k + m) x k encode matrix, identity on top
  std::vector<uint8_t> encode_tables_;
  std::mutex mu_;
  std::map<std::pair<std::vector<uint32_t>, std::vector<uint32_t>>, std::vector<uint8_t>> decode_cache_;
};

}  // namespace penstock
