#include "codec/erasure.h"

#include <isa-l/erasure_code.h>

namespace penstock {

ErasureCoder::ErasureCoder(uint32_t k, uint32_t m) : k_(k), m_(m) {
  const uint32_t rows = k + m;
  matrix_.resize(static_cast<size_t>(rows) * k);
  gf_gen_cauchy1_matrix(matrix_.data(), static_cast<int>(rows), static_cast<int>(k));
  encode_tables_.resize(static_cast<size_t>(k) * m * 32);
  ec_init_tables(static_cast<int>(k), static_cast<int>(m), matrix_.data() + static_cast<size_t>(k) * k,
                 encode_tables_.data());
}

void ErasureCoder::Encode(size_t len, std::span<const std::byte* const> data,
                          std::span<std::byte* const> parity) const {
  std::vector<unsigned char*> in(k_), out(m_);
  for (uint32_t i = 0; i < k_; ++i) in[i] = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data[i]));
  for (uint32_t i = 0; i < m_; ++i) out[i] = reinterpret_cast<unsigned char*>(parity[i]);
  ec_encode_data(static_cast<int>(len), static_cast<int>(k_), static_cast<int>(m_),
                 const_cast<unsigned char*>(encode_tables_.data()), in.data(), out.data());
}

void ErasureCoder::Update(size_t len, uint32_t index, const std::byte* delta,
                          std::span<std::byte* const> parity) const {
  std::vector<unsigned char*> out(m_);
  for (uint32_t i = 0; i < m_; ++i) out[i] = reinterpret_cast<unsigned char*>(parity[i]);
  ec_encode_data_update(static_cast<int>(len), static_cast<int>(k_), static_cast<int>(m_), static_cast<int>(index),
                        const_cast<unsigned char*>(encode_tables_.data()),
                        reinterpret_cast<unsigned char*>(const_cast<std::byte*>(delta)), out.data());
}

const std::vector<uint8_t>& ErasureCoder::DecodeTables(const std::vector<uint32_t>& sources,
                                                       const std::vector<uint32_t>& want) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(sources, want);
  auto it = decode_cache_.find(key);
  if (it != decode_cache_.end()) return it->second;
  // B: the encode-matrix rows of the source cells; D = B^-1 maps sources back to data.
  std::vector<uint8_t> b(static_cast<size_t>(k_) * k_), d(b.size());
  for (uint32_t r = 0; r < k_; ++r) {
    for (uint32_t c = 0; c < k_; ++c) b[r * k_ + c] = matrix_[sources[r] * k_ + c];
  }
  gf_invert_matrix(b.data(), d.data(), static_cast<int>(k_));  // invertible: Cauchy
  std::vector<uint8_t> rows(want.size() * k_);
  for (size_t w = 0; w < want.size(); ++w) {
    if (want[w] < k_) {
      for (uint32_t c = 0; c < k_; ++c) rows[w * k_ + c] = d[want[w] * k_ + c];
    } else {
      // Parity row times D: expresses the parity cell in terms of the sources.
      for (uint32_t c = 0; c < k_; ++c) {
        uint8_t acc = 0;
        for (uint32_t j = 0; j < k_; ++j) acc ^= gf_mul(matrix_[want[w] * k_ + j], d[j * k_ + c]);
        rows[w * k_ + c] = acc;
      }
    }
  }
  std::vector<uint8_t> tables(static_cast<size_t>(k_) * want.size() * 32);
  ec_init_tables(static_cast<int>(k_), static_cast<int>(want.size()), rows.data(), tables.data());
  return decode_cache_.emplace(std::move(key), std::move(tables)).first->second;
}

Status ErasureCoder::Reconstruct(size_t len, std::span<const std::byte* const> cells,
                                 std::span<const uint32_t> want, std::span<std::byte* const> out) {
  std::vector<uint32_t> sources;
  for (uint32_t i = 0; i < k_ + m_ && sources.size() < k_; ++i) {
    if (cells[i] != nullptr) sources.push_back(i);
  }
  if (sources.size() < k_) {
    return DataLoss("only " + std::to_string(sources.size()) + " of " + std::to_string(k_ + m_) +
                    " cells are readable; " + std::to_string(k_) + " are needed to rebuild the stripe");
  }
  if (want.empty()) return OkStatus();
  std::vector<uint32_t> wanted(want.begin(), want.end());
  const std::vector<uint8_t>& tables = DecodeTables(sources, wanted);
  std::vector<unsigned char*> in(k_), o(want.size());
  for (uint32_t i = 0; i < k_; ++i) {
    in[i] = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(cells[sources[i]]));
  }
  for (size_t i = 0; i < want.size(); ++i) o[i] = reinterpret_cast<unsigned char*>(out[i]);
  ec_encode_data(static_cast<int>(len), static_cast<int>(k_), static_cast<int>(want.size()),
                 const_cast<unsigned char*>(tables.data()), in.data(), o.data());
  return OkStatus();
}

}  // namespace penstock
