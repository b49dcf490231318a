// redundancy.h — a container's data protection scheme as a value: parsed once where it enters
// (a flag, an API call, mgmt's request), carried as this struct everywhere after (ContainerInfo,
// the control plane's messages), validated in one place (ValidateRedundancy).
//
// A stripe of a protected container is stored as `width()` shards on distinct targets (and
// fault domains when there are enough): N full copies for rep:N, or K data cells and M parity
// cells for ec:K+M. Cell i of an ec stripe holds stripe bytes [i * cell, (i + 1) * cell); cells
// past the stripe's end are empty and parity covers the cells zero-padded to cell 0's length.
// Object heads are replicated on `head_copies()` targets (as many faults as the data survives).
//
// Write quorum: a write is acknowledged only once `quorum()` of its shards are durable
// (`min_durable`; by default 2 for rep:N and K + 1 for ec:K+M, like Ceph's min_size), so one
// more failure after an acknowledgement never loses it. Never below K.
// Pure values and functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "penstock/export.h"
#include "penstock/status.h"

namespace penstock {

struct PENSTOCK_API Redundancy {
  enum class Kind : uint8_t { kNone, kReplicate, kErasure };
  Kind kind = Kind::kNone;
  uint32_t k = 1;  // data shards (rep: 1)
  uint32_t m = 0;  // redundant shards, the faults a stripe survives (rep:N: N - 1)
  // Shards that must be durable before a write is acknowledged; 0: the default (DefaultQuorum).
  uint32_t min_durable = 0;

  uint32_t width() const { return k + m; }
  // Object heads have as many copies as faults the data survives, plus one.
  uint32_t head_copies() const { return m + 1; }
  bool protected_() const { return kind != Kind::kNone; }
  // The write quorum: min_durable, or the default for the scheme.
  uint32_t quorum() const { return min_durable != 0 ? min_durable : DefaultQuorum(); }
  // 2 for rep:N (N >= 2), K + 1 for ec:K+M, 1 for none.
  uint32_t DefaultQuorum() const { return kind == Kind::kNone ? 1 : k + 1; }
  // Bytes per cell for a stripe unit of `stripe_unit` (ec: stripe_unit / K rounded up to 64 B;
  // otherwise the stripe unit).
  uint64_t cell_size(uint64_t stripe_unit) const;
  // "none", "rep:3", "ec:4+2" (the scheme; min_durable is not part of it).
  std::string ToString() const;

  bool operator==(const Redundancy&) const = default;
};

// Limits: rep:N with 1 <= N <= 16; ec:K+M with 1 <= K <= 32, 1 <= M <= 16 (ISA-L Reed-Solomon).
inline constexpr uint32_t kMaxReplicas = 16;
inline constexpr uint32_t kMaxDataShards = 32;
inline constexpr uint32_t kMaxParityShards = 16;

// Parses "none" (or ""), "rep:N", "ec:K+M" ("rep:1" is none). Errors: kInvalidArgument naming
// the text and the accepted forms.
PENSTOCK_API Result<Redundancy> ParseRedundancy(std::string_view text);

// OK when `r` is a scheme within the limits above (kind none with k 1 and m 0; rep with k 1 and
// 1 <= m < kMaxReplicas; ec with K and M in range) and its min_durable is 0 or within [K, width].
// Errors: kInvalidArgument naming the scheme and what is wrong.
PENSTOCK_API Status ValidateRedundancy(const Redundancy& r);

}  // namespace penstock
