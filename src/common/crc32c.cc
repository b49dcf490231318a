#include "common/crc32c.h"

#include <isa-l/crc.h>

namespace penstock {

uint32_t Crc32c(std::span<const std::byte> data, uint32_t seed) {
  // ISA-L's crc32_iscsi takes and returns the raw (non-inverted) register;
  // invert on the way in and out to get the standard CRC-32C.
  uint32_t r = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data.data())),
                           static_cast<int>(data.size()), ~seed);
  return ~r;
}

}  // namespace penstock
