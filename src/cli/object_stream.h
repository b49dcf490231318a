// object_stream.h — whole objects streamed between the cluster and local files or pipes by the
// CLI: ObjectReader reads an object in order through the asynchronous API (Client::Open,
// Object::ReadAsync with a CompletionQueue) into a Destination, a bounded window of reads in
// flight; SpoolStdin makes standard input something Client::PutFile can store atomically.
// Interruption: see interrupt.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cli/destination.h"
#include "cli/interrupt.h"
#include "penstock/client.h"

namespace penstock::cli {

// Reads objects, one at a time, with `window` reads of `chunk_bytes` in flight. Owned by one
// thread; its buffers (window x chunk_bytes) are reused from one object to the next.
class ObjectReader {
 public:
  ObjectReader(uint64_t chunk_bytes, unsigned window);
  ~ObjectReader();
  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;

  // Writes `obj` (opened with the reader's Client) into `dest` (not committed), reporting
  // progress from this thread. Returns the object's size. Errors: those of the reads (the
  // reads still in flight are cancelled and waited for), kAborted when the object shrank while
  // read, kCancelled when Interrupted(), and Destination::Write's.
  Result<uint64_t> Read(Object& obj, Destination& dest, const ProgressFn& progress = {});

 private:
  struct Slot;
  uint64_t chunk_;
  std::unique_ptr<Slot[]> slots_;
  unsigned window_;
};

// How many bytes an ObjectReader should read at once from `container`: its stripe unit, at
// least 1 MiB (a multiple of the stripe unit). Errors: Client::GetContainer's.
Result<uint64_t> ReadChunkBytes(Client& client, const std::string& container);

// Standard input as a regular file PutFile can read at any offset: standard input itself when
// it is a regular file read from its start, else its bytes copied into an unlinked file under
// $TMPDIR (or /tmp). Returns a path that names it while the returned descriptor is open
// ("/proc/self/fd/N"); the caller closes `*fd` when done. Errors name the spool directory and
// the fix (kResourceExhausted when it fills up: point TMPDIR elsewhere).
Result<std::string> SpoolStdin(int* fd);

}  // namespace penstock::cli
