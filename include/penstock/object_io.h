// object_io.h — ranged, asynchronous and batched I/O on open objects.
//
// Open an object once (Client::Open), then read and write any byte range of it, many
// operations in flight from one thread, completing through a CompletionQueue:
//
//   auto obj = client->Open("ckpt", "rank-7.bin", {.create = true}).value();
//   std::vector<std::byte> a(1 << 20, std::byte{1}), b(1 << 20, std::byte{2});
//   penstock::CompletionQueue cq;
//   obj->WriteAsync(0, {{a.data(), a.size()}}, cq, /*user_data=*/1);  // both in flight at once
//   obj->WriteAsync(a.size(), {{b.data(), b.size()}}, cq, /*user_data=*/2);
//   for (const penstock::IoCompletion& c : cq.Wait(2, std::chrono::seconds(10))) {
//     if (!c.status.ok()) return c.status;  // c.user_data says which
//   }
//   std::vector<std::byte> out(4096);
//   obj->ReadAsync(a.size() - 2048, {{out.data(), out.size()}}, cq, /*user_data=*/3);
//   std::vector<penstock::IoCompletion> done = cq.Wait(1, std::chrono::seconds(10));
//   // done[0].bytes == 4096: 2 KiB of 1s, then 2 KiB of 2s
//
// Semantics
// - An object is a byte array of size() bytes split into stripes of the container's stripe
//   unit; each stripe is stored whole and replaced atomically on its target, so a reader never
//   sees a torn stripe. A write that covers part of a stripe reads the stripe, patches it and
//   writes it back (read-modify-write); writes of one Object to the same stripe are applied in
//   submission order. Writes past the end grow the object (the head record is updated after the
//   data is durable); regions never written read as zeros (sparse). Reads past the end are short.
// - An Object sees the object as it was when opened plus its own writes. Another client's
//   whole-object Put replaces the object: reopen to see it (Refresh()); a write through an
//   Object of a replaced object fails with kAborted ("reopen it"), of a deleted one kNotFound.
// - Several clients (or several Objects) may write one object at once: writes of a stripe take
//   turns through a per-stripe lease held by a target, and a partial write patches what the
//   stripe holds then, so disjoint ranges never lose each other's updates, and sizes only grow
//   (see docs/architecture.md for the limits under target failures).
// - Scatter/gather: each operation takes a list of caller buffers (IoVec).
//
// Ownership and threads
// - Buffers passed to an async call belong to the library until its completion is delivered;
//   after that it never touches them again. Reads receive data straight into them (the
//   transport writes there; no copy in the client), so a cancelled or expired read is
//   completed only once no transfer into its buffers is running: usually at once, at most
//   the client's timeout later. Memory registered once with Client::RegisterMemory saves
//   per-transfer registration on RDMA transports.
// - Object, CompletionQueue and Client are thread-safe. Completions are delivered on transport
//   threads to a callback (if the queue has one, which must not block, and may issue further
//   operations without waiting for them) or queued for Poll()/Wait(). A callback that issues
//   the next operation saves a thread switch each way per operation (`penstock bench` does so).
//
// Errors in IoCompletion::status: kNotFound (object or container gone), kUnavailable (a target
// unreachable after retries until the deadline or the client's timeout, or marked down by
// mgmt: retry later), kDataLoss (checksum failure), kDeadlineExceeded (the
// operation's deadline passed), kCancelled (Cancel()), kInvalidArgument (bad range).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "penstock/export.h"
#include "penstock/status.h"

namespace penstock {

// One caller buffer of a scatter/gather list.
struct IoVec {
  void* data = nullptr;
  size_t size = 0;
};

struct IoCompletion {
  uint64_t user_data = 0;
  Status status;
  uint64_t bytes = 0;  // bytes read or written (a read past the end is short)
};

// Where finished operations are reported. Either a callback (runs on a transport thread, must
// not block, may issue more operations) or a queue drained with Poll()/Wait(). Thread-safe.
// A queue must outlive the operations submitted to it (in_flight() == 0 before destruction).
class PENSTOCK_API CompletionQueue {
 public:
  CompletionQueue();
  explicit CompletionQueue(std::function<void(IoCompletion)> callback);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Takes up to `max` queued completions without waiting.
  std::vector<IoCompletion> Poll(size_t max = SIZE_MAX);
  // Waits until at least `min` completions are queued (or `timeout` passes), then takes up to
  // all queued ones. Returns what it took (possibly fewer than `min` on timeout).
  std::vector<IoCompletion> Wait(size_t min, std::chrono::milliseconds timeout);
  // Operations submitted to this queue and not yet completed.
  size_t in_flight() const;


 private:
  friend struct CompletionQueueAccess;  // the library's side (client/completion_queue_access.h)
  struct State;
  std::unique_ptr<State> state_;
};

using OpId = uint64_t;

// A registration of caller memory with the data plane (Client::RegisterMemory); the memory is
// unregistered when this is destroyed.
class PENSTOCK_API MemoryRegistration {
 public:
  virtual ~MemoryRegistration() = default;
};

// Bytes delivered into caller buffers by Object reads, since the Client connected.
// `placed`: received there directly by the transport (a rendezvous transfer into the buffer,
// or UCX's own copy out of its receive buffer for small eager messages): no client copy.
// `copied`: copied there by the client from a reply buffer (several nearby ranges fetched by
// one request, replica/ec reads that had to fall back, degraded reads). `copied / bytes` is
// the client's copies per byte delivered.
struct ReadPathStats {
  uint64_t bytes = 0;
  uint64_t placed = 0;
  uint64_t copied = 0;
};

enum class IoKind : uint8_t { kRead, kWrite };

// One operation of a batch.
struct IoRequest {
  IoKind kind = IoKind::kRead;
  uint64_t offset = 0;
  std::vector<IoVec> iov;
  uint64_t user_data = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct OpenOptions {
  bool create = false;  // create an empty object when none exists
  // A new, empty object that replaces any object of this name (as a put does) once its first
  // write or Truncate is durable; until then nothing is sent and other clients see the old
  // one. Open asks no target: it returns at once (the container lookup is cached). A first
  // write at offset 0 of at most 16 KiB stores the object in its head: one shard write per
  // head copy, and reading it back is one head read. The replaced version's stripes are
  // deleted once the new head is durable (when the old head was read in time; otherwise
  // mgmt's repair service collects them as orphans). Implies create. An Object of an object
  // stored in its head reads from the head it holds (opened or refreshed): other clients'
  // later writes show after Refresh() or a new Open (close-to-open), and its own first write
  // in place moves it to stripes (one head lease, read and rewrite).
  bool replace = false;
};

// An open object, from Client::Open. The Client must outlive every Object it opened.
class PENSTOCK_API Object {
 public:
  virtual ~Object() = default;

  virtual const std::string& name() const = 0;
  // Current size as this handle knows it.
  virtual uint64_t size() const = 0;

  // Asynchronous forms. Each returns an id usable with Cancel(); errors detected before
  // anything is sent are delivered as completions too (never both a return and a completion).
  virtual OpId ReadAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq,
                         uint64_t user_data,
                         std::optional<std::chrono::steady_clock::time_point> deadline = {}) = 0;
  virtual OpId WriteAsync(uint64_t offset, std::vector<IoVec> iov, CompletionQueue& cq,
                          uint64_t user_data,
                          std::optional<std::chrono::steady_clock::time_point> deadline = {}) = 0;
  // Submits every request of `batch` at once; ids in the same order.
  virtual std::vector<OpId> Submit(std::span<const IoRequest> batch, CompletionQueue& cq) = 0;
  // Completes a pending operation with kCancelled: returns true if it was still pending,
  // false if it had already completed. The kCancelled completion is delivered at once, or
  // when a transfer into the read's buffers that is under way has ended (the buffers are the
  // caller's again when the completion is delivered). Writes already sent to a target may
  // still land (each stripe atomically).
  virtual bool Cancel(OpId id) = 0;

  // Blocking forms (thin wrappers over the async ones).
  virtual Result<uint64_t> Read(uint64_t offset, std::span<std::byte> out) = 0;
  virtual Status Write(uint64_t offset, std::span<const std::byte> data) = 0;
  // Writes at the end; returns the offset written at. Concurrent appends through one Object
  // never overlap.
  virtual Result<uint64_t> Append(std::span<const std::byte> data) = 0;
  // Sets the size; bytes past a shrunk end are gone (read as zeros if the object grows again).
  // Must not run concurrently with writes to the same Object. The bytes go before the size
  // does (so none can come back): when it fails, the size may be the old one with the bytes
  // past `size` already zeros; call it again. kAborted when another client's put has replaced
  // the object since it was opened, kNotFound when it was deleted (the head is left as stored),
  // kUnavailable (retryable) while a target holding a copy of a stripe past `size` is down.
  virtual Status Truncate(uint64_t size) = 0;
  // Re-reads the object's head (size, data) from the cluster.
  virtual Status Refresh() = 0;
};

}  // namespace penstock
