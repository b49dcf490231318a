// async_read.cc — many reads in flight from one thread: open an object, keep a window of
// ranged reads outstanding on a CompletionQueue, check every byte that arrives, report MB/s.
//
//   async_read [MGMT_ADDRESS]
//
// MGMT_ADDRESS is mgmt's host:port, as `penstock up` prints it; without it the program takes
// $PENSTOCK_MGMT, then 127.0.0.1:7000. It first stores a 32 MiB object (container "examples"),
// then reads it kPasses times in 1 MiB reads, kDepth of them in flight at once.
// Build it with CMake (CMakeLists.txt beside it) or pkg-config (../README.md).
#include <penstock/client.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr const char* kContainer = "examples";
constexpr const char* kObject = "async.bin";
constexpr uint64_t kObjectSize = 32 << 20;
constexpr size_t kReadSize = 1 << 20;
constexpr size_t kDepth = 16;   // reads in flight
constexpr int kPasses = 8;      // times the whole object is read

// The byte stored at `offset`, so that every read can be checked where it landed.
std::byte PatternAt(uint64_t offset) { return std::byte((offset * 131 + offset / 4096) & 0xff); }

int Fail(const char* step, const penstock::Status& status) {
  std::fprintf(stderr, "async_read: %s: %s\n", step, status.ToString().c_str());
  return 1;
}

// Stores the object that the reads will fetch.
penstock::Status StoreObject(penstock::Client& client) {
  penstock::Result<penstock::ContainerInfo> container = client.CreateContainer(kContainer);
  if (!container.ok() && container.status().code() != penstock::StatusCode::kAlreadyExists) {
    return container.status();
  }
  std::vector<std::byte> data(kObjectSize);
  for (uint64_t i = 0; i < data.size(); ++i) data[i] = PatternAt(i);
  return client.Put(kContainer, kObject, data);
}

// One read slot: a buffer of its own, and the object offset its current read started at.
struct Slot {
  std::vector<std::byte> buffer = std::vector<std::byte>(kReadSize);
  uint64_t offset = 0;
};

}  // namespace

int main(int argc, char** argv) {
  penstock::ClientOptions options;
  if (argc > 1) {
    options.mgmt_address = argv[1];
  } else if (const char* env = std::getenv("PENSTOCK_MGMT")) {
    options.mgmt_address = env;
  }
  penstock::Result<std::unique_ptr<penstock::Client>> connected = penstock::Client::Connect(options);
  if (!connected.ok()) return Fail("connect", connected.status());
  penstock::Client& client = **connected;
  if (penstock::Status stored = StoreObject(client); !stored.ok()) return Fail("store", stored);

  // Open once, then issue reads of any range; they complete in any order.
  penstock::Result<std::shared_ptr<penstock::Object>> object = client.Open(kContainer, kObject);
  if (!object.ok()) return Fail("open", object.status());

  // Completions are queued here and taken with Wait() (a queue built with a callback would
  // get them on a transport thread instead). The queue must outlive every read submitted to it.
  penstock::CompletionQueue cq;
  std::vector<Slot> slots(kDepth);
  const uint64_t total = kObjectSize * kPasses;
  uint64_t submitted = 0;   // bytes asked for so far, across passes
  uint64_t received = 0;
  size_t outstanding = 0;   // reads submitted whose completion this loop has not taken yet
  penstock::Status failed;  // the first error; no new reads after it

  // Starts the next read in `slot` (user_data says which slot a completion belongs to). The
  // buffer belongs to the library until that read's completion is delivered.
  auto submit = [&](size_t slot) {
    slots[slot].offset = submitted % kObjectSize;
    submitted += kReadSize;
    ++outstanding;
    (*object)->ReadAsync(slots[slot].offset, {{slots[slot].buffer.data(), kReadSize}}, cq, slot);
  };

  auto start = std::chrono::steady_clock::now();
  for (size_t s = 0; s < kDepth && submitted < total; ++s) submit(s);
  // Not `cq.in_flight() > 0`: that counts reads not yet completed, and completed ones may
  // still wait in the queue to be taken.
  while (outstanding > 0) {
    for (const penstock::IoCompletion& done : cq.Wait(1, std::chrono::seconds(60))) {
      --outstanding;
      Slot& slot = slots[done.user_data];
      if (!done.status.ok() || done.bytes != kReadSize) {
        if (failed.ok()) failed = done.status.ok() ? penstock::DataLoss("short read") : done.status;
        continue;  // keep draining: every read in flight must complete before `cq` goes away
      }
      for (uint64_t i = 0; i < done.bytes; ++i) {
        if (slot.buffer[i] != PatternAt(slot.offset + i)) {
          failed = penstock::DataLoss("wrong byte at offset " + std::to_string(slot.offset + i));
          break;
        }
      }
      received += done.bytes;
      if (failed.ok() && submitted < total) submit(done.user_data);
    }
  }
  if (!failed.ok()) return Fail("read", failed);

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("read %llu MiB (%d passes over %s/%s) in %.3f s: %.0f MB/s, %zu reads of %zu KiB in flight\n",
              static_cast<unsigned long long>(received >> 20), kPasses, kContainer, kObject, seconds,
              received / seconds / 1e6, kDepth, kReadSize >> 10);
  return 0;
}
