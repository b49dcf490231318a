// commit_request.h — one index mutation handed to the engine's committer (group commit).
//
// A writer (or GC) fills a CommitRequest on its own stack, queues it with Engine::Commit and
// blocks until the committer has made it durable or failed it. The committer owns the request
// between queueing and `done`; it sets `status` and `done` under `mu` and notifies while still
// holding it, so the owner cannot return (and destroy the request) before the committer is
// done touching it.
//
// Kinds:
//   kWrite     put `record`, whose bytes `data` the committer writes to pending `extent` (with
//              the rest of the batch); the old record's space dies.
//   kDelete    remove the key; kNotFound if it has no record.
//   kRelocate  GC: its data is already written (unsynced) to `extent`. Put `record` only if
//              the key still points at `expected` with
//              `expected_version`; otherwise kAborted and `extent` is abandoned (an overwrite or
//              delete that raced with GC wins).
// On any failure the committer abandons `extent`, so the owner never cleans up space.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>

#include "engine/engine.h"
#include "engine/format.h"
#include "engine/segment_table.h"

namespace penstock::engine {

struct CommitRequest {
  enum class Kind : uint8_t { kWrite, kDelete, kRelocate };

  Kind kind = Kind::kWrite;
  ShardKey key;
  ShardRecord record;         // kWrite, kRelocate
  Extent extent;              // kWrite, kRelocate: pending space holding the data
  Extent expected;            // kRelocate
  uint64_t expected_version = 0;  // kRelocate
  // kWrite: whole 4 KiB blocks for `extent`, owned by the caller until done. Empty when the
  // data is already on the device (unsynced), as for kRelocate.
  std::span<const std::byte> data;

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // guarded by mu
  Status status;      // valid once done
};

}  // namespace penstock::engine
