// write_version.h — the versions shard and head writes carry.
//
// Every shard and head write carries a version; targets keep the newest (kWriteIfNotOlder),
// reads and repair prefer the highest. Versions are wall-clock microseconds, so writers on
// different hosts order roughly by time, and strictly increasing within a process. Thread-safe.
#pragma once

#include <cstdint>

namespace penstock {

// A process-wide increasing version for shard and head writes: microseconds since the Unix
// epoch, strictly increasing within the process (later writes win in reads and repair).
uint64_t NewVersion();
// `version`, or stored + 1 when that is not above `stored` (a writer whose clock is behind the
// one that wrote the stored version).
uint64_t NewerThan(uint64_t version, uint64_t stored);
// Wall-clock milliseconds since the Unix epoch (mtimes, token expiries).
int64_t WallClockMs();

}  // namespace penstock
