// client.h — the Penstock client library: named objects in containers.
//
// A Client connects to mgmt once, caches the cluster map and computes placement itself: data
// moves directly between the application and the targets over the UCX data plane, with no
// metadata server on the data path. Objects are split into stripe units (the container's,
// 1 MiB by default) and the stripes move in parallel, a bounded window at a time, so objects
// larger than memory stream through.
//
// Thread safety: a Client may be used from many threads at once.
// Fork: a Client belongs to the process that connected it. In a child made by fork() every
// call on an inherited Client fails at once with kFailedPrecondition (its threads and
// connections stayed in the parent; map_epoch() is 0 there), and destroying it there leaks it
// instead of joining threads that do not exist; Objects it opened must not be used there.
// Connecting a new Client in the child of a process that had connected one is not supported
// yet (gRPC's and UCX's process-wide state is inherited mid-flight, and the first call would
// hang): Connect fails at once with kFailedPrecondition; start such workers with spawn or
// forkserver.
// Errors (see status.h for which are retryable):
//   kNotFound         unknown container or object
//   kAlreadyExists    container name taken
//   kInvalidArgument  bad name or option
//   kUnavailable      mgmt or a target cannot be reached (already retried for `timeout`)
//   kDataLoss         a shard failed its checksum or is missing and the container's redundancy
//                     cannot make up for it (no wrong bytes are returned)
//   kFailedPrecondition  e.g. removing a container that still holds objects without force
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "penstock/export.h"
#include "penstock/object_io.h"
#include "penstock/records.h"
#include "penstock/redundancy.h"
#include "penstock/status.h"

namespace penstock {

struct ClientOptions {
  std::string mgmt_address = "127.0.0.1:7000";
  // Per-request timeout on the data plane and the time spent retrying an unreachable target.
  std::chrono::milliseconds timeout{30000};
  // Stripes in flight per put/get.
  unsigned max_inflight_stripes = 16;
  // Protected containers: how long an operation that could complete without its last shards
  // waits for them before it completes degraded (a slow or stopped target). The missing shards
  // are repaired later by mgmt.
  std::chrono::milliseconds straggler_timeout{2000};
  // Data-plane workers (UCX workers, each with a thread) that this client spreads its requests
  // over, 1..64; worker i uses net_devices[i % size] as UCX_NET_DEVICES (several devices for
  // one worker: comma-separated, as UCX takes them). Empty: UCX's choice for every worker.
  unsigned data_workers = 1;
  std::vector<std::string> net_devices;
  // Targets on this host (same user) write read data straight into the caller's buffers and
  // copy large writes straight out of them, instead of moving the bytes over the transport:
  // the client copies nothing (the way RDMA would).
  bool local_direct = true;
  // The tenant's API key (sent to mgmt; used to get capability tokens for the targets).
  // Empty: none, which only a cluster without --auth accepts.
  std::string api_key;
  // TLS to mgmt (PEM files): the CA that signed mgmt's certificate, and this client's
  // certificate and key (required by a mgmt run with --tls-ca). All empty: plaintext.
  // Unusable files fail Connect with kInvalidArgument naming the file.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};

struct ContainerProps {
  // none, rep:N or ec:K+M (ParseRedundancy parses the text form). Unset: the strongest standard
  // scheme the cluster holds now (rep:3 with 3 or more targets, rep:2 with 2, none with 1);
  // ContainerInfo says which.
  std::optional<Redundancy> redundancy;
  // The write quorum: shards durable before a write is acknowledged, K..K+M (0: the scheme's
  // default, Redundancy::DefaultQuorum). Overrides redundancy->min_durable when set.
  uint32_t min_durable = 0;
  uint64_t stripe_unit = 1 << 20;
};

struct ContainerInfo {
  uint64_t id = 0;
  std::string name;
  Redundancy redundancy;  // min_durable always set
  uint64_t stripe_unit = 0;
  int64_t created_ms = 0;
};

struct ObjectInfo {
  std::string name;
  uint64_t size = 0;
  uint64_t stripe_unit = 0;
  int64_t mtime_ms = 0;
  // Empty, or why the object's data is gone (a target declared lost with data that the
  // container's redundancy could not make up for): reads of it answer kDataLoss.
  std::string lost;
};

struct ListOptions {
  std::string prefix;  // only names starting with it
};

// Called with (bytes done, bytes total) as a transfer progresses, from the calling thread.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

class PENSTOCK_API Client {
 public:
  // Connects to mgmt and loads the cluster map. Errors: kUnavailable naming the address;
  // kFailedPrecondition in a forked child of a process that had connected a Client (see Fork).
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();

  Result<ContainerInfo> CreateContainer(const std::string& name, const ContainerProps& props = {});
  Result<ContainerInfo> GetContainer(const std::string& name);
  Result<std::vector<ContainerInfo>> ListContainers();
  // Without `force`, refuses (kFailedPrecondition) while the container holds objects;
  // with it, deletes the objects first.
  Status DeleteContainer(const std::string& name, bool force = false);

  // Stores the file at `local_path` as object `name`, replacing any object of that name
  // atomically: readers see the old object or the new one, and a failed put leaves the old
  // one (or none) in place. An object of at most 16 KiB is stored in its head record: one
  // shard write per head copy, and one head read to get it back.
  Status PutFile(const std::string& container, const std::string& name,
                 const std::string& local_path, const ProgressFn& progress = {});
  Status Put(const std::string& container, const std::string& name,
             std::span<const std::byte> data);

  // Writes object `name` to `local_path` (via a temporary file renamed at the end, so a
  // failed get leaves no partial file). Like cp, it does not fsync the local file.
  Status GetFile(const std::string& container, const std::string& name,
                 const std::string& local_path, const ProgressFn& progress = {});
  Result<std::vector<std::byte>> Get(const std::string& container, const std::string& name);

  Result<ObjectInfo> Stat(const std::string& container, const std::string& name);
  // Objects of a container sorted by name. kUnavailable if a target cannot be asked (the
  // listing would be incomplete).
  Result<std::vector<ObjectInfo>> List(const std::string& container, const ListOptions& options = {});
  Status Delete(const std::string& container, const std::string& name);

  // Opens object `name` for ranged, asynchronous I/O (see object_io.h). kNotFound unless it
  // exists or options.create is set. The Object must not outlive this Client.
  Result<std::shared_ptr<Object>> Open(const std::string& container, const std::string& name,
                                       const OpenOptions& options = {});

  // Records (records.h): small values in groups, listed a page at a time. Errors besides the
  // conditions' (kAlreadyExists, kAborted, kNotFound): kInvalidArgument (empty group or key,
  // group + key over 1000 bytes, a value over kMaxRecordBytes), kUnavailable.
  Result<Record> GetRecord(const std::string& container, const std::string& group, const std::string& key);
  // Returns the version written. `held`: leases from LockRecords covering this record.
  Result<uint64_t> PutRecord(const std::string& container, const std::string& group, const std::string& key,
                             std::span<const std::byte> value, RecordCondition condition = {},
                             const RecordLeases* held = nullptr);
  // With `version`: only when the record is still at it (kAborted otherwise). kNotFound when
  // there is no record.
  Status DeleteRecord(const std::string& container, const std::string& group, const std::string& key,
                      std::optional<uint64_t> version = std::nullopt, const RecordLeases* held = nullptr);
  // A page of at most `limit` (1..10000) records of `group`, from `cursor` (a page's `next`;
  // empty: the start). Up to the container's parity count of targets may be unreachable.
  Result<RecordPage> ListRecords(const std::string& container, const std::string& group,
                                 const std::string& cursor = "", uint32_t limit = 1000);
  // Takes the write leases of `records` (in a fixed order: callers locking overlapping sets
  // take turns, never deadlock), waiting while other clients hold them.
  Result<std::unique_ptr<RecordLeases>> LockRecords(const std::string& container, std::vector<RecordRef> records);

  // The cluster's space as the targets last reported it (mgmt's map: one call): every target's
  // capacity and what is not yet written of it, lost targets left out. Raw device bytes:
  // redundancy takes its share of what is written.
  struct Space {
    uint64_t capacity_bytes = 0;
    uint64_t free_bytes = 0;
  };
  Result<Space> ClusterSpace();

  // Cluster map epoch the client currently holds.
  uint64_t map_epoch() const;

  // Registers caller memory [data, data + size) with the data plane once, to be reused as
  // I/O buffers of Object reads (and writes): transports that need registered memory (RDMA)
  // then skip pinning and registering it on every transfer. Optional: any memory works as a
  // buffer. The memory stays registered until the handle is destroyed, which must happen
  // before the memory is freed and before this Client is destroyed. Ranges must not overlap.
  // Errors: kInvalidArgument (empty or overlapping range), kResourceExhausted (cannot be
  // pinned: raise the locked-memory limit, ulimit -l).
  Result<std::unique_ptr<MemoryRegistration>> RegisterMemory(void* data, size_t size);

  // What this client's Object reads delivered so far, and how (see ReadPathStats).
  ReadPathStats read_path_stats() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace penstock
