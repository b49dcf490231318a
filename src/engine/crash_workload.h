// crash_workload.h — what the crash test's worker process and its checker agree on.
//
// The worker (engine_crash_worker.cc) writes, range-writes and deletes shards and reports each
// operation through a pipe twice, as fixed-size WireRecords: an intent before calling the engine
// and an ack only after the call returned OK. The checker (engine_crash_test.cc) kills the
// worker at a random moment, reopens the engine and checks every key against what was
// acknowledged. A whole write's bytes are a pure function of (object, version), and so are a
// range write's range and bytes (RangeOf), so the checker, which sees each object's operations
// in order, can regenerate the exact bytes any state must hold. Test-only; pure functions and
// constants, thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace penstock::engine::crash {

enum class Wire : uint32_t {
  kReady = 0,        // engine open, workload starting
  kWriteIntent = 1,  // about to Write (object, version)
  kWriteAck = 2,     // Write returned OK
  kDeleteIntent = 3,
  kDeleteAck = 4,
  kFailed = 5,       // the call returned an error (state of the key: either)
  kRangeIntent = 6,  // about to WriteRange (object, version): RangeOf(object, version)
  kRangeAck = 7,
};

// One report; 32 bytes, so each write(2) to the pipe is atomic (< PIPE_BUF).
struct WireRecord {
  Wire kind = Wire::kReady;
  uint32_t length = 0;
  uint64_t object = 0;
  uint64_t version = 0;
  uint64_t hash = 0;  // FNV-1a of the shard's bytes (kWriteIntent, kWriteAck)
};
static_assert(sizeof(WireRecord) == 32);

inline constexpr uint64_t kObjects = 48;
inline constexpr int kWorkerThreads = 4;  // thread t owns objects t, t + 4, ...

inline ShardKey KeyOf(uint64_t object) { return testing::Key(7, object); }
inline uint32_t LengthOf(uint64_t object, uint64_t version) {
  return static_cast<uint32_t>(1 + (object * 7919 + version * 104729) % (24 * 1024));
}
inline std::vector<std::byte> DataOf(uint64_t object, uint64_t version) {
  return testing::Pattern(LengthOf(object, version), object * 1'000'003 + version);
}
// The range a range write at `version` writes: every other one block-aligned, inside, across
// and past the end of the shard's usual lengths.
struct Range {
  uint64_t offset = 0;
  std::vector<std::byte> data;
};
inline Range RangeOf(uint64_t object, uint64_t version) {
  uint64_t offset = (object * 131 + version * 7919) % 30000;
  uint64_t size = 1 + (object * 17 + version * 104729) % 9000;
  if (version % 2 == 0) {
    offset = offset / 4096 * 4096;
    size = (size + 4095) / 4096 * 4096;
  }
  return {offset, testing::Pattern(size, object * 1'000'003 + version + 7)};
}
// `shard` after the range write of (object, version).
inline std::vector<std::byte> AfterRange(std::vector<std::byte> shard, uint64_t object,
                                         uint64_t version) {
  Range r = RangeOf(object, version);
  if (shard.size() < r.offset + r.data.size()) shard.resize(r.offset + r.data.size(), std::byte{0});
  std::copy(r.data.begin(), r.data.end(), shard.begin() + static_cast<std::ptrdiff_t>(r.offset));
  return shard;
}
inline uint64_t Fnv1a(const std::byte* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

// Small segments so GC runs all the time under the workload; a small index journal that wraps
// often, and an index synced lazily enough that most kills land between a batch's journal flush
// and the index sync (Open then replays the journal).
inline EngineOptions CrashOptions(const std::string& dir) {
  EngineOptions o;
  o.data_path = dir + "/data";
  o.index_dir = dir + "/index";
  o.segment_bytes = 256 * 1024;
  o.capacity_bytes = (1 << 20) + 12 * o.segment_bytes;
  o.queue_depth = 32;
  o.gc_min_dead_fraction = 0.4;
  o.gc_rate_bytes_per_sec = 0;
  o.journal_bytes = 256 * 1024;
  o.index_sync_interval_ms = 150;
  // Batches overlap whenever a request waits (kWorkerThreads writers could never queue the
  // default 16), so kills land with several journal records in flight.
  o.commit_batches_in_flight = 3;
  o.commit_overlap_min_requests = 1;
  return o;
}

}  // namespace penstock::engine::crash
