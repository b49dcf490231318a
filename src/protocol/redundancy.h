// redundancy.h — a container's data protection scheme ("none", "rep:N", "ec:K+M") as a value,
// and how one stripe of it maps onto shards.
//
// A stripe of a protected container is stored as `width()` shards on distinct targets (and
// fault domains when there are enough): N full copies for rep:N, or K data cells and M parity
// cells for ec:K+M. Cell i of an ec stripe holds stripe bytes [i * cell, (i + 1) * cell); cells
// past the stripe's end are empty and parity covers the cells zero-padded to cell 0's length.
// Object heads are replicated on `head_copies()` targets (as many faults as the data survives).
// Pure values and functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "penstock/status.h"

namespace penstock {

struct Redundancy {
  enum class Kind : uint8_t { kNone, kReplicate, kErasure };
  Kind kind = Kind::kNone;
  uint32_t k = 1;  // data shards (rep: 1)
  uint32_t m = 0;  // redundant shards, the faults a stripe survives (rep:N: N - 1)

  uint32_t width() const { return k + m; }
  // Object heads have as many copies as faults the data survives, plus one.
  uint32_t head_copies() const { return m + 1; }
  bool protected_() const { return kind != Kind::kNone; }
  // Bytes per cell for a stripe unit of `stripe_unit` (ec: stripe_unit / K rounded up to 64 B;
  // otherwise the stripe unit).
  uint64_t cell_size(uint64_t stripe_unit) const;
  // "none", "rep:3", "ec:4+2".
  std::string ToString() const;
};

// Limits: rep:N with 1 <= N <= 16; ec:K+M with 1 <= K <= 32, 1 <= M <= 16 (ISA-L Reed-Solomon).
inline constexpr uint32_t kMaxReplicas = 16;
inline constexpr uint32_t kMaxDataShards = 32;
inline constexpr uint32_t kMaxParityShards = 16;

// Parses "none" (or ""), "rep:N", "ec:K+M". Errors: kInvalidArgument naming the text and the
// accepted forms.
Result<Redundancy> ParseRedundancy(std::string_view text);

}  // namespace penstock
