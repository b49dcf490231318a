// record_store.h — records (include/penstock/records.h) over object heads: the Client's
// GetRecord/PutRecord/DeleteRecord/ListRecords/LockRecords.
//
// A record is an inline object head (protocol/object_head.h) named "<group>/<key>" at the id
// RecordObjectId(container, group, key), written, read and tombstoned by StripeIo's head calls,
// so repair keeps its copies as it keeps any head's. Writes take the record's head lease
// (StripeIo::LockStripe) unless the caller holds it (RecordLeases), read the newest copy,
// check the condition and the name (two keys with one hash), and write with a version newer
// than the stored one. Two shortcuts: a blind write is one head write; a create in an
// unprotected container (one copy, deletes leave no tombstone) is one range write over
// "version 0" (kWriteIfVersion), which the target applies only where nothing is stored. A listing asks every target for one page of the group's heads
// (kListSameHi) and merges the pages: each target's page is in key order, so every record up
// to the smallest last key of a full page is complete.
//
// Thread-safe; blocking (not from a transport thread).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/cluster_view.h"
#include "client/stripe_io.h"
#include "penstock/client.h"
#include "penstock/records.h"

namespace penstock {

class RecordStore {
 public:
  // `io` and `view` are borrowed.
  RecordStore(StripeIo* io, ClusterView* view) : io_(io), view_(view) {}

  Result<Record> Get(const ContainerInfo& c, const std::string& group, const std::string& key);
  Result<uint64_t> Put(const ContainerInfo& c, const std::string& group, const std::string& key,
                       std::span<const std::byte> value, RecordCondition cond, const RecordLeases* held);
  Status Delete(const ContainerInfo& c, const std::string& group, const std::string& key,
                std::optional<uint64_t> version, const RecordLeases* held);
  Result<RecordPage> List(const ContainerInfo& c, const std::string& group, const std::string& cursor,
                          uint32_t limit);
  Result<std::unique_ptr<RecordLeases>> Lock(const ContainerInfo& c, std::vector<RecordRef> records);

 private:
  struct Stored;  // a record's newest head copy, decoded
  static WireShardKey Key(const ContainerInfo& c, const std::string& group, const std::string& key);
  // The newest copy (nullopt: none, or a tombstone). Errors: kAlreadyExists when another key
  // of the group is stored at this one's id.
  Result<std::optional<Stored>> ReadStored(const ContainerInfo& c, const std::string& group, const std::string& key);
  // Runs `fn` holding the record's write lease (taking it unless `held` covers it).
  Status WithLease(const ContainerInfo& c, const WireShardKey& key, const RecordLeases* held,
                   const std::function<Status()>& fn);
  // A create in an unprotected container: one range write the target applies only where
  // the key holds nothing (kWriteIfVersion over version 0).
  Result<uint64_t> CreateUnprotected(const ContainerInfo& c, const WireShardKey& k, std::span<const std::byte> bytes,
                                     const std::string& what);
  // An update over version `expected` in an unprotected container: one kRewrite, which the
  // target applies only over that stored version (no lease, no read). kAborted when the record
  // changed since, kNotFound when it is gone.
  Result<uint64_t> RewriteUnprotected(const ContainerInfo& c, const WireShardKey& k, std::span<const std::byte> bytes,
                                      uint64_t expected, const std::string& what);
  // Whether a conditional operation on a record of `c` is one request to its one copy: an
  // unprotected container, with no join unsettled (a record may still be where an earlier
  // placement put it, which only a read finds).
  bool OneRequest(const ContainerInfo& c) const {
    return !c.redundancy.protected_() && !view_->has_earlier_placements();
  }
  // One page of the group from target `t` (an error for a target that cannot be listed).
  Result<std::vector<ListEntry>> ListTarget(const ContainerInfo& c, const TargetRef& t, uint64_t hi,
                                            uint64_t after_lo, uint32_t limit);

  // The page from the merged newest copies (by key), cut at `bound` (the smallest last key of
  // a full target page; none: every target's listing was complete) and at `limit` records.
  static RecordPage PageOf(const std::string& group, std::map<uint64_t, ListEntry>& newest,
                           std::optional<uint64_t> bound, uint32_t limit);

  StripeIo* io_;
  ClusterView* view_;
};

}  // namespace penstock
