// records.h — small records in groups: the key-value layer that namespaces (the file system's
// directories and inodes) are built on.
//
// A record is a value of at most kMaxRecordBytes under (group, key) in a container. The records
// of one group are listed together, page by page, without reading the rest of the container:
// a group is stored under one 64-bit prefix of the object id space, which every target keeps in
// key order, so a page is one index scan per target. Records are placed over every target like
// any object's head (the key's hash picks the targets) and replicated the same way (a protected
// container keeps head_copies() copies; a delete leaves a tombstone so a copy on a target that
// was down cannot bring a record back). A record is stored as an object head holding its value
// (`penstock ls` shows it as an object named "<group>/<key>"); Client::Get and friends do not
// find it by that name: use these calls.
//
// Conditions make records safe to share between clients: a create succeeds for exactly one of
// several clients creating one key at once (the others get kAlreadyExists), and an update or
// delete given the version it read fails with kAborted when another client changed the record
// since. Conditional calls take the record's write lease (shard_protocol.h) from the target of
// its first up copy for their read-and-write, so writers in different clients take turns; a
// create in an unprotected container is instead one write the target applies only when the key
// holds nothing (one round trip), and so does not wait for a lease: a lease holder that writes
// a record it read absent must write it create-only (or over the version it read) to notice.
//
// Keys are hashed to 64 bits within their group; a page lists records in hash order, and the
// cursor of a page is where the next one starts. Two keys of one group with the same hash (about
// one chance in 3·10^7 for a million keys) cannot both be stored: the second is refused with
// kAlreadyExists naming the first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "penstock/export.h"

namespace penstock {

// Largest record value (what a head holds, less room for the group and key).
inline constexpr size_t kMaxRecordBytes = 15 * 1024;

struct Record {
  std::string key;
  std::vector<std::byte> value;
  uint64_t version = 0;  // changes with every write
};

// When PutRecord writes.
struct RecordCondition {
  enum class Kind : uint8_t {
    kAny,      // always (replaces what is there)
    kCreate,   // only when the key holds no record: kAlreadyExists otherwise
    kVersion,  // only over `version` (as read): kAborted when it changed, kNotFound when gone;
               // in an unprotected container without leases held, one request (no lease, no read)
    // Without reading first and without taking the lease: for a key no other writer can be
    // using (a fresh random one, or one whose lease the caller holds and has just read, giving
    // the version it read: the write's is newer). Whatever is stored there is replaced; in an
    // unprotected container, a `version` given must still be the stored one (kAborted when a
    // writer without the lease, a kVersion update, changed it since).
    kBlind,
  };
  Kind kind = Kind::kAny;
  uint64_t version = 0;
  static RecordCondition Any() { return {}; }
  static RecordCondition Create() { return {Kind::kCreate, 0}; }
  static RecordCondition Version(uint64_t v) { return {Kind::kVersion, v}; }
  static RecordCondition Blind(uint64_t after = 0) { return {Kind::kBlind, after}; }
};

// One record, named for LockRecords.
struct RecordRef {
  std::string group;
  std::string key;
};

// Write leases of records held by Client::LockRecords; released when destroyed (or, if the
// holder stalls, after 15 s). Calls given it read and write those records without taking their
// leases again. Destroy it before the Client.
class PENSTOCK_API RecordLeases {
 public:
  virtual ~RecordLeases() = default;
};

struct RecordPage {
  std::vector<Record> records;
  // Pass to the next ListRecords call; empty when this page was the last.
  std::string next;
};

}  // namespace penstock
