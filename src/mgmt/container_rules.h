// container_rules.h — validation of container properties given at creation: name and stripe
// unit (redundancy: ValidateRedundancy, penstock/redundancy.h). Pure functions over values (no
// I/O, no state), shared by mgmt and usable by the CLI to fail early. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "penstock/redundancy.h"
#include "penstock/status.h"

namespace penstock::mgmt {

inline constexpr size_t kMaxContainerNameLength = 128;
inline constexpr uint64_t kDefaultStripeUnit = 1 << 20;  // 1 MiB
inline constexpr uint64_t kMinStripeUnit = 4096;         // one checksum block
inline constexpr uint64_t kMaxStripeUnit = 64ull << 20;  // 64 MiB

// OK when `name` matches [A-Za-z0-9._-]{1,128} and is not "." or "..".
// Errors: kInvalidArgument naming the name and the rule.
Status ValidateContainerName(std::string_view name);

// The scheme a container created without one gets: the strongest standard one a cluster of
// `usable` targets (not lost) holds: rep:3 with 3 or more, rep:2 with 2, none with 1 (or 0).
Redundancy DefaultRedundancy(uint32_t usable);

// The stripe unit to use for `stripe_unit` (0 means kDefaultStripeUnit).
// Errors: kInvalidArgument unless it is a multiple of 4 KiB within [4 KiB, 64 MiB].
Result<uint64_t> NormalizeStripeUnit(uint64_t stripe_unit);

}  // namespace penstock::mgmt
