// stripe_pipeline.h — moves an object's stripes between a source/sink and the targets, a
// bounded window of stripes in flight at once, each stripe to the target placement picks.
//
// The calling thread drives the pipeline: it reads the source, issues asynchronous shard
// requests and consumes their completions (which the transport threads only queue), so the
// source and sink are only ever touched by the caller. Memory in use is window * stripe unit
// (plus, for protected containers, the parity and stripes still held for late shard requests
// after a degraded acknowledgement), whatever the object size. Redundancy is StripeIo's.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "penstock/client.h"
#include "protocol/object_head.h"

namespace penstock {

// Where a put reads from / a get writes to, by offset. Implementations need not be thread-safe.
class ObjectSource {
 public:
  virtual ~ObjectSource() = default;
  virtual Status ReadAt(uint64_t offset, std::span<std::byte> out) = 0;
};

class ObjectSink {
 public:
  virtual ~ObjectSink() = default;
  virtual Status WriteAt(uint64_t offset, std::span<const std::byte> data) = 0;
};

struct StripeLayout {
  uint64_t container = 0;
  uint64_t data_hi = 0;  // object id the stripes are stored under
  uint64_t data_lo = 0;
  uint64_t size = 0;
  uint64_t stripe_unit = 0;
  Redundancy red;  // the container's
  bool dense = false;  // ObjectHead::dense: a stripe found nowhere is lost, not a hole

  StripeGeometry geometry() const { return StripeGeometry::For(red, stripe_unit); }
  uint64_t stripe_count() const { return stripe_unit == 0 ? 0 : (size + stripe_unit - 1) / stripe_unit; }
  uint64_t stripe_length(uint64_t i) const {
    uint64_t off = i * stripe_unit;
    return size - off < stripe_unit ? size - off : stripe_unit;
  }
  WireShardKey key(uint64_t stripe) const { return {container, data_hi, data_lo, stripe, 0, 0}; }
};

// Writes every stripe of `layout` from `source`. `what` names the object in errors. Sets
// `*last_landed` (when given) to when the last stripe landed (the start when there are none).
// kAborted when stripes landed more than io.commit_window() apart (object_head.h: the first
// ones may have been collected as orphans meanwhile).
Status WriteStripes(StripeIo& io, const StripeLayout& layout, ObjectSource& source,
                    unsigned window, uint64_t version, const ProgressFn& progress,
                    const std::string& what, std::chrono::steady_clock::time_point* last_landed = nullptr);

// Reads every stripe of `layout` into `sink`. A stripe that is missing or has the wrong
// length is kDataLoss naming the object, the stripe and the target.
Status ReadStripes(StripeIo& io, const StripeLayout& layout, ObjectSink& sink,
                   unsigned window, const ProgressFn& progress, const std::string& what);

// Best-effort removal of stripes [0, count) (cleanup after a failed or replaced put).
void DeleteStripes(StripeIo& io, const StripeLayout& layout, uint64_t count);

// After a put's head write failed with `head_write` and the head read back is `head_now`:
// whether the new version's stripes (data id `data_hi`/`data_lo`) may be deleted. Only when a
// target refused the write outright (no space, no permission, a bad request, the object or
// container gone) and the head now names other data or none: a head write that failed
// otherwise (a timeout, a lost reply, a degraded write mgmt could not record) may have landed,
// or land late, and readers would follow it to those stripes.
bool NewStripesUnreferenced(const Status& head_write, const Result<ObjectHead>& head_now, uint64_t data_hi,
                            uint64_t data_lo);

}  // namespace penstock
