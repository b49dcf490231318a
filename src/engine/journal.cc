#include "engine/journal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "common/buffer.h"
#include "common/log.h"
#include "engine/block_map.h"
#include "engine/device.h"
#include "engine/index.h"

namespace penstock::engine {

Result<std::unique_ptr<Journal>> Journal::Open(Device& device, Index& index,
                                               const DeviceHeader& header, uint64_t region_end) {
  if (region_end > header.data_offset || region_end < kJournalBegin + kMaxJournalRecordBytes) {
    return InvalidArgument(fmt::format("journal region [{}, {}) must end by the data offset {} "
                                       "and hold a record of {} bytes", kJournalBegin, region_end,
                                       header.data_offset, kMaxJournalRecordBytes));
  }
  PS_ASSIGN_OR_RETURN(std::optional<JournalPosition> stored, index.GetJournalPosition());
  std::unique_ptr<Journal> journal(
      new Journal(device, index, header, region_end, stored.value_or(JournalPosition{})));
  if (!stored) {
    // A new index, or one from before the journal: whatever lies in the region is not ours
    // to replay (the uuid check would refuse it anyway). Start at the beginning.
    PS_RETURN_IF_ERROR(index.PutJournalPosition(journal->position_));
  } else {
    // Up to data_offset, not region_end: the last run may have had a larger region. A position
    // past region_end makes the committer wrap before its first record.
    PS_RETURN_IF_ERROR(journal->Replay());
  }
  return journal;
}

Status Journal::Wrap() {
  JournalPosition start{.seq = position_.seq, .offset = kJournalBegin};
  PS_RETURN_IF_ERROR(index_.PutJournalPosition(start));
  position_ = start;
  return OkStatus();
}

AlignedBuffer Journal::Encode(const std::vector<IndexUpdate>& updates) const {
  std::string record = EncodeJournalRecord(header_.uuid, next_seq(), updates);
  return AlignedBuffer::CopyOf(std::as_bytes(std::span(record)));
}

Result<bool> Journal::DataIsWhole(const std::vector<IndexUpdate>& updates) {
  for (const IndexUpdate& u : updates) {
    if (!u.record) continue;
    const ShardRecord& r = *u.record;
    for (const BlockRun& run : r.runs) {
      if (run.hole()) continue;
      if (run.segment >= header_.segment_count ||
          run.offset + run.block_count * kBlockSize > header_.segment_bytes) {
        return DataLoss(fmt::format("index journal record {} puts shard {} outside the device "
                                    "(segment {}, offset {}); the journal is corrupt, rebuild "
                                    "this target", position_.seq + 1, u.key.ToString(),
                                    run.segment, run.offset));
      }
      // Only the blocks this batch wrote: the others were durable before it.
      const uint64_t begin = std::max(run.first_block, u.written_begin);
      const uint64_t end = std::min(run.end_block(), u.written_end);
      if (begin >= end) continue;
      AlignedBuffer data((end - begin) * kBlockSize);
      std::span<std::byte> blocks(data.data(), data.size());
      const uint64_t at = header_.data_offset + run.segment * header_.segment_bytes + run.offset +
                          (begin - run.first_block) * kBlockSize;
      PS_RETURN_IF_ERROR(device_.Read(at, blocks).WithContext("replay the index journal"));
      const std::vector<uint32_t> crcs = BlockChecksums(blocks);
      if (!std::equal(crcs.begin(), crcs.end(), r.block_crcs.begin() + static_cast<std::ptrdiff_t>(begin))) {
        return false;
      }
    }
  }
  return true;
}

Status Journal::CompleteRangeWrites(std::vector<IndexUpdate>& updates) {
  std::map<ShardKey, SharedRecord> earlier;  // this record's updates so far
  for (IndexUpdate& u : updates) {
    if (u.range_write) {
      SharedRecord before;
      if (auto it = earlier.find(u.key); it != earlier.end()) {
        before = it->second;
      } else {
        PS_ASSIGN_OR_RETURN(before, index_.Get(u.key));
      }
      if (!before) {
        return DataLoss(fmt::format("index journal record {} patches shard {}, which the index does "
                                    "not hold; the index and journal disagree, rebuild this target",
                                    position_.seq + 1, u.key.ToString()));
      }
      const BlockRun run = u.record->runs[0];  // the written blocks (DecodeJournalRecord checked)
      u.record = ApplyRangeWrite(before.get(), run.first_block, run.segment, run.offset, u.record->block_crcs,
                                 u.record->length, u.record->version);
    }
    earlier[u.key] = u.record;
  }
  return OkStatus();
}

Status Journal::Replay() {
  AlignedBuffer buffer(kMaxJournalRecordBytes);
  const uint64_t from = position_.seq;
  for (;;) {
    const uint64_t at = position_.offset;
    if (at + kBlockSize > header_.data_offset) break;
    std::span<std::byte> first(buffer.data(), kBlockSize);
    PS_RETURN_IF_ERROR(device_.Read(at, first).WithContext("replay the index journal"));
    std::optional<JournalRecordHeader> header = ParseJournalHeader(first, header_.uuid, position_.seq + 1);
    if (!header) break;
    const uint64_t bytes = (sizeof(*header) + header->payload_bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
    if (at + bytes > header_.data_offset) break;
    if (bytes > kBlockSize) {
      PS_RETURN_IF_ERROR(device_.Read(at + kBlockSize, {buffer.data() + kBlockSize, bytes - kBlockSize})
                             .WithContext("replay the index journal"));
    }
    std::optional<std::vector<IndexUpdate>> updates = DecodeJournalRecord({buffer.data(), bytes});
    if (!updates) {
      PS_LOG_INFO("index journal: record {} at offset {} is torn; it ends the journal",
                  position_.seq + 1, at);
      break;
    }
    PS_RETURN_IF_ERROR(CompleteRangeWrites(*updates));
    PS_ASSIGN_OR_RETURN(bool whole, DataIsWhole(*updates));
    if (!whole) {
      PS_LOG_INFO("index journal: the data of record {} did not reach the device; it ends the "
                  "journal", position_.seq + 1);
      break;
    }
    JournalPosition next{.seq = position_.seq + 1, .offset = at + bytes};
    PS_RETURN_IF_ERROR(index_.Apply(*updates, next, /*sync=*/false));
    position_ = next;
    ++replayed_;
  }
  if (replayed_ > 0) {
    PS_LOG_INFO("index journal: replayed records {} to {} into the index", from + 1, position_.seq);
  }
  // The committer writes up to kMaxRecordsInFlight records at once, so records after the one
  // that ended the journal may be whole on the device (written, never acknowledged). Number
  // the next record above all of them, so that none can ever pass for it or for one after it.
  // This synced index write also makes what was replayed (or recovered by RocksDB, which may
  // still sit in the page cache) durable.
  position_.seq += kMaxRecordsInFlight;
  PS_RETURN_IF_ERROR(index_.PutJournalPosition(position_));
  // Whatever follows is not a whole record; make sure it never becomes one by chance (the next
  // record, reusing its sequence number, may be shorter).
  if (position_.offset + kBlockSize <= header_.data_offset) {
    AlignedBuffer zeros(kBlockSize);
    std::memset(zeros.data(), 0, kBlockSize);
    PS_RETURN_IF_ERROR(device_.Write(position_.offset, {zeros.data(), kBlockSize})
                           .WithContext("clear the end of the index journal"));
  }
  return OkStatus();
}

}  // namespace penstock::engine
