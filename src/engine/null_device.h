// null_device.h — a Device with no media, for benchmarks of the layers above the engine.
//
// Writes are range-checked and dropped; reads return zeros. It reports persistent() == false,
// so the engine skips checksum verification on reads (the zeros would never match) and does not
// insist that the device header matches the index (nothing survives a restart: an index opened
// over a null device again still lists its shards, and they read back as zeros).
// Selected with EngineOptions::device_kind = "null".
//
// Thread safety: stateless apart from constants; every method may be called from any thread.
#pragma once

#include <cstdint>
#include <cstring>
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
    return CheckDeviceRange(*this, offset, data.size(), data.data());
  }
  Status Read(uint64_t offset, std::span<std::byte> out) override {
    PS_RETURN_IF_ERROR(CheckDeviceRange(*this, offset, out.size(), out.data()));
    if (!out.empty()) std::memset(out.data(), 0, out.size());
    return OkStatus();
  }
  Status Sync() override { return OkStatus(); }
  bool persistent() const override { return false; }

 private:
  const uint64_t size_;
  const std::string name_;
};

}  // namespace penstock::engine
