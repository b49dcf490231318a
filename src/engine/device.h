// device.h — the block store under the engine: a flat range of bytes read and written in
// 4 KiB units.
//
// The engine reaches the disk only through this interface, so tests can substitute a device
// that fails on demand and later work can add a null device or a multi-queue one.
// Contract for every implementation:
//   * offsets and lengths are multiples of kDeviceBlockSize; buffers are 4 KiB aligned
//     (AlignedBuffer); a call outside [0, size()) is kInvalidArgument.
//   * Write is durable when it returns OK (as if followed by Sync). WriteUnsynced is durable
//     only after a later Sync returns OK. WriteAll issues many writes at once and can sync after
//     them (the engine's group commit: a batch's data and its journal record, one flush);
//     StartWriteAll/FinishWriteAll are its halves, for several such groups in flight.
//   * Read returns the bytes last durably written (or garbage if never written).
// Thread safety: every method may be called from any number of threads at once; calls on
// overlapping ranges are not ordered against each other (the engine never issues them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "penstock/status.h"

namespace penstock::engine {

inline constexpr uint64_t kDeviceBlockSize = 4096;

// One write of a Device::WriteAll call.
struct DeviceWrite {
  uint64_t offset = 0;
  std::span<const std::byte> data;
  Status status;  // set by WriteAll
};

// A byte range of a device.
struct DeviceRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  friend bool operator==(const DeviceRange&, const DeviceRange&) = default;
};

// One read of Device::ReadAll.
struct DeviceRead {
  uint64_t offset = 0;
  std::span<std::byte> out;
};

class Device {
 public:
  virtual ~Device() = default;

  // Capacity in bytes (a multiple of kDeviceBlockSize).
  virtual uint64_t size() const = 0;
  // Path or name, for messages.
  virtual const std::string& name() const = 0;

  // Writes `data` at `offset`, durably. Errors: kInvalidArgument (misaligned, out of range),
  // device errors (kResourceExhausted for ENOSPC, kInternal for EIO, ...).
  virtual Status Write(uint64_t offset, std::span<const std::byte> data) = 0;
  // Writes `data` at `offset`; durable only after the next successful Sync. Errors as Write.
  // The default is Write (already durable).
  virtual Status WriteUnsynced(uint64_t offset, std::span<const std::byte> data) {
    return Write(offset, data);
  }
  // Writes every element of `writes` (at once, in no particular order; the ranges must not
  // overlap) and sets its status; then, with `sync`, makes every completed write durable (as
  // Sync). Returns the first error: a write's, else the sync's. A write that failed is not
  // covered by the sync's success. The default is WriteUnsynced for each, then Sync.
  virtual Status WriteAll(std::span<DeviceWrite> writes, bool sync);
  // WriteAll in two halves, so that several calls can be in flight at once (the committer
  // overlaps one group commit's flush with the next one's writes): StartWriteAll starts it and
  // returns; FinishWriteAll waits for it, sets the writes' statuses and returns what WriteAll
  // would have. Each call's sync covers its own writes (and any completed before it), not those
  // of calls still in flight. `writes` and their buffers must stay valid, and every started
  // call must be finished, in any order. The default runs WriteAll in StartWriteAll.
  class PendingWrites {
   public:
    virtual ~PendingWrites() = default;
    Status result;  // the default's: WriteAll's
  };
  virtual std::unique_ptr<PendingWrites> StartWriteAll(std::span<DeviceWrite> writes, bool sync) {
    auto pending = std::make_unique<PendingWrites>();
    pending->result = WriteAll(writes, sync);
    return pending;
  }
  virtual Status FinishWriteAll(std::unique_ptr<PendingWrites> pending) { return pending->result; }
  // StartWriteAll in two steps, for a caller that has some writes before it knows the rest
  // (the committer writes a batch's data while it decides the batch's index updates):
  // StartEarlyWrites starts `writes` at once, unsynced, or returns null when the device does
  // not (the default). ContinueWriteAll then starts the whole call: `writes` holds the early
  // writes first, in the same order (the array may have moved), then the others, and `sync`
  // covers them all. With a null `early` it is StartWriteAll. Either way the result goes to
  // FinishWriteAll, which every early start must reach.
  virtual std::unique_ptr<PendingWrites> StartEarlyWrites(std::span<DeviceWrite> /*writes*/) { return nullptr; }
  virtual std::unique_ptr<PendingWrites> ContinueWriteAll(std::unique_ptr<PendingWrites> /*early*/,
                                                          std::span<DeviceWrite> writes, bool sync) {
    return StartWriteAll(writes, sync);  // the default starts nothing early
  }
  // Fills `out` from `offset`. Errors as Write.
  virtual Status Read(uint64_t offset, std::span<std::byte> out) = 0;
  // Every read of `reads` (at once, in no particular order), as Read; returns the first error.
  // For the runs of a fragmented shard: a device that can queue them together notifies the
  // hardware once per group. The default reads them one by one.
  virtual Status ReadAll(std::span<const DeviceRead> reads);
  // Read for a thread that must not wait: starts the read and returns true at once; `done`
  // (taken) runs once with Read's result, on the device's completion thread (or on the caller's
  // thread, at once, for an error found before the read starts). False, with nothing started
  // and `done` left to the caller, when the device cannot take an asynchronous read now (the
  // default: a device without them). `out` must stay valid until `done` runs.
  virtual bool ReadAsync(uint64_t offset, std::span<std::byte> out, std::function<void(Status)>& done) {
    (void)offset, (void)out, (void)done;
    return false;
  }
  // Makes every completed Write durable (a no-op for devices whose writes already are).
  virtual Status Sync() = 0;
  // The parts of [offset, offset + length) whose first write would also change filesystem
  // metadata (a file's fallocated "unwritten" extents and its holes), in ascending order,
  // 4 KiB aligned and clipped to the range. Background zeroing (engine_zero.cc) writes them
  // ahead of the log so the group commit's flushes do not carry that metadata. Empty for a
  // device without such ranges or that cannot tell (the default; block devices, tmpfs).
  virtual Result<std::vector<DeviceRange>> UnwrittenRanges(uint64_t offset, uint64_t length) {
    (void)offset, (void)length;
    return std::vector<DeviceRange>{};
  }
  // False for a device that keeps no data (the null device): the engine then neither checks
  // the device header against the index nor verifies checksums on reads.
  virtual bool persistent() const { return true; }
};

// Checks the alignment and range rules above; used by implementations.
Status CheckDeviceRange(const Device& device, uint64_t offset, size_t length, const void* buffer);

}  // namespace penstock::engine
