// engine.h — the storage engine of a target: shards in, shards out, on one data device.
//
// An Engine owns one data device (a file or block device, driven by io_uring with O_DIRECT)
// and one RocksDB index. Shard data is appended, 4 KiB aligned, to the open segment of the
// device; the index maps each ShardKey to where its bytes are plus a crc32c per 4 KiB block.
// The index is the truth: data reaches the device (durably) before its index record is
// committed (synced), so after a crash Open rebuilds everything from the index and data that
// was written but not indexed is garbage. Space is reclaimed one whole segment at a time, when
// no live shard is left in it (GC that relocates live shards is later work).
//
// Thread safety: every method may be called from any number of threads at once. Writes to
// one key are ordered by a per-key lock; the last Write (or Delete) to return wins.
// Ownership: Open returns the sole owner; destroying the Engine closes device and index (no
// call may be in flight then).
#pragma once

#include <array>
#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/buffer.h"
#include "penstock/status.h"

namespace penstock {

struct ObjectId {
  uint64_t hi = 0, lo = 0;
  auto operator<=>(const ObjectId&) const = default;
};

struct ShardKey {
  uint64_t container = 0;
  ObjectId object;
  uint64_t stripe = 0;  // stripe index within the object; kHeadStripe = the object's head record
  uint32_t shard = 0;   // shard index within the stripe (0 for unprotected data)
  static constexpr uint64_t kHeadStripe = UINT64_MAX;
  auto operator<=>(const ShardKey&) const = default;
  // "c=3 obj=0123456789abcdef:0123456789abcdef stripe=2 shard=0" (stripe=head for kHeadStripe).
  std::string ToString() const;
};

struct ShardInfo {
  uint64_t length = 0;
  uint64_t version = 0;
  friend bool operator==(const ShardInfo&, const ShardInfo&) = default;
};

struct EngineOptions {
  std::string data_path;  // file (created and preallocated to capacity_bytes if absent) or block device
  std::string index_dir;  // RocksDB directory (created if absent)
  uint64_t capacity_bytes = 1ull << 30;  // for a new file; a block device uses its own size.
                                         // The first 1 MiB holds the device header.
  uint64_t segment_bytes = 64ull << 20;  // multiple of 4 KiB; fixed when the device is formatted
  unsigned queue_depth = 64;             // io_uring entries (I/Os in flight at once)
};

struct EngineStats {
  uint64_t capacity_bytes = 0;  // total_segments * segment_bytes
  uint64_t used_bytes = 0;      // bytes in non-free segments
  uint64_t live_bytes = 0;      // bytes (4 KiB rounded) of live shards
  uint64_t dead_bytes = 0;      // bytes in non-free segments that hold no live shard and cannot
                                // be reused without GC (excludes the open segment's unwritten tail)
  uint64_t free_segments = 0;
  uint64_t total_segments = 0;
  uint64_t shards = 0;
  uint64_t reads = 0, writes = 0, deletes = 0, checksum_errors = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  // logical shard bytes
};

namespace engine {
class Device;
class Index;
class SegmentTable;
struct ShardRecord;
}  // namespace engine

class Engine {
 public:
  // Opens (formatting on first use) the device at options.data_path and the index at
  // options.index_dir. Errors: kInvalidArgument (bad options, segment_bytes differs from the
  // formatted one), kPermissionDenied (path not writable; the message says which), kFailedPrecondition
  // (device and index do not belong together), kDataLoss (corrupt index or device header),
  // kUnavailable (already open elsewhere).
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options);
  // Same, over a caller-supplied device (fault-injection tests; later a null device).
  // options.data_path is used only in messages.
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options,
                                              std::unique_ptr<engine::Device> device);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Stores `data` (any length up to segment_bytes, 0 allowed) under `key`, replacing any
  // previous version. Durable when it returns OK (survives kill -9 and power loss).
  // Errors: kInvalidArgument (larger than a segment), kResourceExhausted "no space" (delete
  // shards, then retry), I/O errors from the device or index.
  Status Write(const ShardKey& key, std::span<const std::byte> data, uint64_t version);
  // Returns exactly the bytes last written. Errors: kNotFound; kDataLoss when a 4 KiB block
  // fails its crc32c (the message names the key and the block offset) — never wrong bytes.
  Result<AlignedBuffer> Read(const ShardKey& key);
  Status Delete(const ShardKey& key);           // kNotFound if absent
  Result<ShardInfo> Stat(const ShardKey& key);  // kNotFound if absent
  // Shards of `container` (all objects, or one `object`) in key order, at most `limit`,
  // starting after `start_after` if given.
  Result<std::vector<std::pair<ShardKey, ShardInfo>>> List(uint64_t container,
                                                           std::optional<ObjectId> object,
                                                           std::optional<ShardKey> start_after,
                                                           size_t limit);
  EngineStats Stats() const;

  uint64_t segment_bytes() const { return segment_bytes_; }

 private:
  Engine(EngineOptions options, std::unique_ptr<engine::Device> device,
         std::unique_ptr<engine::Index> index, std::unique_ptr<engine::SegmentTable> table,
         uint64_t data_offset);
  Status Recover();
  uint64_t DeviceOffset(uint32_t segment, uint64_t offset) const {
    return data_offset_ + uint64_t{segment} * segment_bytes_ + offset;
  }
  Status VerifyBlocks(const ShardKey& key, const engine::ShardRecord& record,
                      std::span<const std::byte> padded);
  std::shared_mutex& KeyLock(const ShardKey& key);

  static constexpr size_t kKeyLockStripes = 1024;

  const EngineOptions options_;
  const uint64_t segment_bytes_;
  const uint64_t data_offset_;
  std::unique_ptr<engine::Device> device_;
  std::unique_ptr<engine::Index> index_;
  std::unique_ptr<engine::SegmentTable> table_;
  // Held shared while a reader looks a key up and pins its segment; exclusive while a writer
  // or deleter swaps the key's index record and returns its old space.
  std::array<std::shared_mutex, kKeyLockStripes> key_locks_;

  std::atomic<uint64_t> shards_{0};
  std::atomic<uint64_t> reads_{0}, writes_{0}, deletes_{0}, checksum_errors_{0};
  std::atomic<uint64_t> bytes_read_{0}, bytes_written_{0};
};

}  // namespace penstock
