#include "codec/erasure.h"

#include <gtest/gtest.h>

#include <random>

namespace penstock {
namespace {

// Every erasure pattern of up to m cells, for several (k, m): the rebuilt cells equal the
// originals.
TEST(ErasureCoderTest, RebuildsEveryPatternOfUpToMLostCells) {
  std::mt19937 rng(7);
  for (auto [k, m] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {2, 1}, {3, 2}, {4, 2}, {6, 3}}) {
    ErasureCoder ec(k, m);
    const size_t len = 1000 + k;  // not a multiple of anything
    std::vector<std::vector<std::byte>> cells(k + m, std::vector<std::byte>(len));
    for (uint32_t i = 0; i < k; ++i) {
      for (auto& b : cells[i]) b = static_cast<std::byte>(rng());
    }
    std::vector<const std::byte*> data;
    std::vector<std::byte*> parity;
    for (uint32_t i = 0; i < k; ++i) data.push_back(cells[i].data());
    for (uint32_t i = k; i < k + m; ++i) parity.push_back(cells[i].data());
    ec.Encode(len, data, parity);

    const uint32_t n = k + m;
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      if (static_cast<uint32_t>(__builtin_popcount(mask)) > m) continue;
      std::vector<const std::byte*> present(n);
      std::vector<uint32_t> want;
      for (uint32_t i = 0; i < n; ++i) {
        if (mask & (1u << i)) {
          want.push_back(i);
        } else {
          present[i] = cells[i].data();
        }
      }
      std::vector<std::vector<std::byte>> rebuilt(want.size(), std::vector<std::byte>(len));
      std::vector<std::byte*> out;
      for (auto& r : rebuilt) out.push_back(r.data());
      ASSERT_TRUE(ec.Reconstruct(len, present, want, out).ok());
      for (size_t w = 0; w < want.size(); ++w) {
        ASSERT_EQ(rebuilt[w], cells[want[w]]) << "k=" << k << " m=" << m << " mask=" << mask << " cell " << want[w];
      }
    }
  }
}

// Updating parity with the delta of a changed range of one data cell gives the parity that
// encoding the new data gives.
TEST(ErasureCoderTest, DeltaUpdateEqualsReencoding) {
  std::mt19937 rng(8);
  for (auto [k, m] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {2, 1}, {4, 2}, {6, 3}}) {
    ErasureCoder ec(k, m);
    const size_t len = 4096 + 3;
    std::vector<std::vector<std::byte>> cells(k + m, std::vector<std::byte>(len));
    auto encode = [&](std::vector<std::vector<std::byte>>& c) {
      std::vector<const std::byte*> data;
      std::vector<std::byte*> parity;
      for (uint32_t i = 0; i < k; ++i) data.push_back(c[i].data());
      for (uint32_t i = k; i < k + m; ++i) parity.push_back(c[i].data());
      ec.Encode(len, data, parity);
    };
    for (uint32_t i = 0; i < k; ++i) {
      for (auto& b : cells[i]) b = static_cast<std::byte>(rng());
    }
    encode(cells);
    for (int round = 0; round < 20; ++round) {
      const uint32_t index = static_cast<uint32_t>(rng() % k);
      const size_t lo = rng() % len, hi = lo + 1 + rng() % (len - lo);
      std::vector<std::byte> delta(hi - lo);
      for (size_t j = lo; j < hi; ++j) {
        const auto b = static_cast<std::byte>(rng());
        delta[j - lo] = cells[index][j] ^ b;
        cells[index][j] = b;
      }
      std::vector<std::byte*> parity;
      for (uint32_t i = k; i < k + m; ++i) parity.push_back(cells[i].data() + lo);
      ec.Update(hi - lo, index, delta.data(), parity);
      auto expect = cells;
      encode(expect);
      for (uint32_t i = k; i < k + m; ++i) ASSERT_EQ(cells[i], expect[i]) << "k=" << k << " round " << round;
    }
  }
}

TEST(ErasureCoderTest, TooFewCellsIsDataLoss) {
  ErasureCoder ec(2, 1);
  std::vector<std::byte> a(64);
  std::vector<const std::byte*> present{a.data(), nullptr, nullptr};
  std::vector<uint32_t> want{1};
  std::vector<std::byte> out(64);
  std::vector<std::byte*> o{out.data()};
  Status s = ec.Reconstruct(64, present, want, o);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("only 1 of 3"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace penstock
