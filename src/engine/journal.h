// journal.h — the index journal: each group-commit batch's index updates, written to the data
// device next to the data, so that one device flush makes a batch durable (data and index
// updates together) and the index batch itself is written unsynced.
//
// Layout (format.h): records in the device's header region [kJournalBegin, region_end), one
// after another, each named by a sequence number one above the last. Every index batch carries
// the JournalPosition of its record (the record's seq, where the next record starts), so the
// index always knows which records it holds. When a record does not fit before region_end the
// committer first wraps: it syncs the index with its position reset to kJournalBegin, so a
// record is overwritten only once the index holds it durably.
//
// A range write onto an existing record is journaled as the written blocks only (their run and
// checksums, kJournalRange); replay rebuilds its record from the key's record before it.
//
// Several records may be in flight at once (the committer overlaps batches), so one can reach
// the device while the one before it does not; it is never acknowledged (acknowledgements go
// in record order), and must never be replayed. So replay ends at the first record missing,
// and the records after it are numbered above any that might lie beyond (Open skips
// kMaxRecordsInFlight sequence numbers; the committer, after a failed batch with later ones in
// flight, wraps).
//
// Replay (Open): from the index's position, read records seq+1, seq+2, ... while each is whole
// (magic, device uuid, expected seq, crc32c) and every 4 KiB block of data its puts wrote (for a
// range write only the range's blocks: the rest were durable before) matches the put's checksum
// (data and record were flushed together: a record whose data did not make it was never
// acknowledged, and ends the journal like a torn one); apply each to the index, sync
// the index once, then zero the block after the last record, so that a torn record there can
// never pass for a whole one later. Replaying is safe only because space released by a record
// is not reused before the index is durable through it (SegmentTable's journal gating): the
// data every replayed record names is still in place.
//
// Not thread-safe: after Open, owned by the committer thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/buffer.h"
#include "engine/format.h"
#include "penstock/status.h"

namespace penstock::engine {

class Device;
class Index;

class Journal {
 public:
  // The most records written and not yet known durable at once (the committer's batches in
  // flight): Open numbers the next record this much above the last it replayed.
  static constexpr uint64_t kMaxRecordsInFlight = 8;

  // Replays the records `index` lacks (see above) and returns the journal, positioned after
  // them. `region_end` is the header's data_offset, or less (a small journal wraps often); it
  // bounds new records only: replay reads up to data_offset, as an earlier run may have used
  // more.
  // Errors: kDataLoss when a whole record names space outside the device; device and index
  // errors. `device` and `index` are borrowed and must outlive the journal.
  static Result<std::unique_ptr<Journal>> Open(Device& device, Index& index,
                                               const DeviceHeader& header, uint64_t region_end);

  // The last record written and applied, and where the next one goes.
  const JournalPosition& position() const { return position_; }
  uint64_t next_seq() const { return position_.seq + 1; }
  uint64_t records_replayed() const { return replayed_; }
  // True when a record of `bytes` (JournalRecordBytes) fits before the region's end.
  bool Fits(uint64_t bytes) const { return position_.offset + bytes <= region_end_; }
  // Sets the index's position back to the region's start, synced; records before then are
  // no longer needed.
  Status Wrap();
  // The record of `updates`, numbered next_seq(), zero-padded to whole blocks; to be written at
  // position().offset (the caller writes it, with the batch's data, and flushes).
  AlignedBuffer Encode(const std::vector<IndexUpdate>& updates) const;
  // The position the index batch must carry once a record of `bytes` is durable; the journal
  // moves there on Advance (after that batch is applied). A record written but never advanced
  // past is overwritten by the next one.
  JournalPosition After(uint64_t bytes) const {
    return {.seq = position_.seq + 1, .offset = position_.offset + bytes};
  }
  void Advance(const JournalPosition& position) { position_ = position; }

 private:
  Journal(Device& device, Index& index, const DeviceHeader& header, uint64_t region_end,
          JournalPosition position)
      : device_(device), index_(index), header_(header), region_end_(region_end),
        position_(position) {}
  // Replays from position_; leaves position_ after the last whole record.
  Status Replay();
  // Makes the range-write entries of one record (IndexUpdate::range_write: only the written
  // blocks) whole records, from the key's record before each: the record's earlier updates,
  // else the index. kDataLoss when the key has none.
  Status CompleteRangeWrites(std::vector<IndexUpdate>& updates);
  // True when every block of data the puts of `updates` wrote matches its checksum.
  Result<bool> DataIsWhole(const std::vector<IndexUpdate>& updates);

  Device& device_;
  Index& index_;
  const DeviceHeader header_;
  const uint64_t region_end_;
  JournalPosition position_;
  uint64_t replayed_ = 0;
};

}  // namespace penstock::engine
