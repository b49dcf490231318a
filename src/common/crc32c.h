// crc32c.h — CRC-32C (Castagnoli) over byte spans, computed by ISA-L.
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace penstock {

// CRC-32C of `data`, continuing from `seed` (0 for a fresh checksum).
// Matches the iSCSI / RFC 3720 definition (crc32c("123456789") == 0xE3069283).
uint32_t Crc32c(std::span<const std::byte> data, uint32_t seed = 0);

}  // namespace penstock
