// engine_ops.cc — the Engine's data path: Write, Read, Delete, Stat, List.
//
// Write: copy into an aligned, zero-padded buffer; checksum each 4 KiB block; reserve space in
// the open segment; write it durably; then, under the key's lock, swap the index record (synced)
// and move the space accounting (new extent live, old extent dead). A failure before the index
// commit leaves only garbage behind. Read: under the key's lock, look the record up and pin its
// segment; read outside the lock; verify every block.
#include <fmt/format.h>

#include <mutex>
#include <shared_mutex>

#include "engine/device.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::Extent;
using engine::kBlockSize;
using engine::kNoSegment;
using engine::ShardRecord;

namespace {

Extent ExtentOf(const ShardRecord& r) { return {r.segment, r.offset, r.allocated_bytes()}; }

Status NotFoundStatus(const ShardKey& key) {
  return NotFound(fmt::format("shard {} not found on this target", key.ToString()));
}

// Unpins a segment when the read is done, however it ends.
class SegmentPin {
 public:
  SegmentPin(engine::SegmentTable& table, uint32_t segment) : table_(table), segment_(segment) {
    table_.Pin(segment_);
  }
  ~SegmentPin() { table_.Unpin(segment_); }
  SegmentPin(const SegmentPin&) = delete;
  SegmentPin& operator=(const SegmentPin&) = delete;

 private:
  engine::SegmentTable& table_;
  uint32_t segment_;
};

}  // namespace

Status Engine::Write(const ShardKey& key, std::span<const std::byte> data, uint64_t version) {
  if (data.size() > segment_bytes_) {
    return InvalidArgument(fmt::format("shard {} is {} bytes, larger than the segment size {}; "
                                       "split it into smaller shards", key.ToString(),
                                       data.size(), segment_bytes_));
  }
  ShardRecord record;
  record.length = data.size();
  record.version = version;
  Extent extent;
  if (!data.empty()) {
    AlignedBuffer padded = AlignedBuffer::CopyOf(data);
    padded.ZeroPadding();
    std::span<const std::byte> blocks(padded.data(), padded.capacity());
    record.block_crcs = engine::BlockChecksums(blocks);
    PS_ASSIGN_OR_RETURN(extent, table_->Allocate(blocks.size()));
    Status written = device_->Write(DeviceOffset(extent.segment, extent.offset), blocks);
    if (!written.ok()) {
      table_->Abandon(extent);
      return written.WithContext(fmt::format("write shard {}", key.ToString()));
    }
    record.segment = extent.segment;
    record.offset = extent.offset;
  }
  {
    std::unique_lock lock(KeyLock(key));
    auto old = index_->Get(key);
    Status committed = old.ok() ? index_->Put(key, record) : old.status();
    if (!committed.ok()) {
      table_->Abandon(extent);
      return committed;
    }
    table_->Commit(extent);
    if (old->has_value()) {
      table_->Release(ExtentOf(**old));
    } else {
      shards_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(data.size(), std::memory_order_relaxed);
  return OkStatus();
}

Result<AlignedBuffer> Engine::Read(const ShardKey& key) {
  std::optional<ShardRecord> record;
  std::optional<SegmentPin> pin;
  {
    std::shared_lock lock(KeyLock(key));
    PS_ASSIGN_OR_RETURN(record, index_->Get(key));
    if (!record) return NotFoundStatus(key);
    if (record->segment != kNoSegment) pin.emplace(*table_, record->segment);
  }
  AlignedBuffer out(record->length);
  if (record->length > 0) {
    std::span<std::byte> blocks(out.data(), out.capacity());
    PS_RETURN_IF_ERROR(device_->Read(DeviceOffset(record->segment, record->offset), blocks)
                           .WithContext(fmt::format("read shard {}", key.ToString())));
    pin.reset();
    PS_RETURN_IF_ERROR(VerifyBlocks(key, *record, blocks));
  }
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(record->length, std::memory_order_relaxed);
  return out;
}

Status Engine::VerifyBlocks(const ShardKey& key, const ShardRecord& record,
                            std::span<const std::byte> padded) {
  std::vector<uint32_t> actual = engine::BlockChecksums(padded);
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == record.block_crcs[i]) continue;
    checksum_errors_.fetch_add(1, std::memory_order_relaxed);
    uint64_t shard_offset = i * kBlockSize;
    return DataLoss(fmt::format(
        "shard {}: the 4 KiB block at shard offset {} (device '{}' offset {}) fails its crc32c "
        "check (stored {:08x}, read {:08x}); this copy is lost, rebuild it from another replica "
        "or from parity", key.ToString(), shard_offset, device_->name(),
        DeviceOffset(record.segment, record.offset) + shard_offset, record.block_crcs[i],
        actual[i]));
  }
  return OkStatus();
}

Status Engine::Delete(const ShardKey& key) {
  {
    std::unique_lock lock(KeyLock(key));
    PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> old, index_->Get(key));
    if (!old) return NotFoundStatus(key);
    PS_RETURN_IF_ERROR(index_->Delete(key));
    table_->Release(ExtentOf(*old));
    shards_.fetch_sub(1, std::memory_order_relaxed);
  }
  deletes_.fetch_add(1, std::memory_order_relaxed);
  return OkStatus();
}

Result<ShardInfo> Engine::Stat(const ShardKey& key) {
  PS_ASSIGN_OR_RETURN(std::optional<ShardRecord> record, index_->Get(key));
  if (!record) return NotFoundStatus(key);
  return ShardInfo{record->length, record->version};
}

Result<std::vector<std::pair<ShardKey, ShardInfo>>> Engine::List(
    uint64_t container, std::optional<ObjectId> object, std::optional<ShardKey> start_after,
    size_t limit) {
  std::vector<std::pair<ShardKey, ShardInfo>> out;
  if (limit == 0) return out;
  std::string prefix = object ? engine::ObjectPrefix(container, *object)
                              : engine::ContainerPrefix(container);
  PS_RETURN_IF_ERROR(index_->Scan(prefix, start_after,
                                  [&](const ShardKey& key, const ShardRecord& record) {
                                    out.emplace_back(key, ShardInfo{record.length, record.version});
                                    return out.size() < limit;
                                  }));
  return out;
}

}  // namespace penstock
