// engine_ops.cc — the Engine's data path: Write, Read, Delete, Stat, List.
//
// Write: bytes in whole, aligned 4 KiB blocks (a target's received payload, AlignedBuffer) go to
// the device as they are; others are copied into an aligned, zero-padded buffer first. Checksum
// each 4 KiB block; reserve space in the open segment (running GC first if there is none); then
// hand the data and its index record to the committer (engine_commit.cc), which writes the
// batch's data and journal record at once, flushes, commits and moves the space accounting. A
// failure before the index commit leaves only garbage behind. Delete goes through the committer
// too. Read: under the key's lock, look the record up and pin its segment; read
// outside the lock; verify every block.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <mutex>
#include <shared_mutex>

#include "engine/commit_request.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/format.h"
#include "engine/index.h"
#include "engine/segment_table.h"

namespace penstock {

using engine::kBlockSize;
using engine::kNoSegment;
using engine::ShardRecord;

namespace {

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
  engine::CommitRequest req;
  req.kind = engine::CommitRequest::Kind::kWrite;
  req.key = key;
  req.record.length = data.size();
  req.record.version = version;
  AlignedBuffer padded;  // lives until the committer has written it
  if (!data.empty()) {
    std::span<const std::byte> blocks = data;
    if (reinterpret_cast<uintptr_t>(data.data()) % kBlockSize != 0 || data.size() % kBlockSize != 0) {
      padded = AlignedBuffer::CopyOf(data);
      padded.ZeroPadding();
      blocks = std::span<const std::byte>(padded.data(), padded.capacity());
    }
    req.record.block_crcs = engine::BlockChecksums(blocks);
    PS_ASSIGN_OR_RETURN(req.extent, AllocateForWrite(blocks.size()));
    req.data = blocks;  // the committer writes it with the rest of the batch
    req.record.segment = req.extent.segment;
    req.record.offset = req.extent.offset;
  }
  engine::CommitRequest* one = &req;
  PS_RETURN_IF_ERROR(Commit({&one, 1}));
  writes_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(data.size(), std::memory_order_relaxed);
  return OkStatus();
}

Status Engine::WriteRange(const ShardKey& key, uint64_t offset, std::span<const std::byte> data,
                          uint64_t version) {
  if (offset > segment_bytes_ || data.size() > segment_bytes_ - offset) {
    return InvalidArgument(fmt::format("range write of {} bytes at {} of shard {} ends past the segment size {}",
                                       data.size(), offset, key.ToString(), segment_bytes_));
  }
  auto old = ReadShard(key);
  if (!old.ok() && old.status().code() != StatusCode::kNotFound) return old.status();
  const uint64_t old_len = old.ok() ? old->size() : 0;
  AlignedBuffer merged(std::max(old_len, offset + data.size()));
  std::memset(merged.data(), 0, merged.size());
  if (old_len) std::memcpy(merged.data(), old->data(), old_len);
  if (!data.empty()) std::memcpy(merged.data() + offset, data.data(), data.size());
  return Write(key, merged.span(), version);
}

Result<AlignedBuffer> Engine::Read(const ShardKey& key) {
  PS_ASSIGN_OR_RETURN(AlignedBuffer out, ReadShard(key));
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

Result<AlignedBuffer> Engine::ReadRange(const ShardKey& key, uint64_t offset, uint64_t length,
                                        ShardInfo* info) {
  PS_ASSIGN_OR_RETURN(AlignedBuffer out, ReadShard(key, offset, length, info));
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

Result<AlignedBuffer> Engine::ReadShard(const ShardKey& key, uint64_t offset, uint64_t length,
                                        ShardInfo* info) {
  std::optional<ShardRecord> record;
  std::optional<SegmentPin> pin;
  {
    std::shared_lock lock(KeyLock(key));
    PS_ASSIGN_OR_RETURN(record, index_->Get(key));
    if (!record) return NotFoundStatus(key);
    if (record->segment != kNoSegment) pin.emplace(*table_, record->segment);
  }
  if (info) *info = ShardInfo{record->length, record->version};
  const uint64_t begin = std::min(offset, record->length);
  const uint64_t end = length >= record->length - begin ? record->length : begin + length;
  if (begin == end) return AlignedBuffer(0);
  // Whole 4 KiB blocks covering [begin, end): the unit of I/O alignment and of checksums.
  const uint64_t first_block = begin / kBlockSize;
  const uint64_t block_bytes = (end + kBlockSize - 1) / kBlockSize * kBlockSize - first_block * kBlockSize;
  AlignedBuffer out(block_bytes);
  std::span<std::byte> blocks(out.data(), block_bytes);
  PS_RETURN_IF_ERROR(
      device_->Read(DeviceOffset(record->segment, record->offset + first_block * kBlockSize), blocks)
          .WithContext(fmt::format("read shard {}", key.ToString())));
  pin.reset();
  if (device_->persistent()) PS_RETURN_IF_ERROR(VerifyBlocks(key, *record, blocks, first_block));
  const uint64_t skip = begin - first_block * kBlockSize;
  if (skip) std::memmove(out.data(), out.data() + skip, end - begin);
  out.resize_within_capacity(end - begin);
  return out;
}

Status Engine::VerifyBlocks(const ShardKey& key, const ShardRecord& record,
                            std::span<const std::byte> padded, size_t first_block) {
  std::vector<uint32_t> actual = engine::BlockChecksums(padded);
  for (size_t j = 0; j < actual.size(); ++j) {
    const size_t i = first_block + j;
    if (i >= record.block_crcs.size()) {
      return Internal(fmt::format("shard {}: block {} is past its {} checksums", key.ToString(), i,
                                  record.block_crcs.size()));
    }
    if (actual[j] == record.block_crcs[i]) continue;
    checksum_errors_.fetch_add(1, std::memory_order_relaxed);
    MarkCorrupt(key);
    uint64_t shard_offset = i * kBlockSize;
    return DataLoss(fmt::format(
        "shard {}: the 4 KiB block at shard offset {} (device '{}' offset {}) fails its crc32c "
        "check (stored {:08x}, read {:08x}); this copy is lost, rebuild it from another replica "
        "or from parity", key.ToString(), shard_offset, device_->name(),
        DeviceOffset(record.segment, record.offset) + shard_offset, record.block_crcs[i],
        actual[j]));
  }
  return OkStatus();
}

Status Engine::Delete(const ShardKey& key) {
  engine::CommitRequest req;
  req.kind = engine::CommitRequest::Kind::kDelete;
  req.key = key;
  engine::CommitRequest* one = &req;
  PS_RETURN_IF_ERROR(Commit({&one, 1}));
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
