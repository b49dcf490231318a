// stripe_geometry.h — the shape of one stripe: its container's redundancy, its stripe unit
// and, for ec, the length of each cell.
//
// A value, copied freely; StripeIo takes one with every stripe operation (object code builds
// it once per object, StripeGeometry::For).
#pragma once

#include <cstdint>

#include "penstock/redundancy.h"

namespace penstock {

struct StripeGeometry {
  Redundancy red;
  uint64_t stripe_unit = 0;
  uint64_t cell = 0;  // bytes per ec cell; the stripe unit otherwise

  static StripeGeometry For(const Redundancy& red, uint64_t stripe_unit) {
    return {red, stripe_unit, red.cell_size(stripe_unit)};
  }
  // Length of every shard of an ec stripe of `length` logical bytes.
  uint64_t shard_length(uint64_t length) const { return length < cell ? length : cell; }
};

}  // namespace penstock
