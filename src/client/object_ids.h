// object_ids.h — how names become 128-bit object ids.
// Pure functions; thread-safe (NewDataId uses a thread-local generator).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace penstock {

// Id of the head record of object `name` in container `container_id`: the first 128 bits of
// SHA-256(container id || name). Every client computes the same id without a lookup.
std::pair<uint64_t, uint64_t> HeadObjectId(uint64_t container_id, const std::string& name);

// Id of the record `key` of `group` (records.h): the group's 64 bits (shared by its records,
// so that they sort together on every target) and the key's (never 0).
std::pair<uint64_t, uint64_t> RecordObjectId(uint64_t container_id, const std::string& group, const std::string& key);
uint64_t RecordGroupHi(uint64_t container_id, const std::string& group);

// A fresh random 128-bit id for a put's data stripes (never equal to a head id in practice).
std::pair<uint64_t, uint64_t> NewDataId();

}  // namespace penstock
