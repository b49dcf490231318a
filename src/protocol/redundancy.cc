#include "penstock/redundancy.h"

#include <charconv>

namespace penstock {

namespace {

bool ParseSmall(std::string_view s, uint32_t& out) {
  if (s.empty() || s.size() > 3) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

uint64_t Redundancy::cell_size(uint64_t stripe_unit) const {
  if (kind != Kind::kErasure) return stripe_unit;
  uint64_t c = (stripe_unit + k - 1) / k;
  return (c + 63) / 64 * 64;
}

std::string Redundancy::ToString() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kReplicate: return "rep:" + std::to_string(k + m);
    case Kind::kErasure: return "ec:" + std::to_string(k) + "+" + std::to_string(m);
  }
  return "none";
}

Result<Redundancy> ParseRedundancy(std::string_view text) {
  const std::string forms = "; use none, rep:N (2 <= N <= 16, or 1) or ec:K+M (1 <= K <= 32, 1 <= M <= 16)";
  Redundancy r;
  if (text.empty() || text == "none") return r;
  if (text.starts_with("rep:")) {
    uint32_t n = 0;
    if (!ParseSmall(text.substr(4), n) || n < 1 || n > kMaxReplicas) {
      return InvalidArgument("redundancy '" + std::string(text) + "' has a bad replica count" + forms);
    }
    if (n == 1) return r;  // one copy is no protection: the same as none
    r.kind = Redundancy::Kind::kReplicate;
    r.k = 1;
    r.m = n - 1;
    return r;
  }
  if (text.starts_with("ec:")) {
    std::string_view km = text.substr(3);
    size_t plus = km.find('+');
    uint32_t k = 0, m = 0;
    if (plus == std::string_view::npos || !ParseSmall(km.substr(0, plus), k) ||
        !ParseSmall(km.substr(plus + 1), m) || k < 1 || k > kMaxDataShards || m < 1 ||
        m > kMaxParityShards) {
      return InvalidArgument("redundancy '" + std::string(text) + "' has bad K or M" + forms);
    }
    r.kind = Redundancy::Kind::kErasure;
    r.k = k;
    r.m = m;
    return r;
  }
  return InvalidArgument("redundancy '" + std::string(text) + "' is not a redundancy scheme" + forms);
}

Status ValidateRedundancy(const Redundancy& r) {
  const std::string what = "redundancy " + r.ToString();
  switch (r.kind) {
    case Redundancy::Kind::kNone:
      if (r.k != 1 || r.m != 0) return InvalidArgument(what + " must have k 1 and m 0");
      break;
    case Redundancy::Kind::kReplicate:
      if (r.k != 1 || r.m < 1 || r.m + 1 > kMaxReplicas) {
        return InvalidArgument(what + " needs 2 to " + std::to_string(kMaxReplicas) + " copies");
      }
      break;
    case Redundancy::Kind::kErasure:
      if (r.k < 1 || r.k > kMaxDataShards || r.m < 1 || r.m > kMaxParityShards) {
        return InvalidArgument(what + " needs 1 <= K <= " + std::to_string(kMaxDataShards) + " and 1 <= M <= " +
                               std::to_string(kMaxParityShards));
      }
      break;
    default:
      return InvalidArgument("redundancy of unknown kind " + std::to_string(static_cast<int>(r.kind)));
  }
  if (r.min_durable != 0 && (r.min_durable < r.k || r.min_durable > r.width())) {
    return InvalidArgument(what + " cannot acknowledge writes on " + std::to_string(r.min_durable) +
                           " durable shards: --min-durable must be between " + std::to_string(r.k) + " (K) and " +
                           std::to_string(r.width()) + " (every shard)");
  }
  return OkStatus();
}

}  // namespace penstock
