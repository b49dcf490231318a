// null_device.h — a Device with no media, for benchmarks of the layers above the engine.
//
// Writes are range-checked and dropped, except that writes of a single 4 KiB block are kept in
// memory (object heads and other small records, each written alone by the committer: a target
// on a null device still serves objects, their data reading back as zeros), and so are the
// non-zero blocks of WriteUnsynced (GC's copies, which carry only what GC read from this
// device: kept blocks, or zeros; background zeroing writes zeros). A dropped write over kept
// blocks drops them. Memory: 4 KiB per distinct offset kept, at most the device's size
// (benchmarks of 4 KiB writes keep what they write). Reads return kept blocks, zeros elsewhere.
// It reports persistent() == false, so the engine skips checksum verification on reads (the
// zeros would never match) and does not insist that the device header matches the index
// (nothing survives a restart: an index opened over a null device again still lists its
// shards, and they read back as zeros).
// Selected with EngineOptions::device_kind = "null" (`penstock target --device-kind null`).
//
// Thread safety: every method may be called from any thread (one mutex guards the kept blocks).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "engine/device.h"

namespace penstock::engine {

class NullDevice final : public Device {
 public:
  // `size` is rounded down to 4 KiB.
  explicit NullDevice(uint64_t size, std::string name = "null")
      : size_(size / kDeviceBlockSize * kDeviceBlockSize), name_(std::move(name)) {}

  uint64_t size() const override { return size_; }
  const std::string& name() const override { return name_; }
  Status Write(uint64_t offset, std::span<const std::byte> data) override {
    PS_RETURN_IF_ERROR(CheckDeviceRange(*this, offset, data.size(), data.data()));
    Store(offset, data, /*nonzero_blocks=*/false);
    return OkStatus();
  }
  Status WriteUnsynced(uint64_t offset, std::span<const std::byte> data) override {
    PS_RETURN_IF_ERROR(CheckDeviceRange(*this, offset, data.size(), data.data()));
    Store(offset, data, /*nonzero_blocks=*/true);
    return OkStatus();
  }
  Status WriteAll(std::span<DeviceWrite> writes, bool /*sync*/) override {
    Status first;
    for (DeviceWrite& w : writes) {
      w.status = Write(w.offset, w.data);
      if (first.ok()) first = w.status;
    }
    return first;
  }
  Status Read(uint64_t offset, std::span<std::byte> out) override {
    PS_RETURN_IF_ERROR(CheckDeviceRange(*this, offset, out.size(), out.data()));
    if (out.empty()) return OkStatus();
    std::memset(out.data(), 0, out.size());
    std::lock_guard lock(mu_);
    for (auto it = kept_.lower_bound(offset); it != kept_.end() && it->first < offset + out.size(); ++it) {
      std::memcpy(out.data() + (it->first - offset), it->second.data(),
                  std::min<uint64_t>(kDeviceBlockSize, offset + out.size() - it->first));
    }
    return OkStatus();
  }
  Status Sync() override { return OkStatus(); }
  bool persistent() const override { return false; }

 private:
  // Drops what was kept under [offset, offset + size), then keeps `data` when it is one block,
  // or (`nonzero_blocks`) each of its blocks that is not all zeros.
  void Store(uint64_t offset, std::span<const std::byte> data, bool nonzero_blocks) {
    std::lock_guard lock(mu_);
    kept_.erase(kept_.lower_bound(offset), kept_.lower_bound(offset + data.size()));
    for (uint64_t at = 0; at + kDeviceBlockSize <= data.size(); at += kDeviceBlockSize) {
      std::span<const std::byte> block = data.subspan(at, kDeviceBlockSize);
      const bool keep = data.size() == kDeviceBlockSize ||
                        (nonzero_blocks && std::any_of(block.begin(), block.end(), [](std::byte b) { return b != std::byte{0}; }));
      if (keep) std::memcpy(kept_[offset + at].data(), block.data(), kDeviceBlockSize);
    }
  }

  const uint64_t size_;
  const std::string name_;
  std::mutex mu_;
  std::map<uint64_t, std::array<std::byte, kDeviceBlockSize>> kept_;  // guarded by mu_; by offset
};

}  // namespace penstock::engine
