// bench_runner.h — the engine of `penstock bench`: keeps a fixed number of operations in
// flight through the asynchronous object API for a fixed time, and measures throughput,
// latency percentiles and the client's CPU time per GB moved. Write runs issue from the
// calling thread (they open and create objects, which waits for mgmt); the other modes issue
// each next operation from the completion callback, on the transport thread that delivered it.
//
// Modes: write (each operation writes a whole object of `size` bytes, objects bench-0,
// bench-1, ..., cycling over `objects` when set), seq (reads the bench-* objects a previous
// write left, in order, `size` bytes at a time), rand (random `size`-aligned ranges of random
// objects), mixed (rand with 30% writes of the same shape; with `sequential`, in seq's order).
// Every write carries the bench pattern of its object and offset (bench_pattern.h); with
// `verify`, every byte a read returns is checked against it and the blocks that differ are
// counted (BenchResult::mismatches; the run goes on). Reads are checked on the threads that
// deliver them, in parallel; the check's CPU time is counted apart from the client's.
// Not thread-safe; one run at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "penstock/client.h"

namespace penstock::cli {

enum class BenchMode { kWrite, kSeq, kRand, kMixed };

struct BenchOptions {
  BenchMode mode = BenchMode::kWrite;
  std::string container;
  uint64_t size = 4 << 20;       // bytes per operation
  unsigned concurrency = 16;     // operations in flight
  double seconds = 10;
  uint64_t objects = 0;          // write: cycle over this many objects (0: a new one each op)
  int mixed_write_percent = 30;
  bool sequential = false;       // mixed: seq's order instead of random ranges
  bool verify = false;           // reads: check every byte against the bench pattern
};

struct BenchResult {
  std::string mode;
  uint64_t ops = 0, errors = 0, bytes = 0;
  double seconds = 0, mb_per_s = 0, iops = 0;
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  // The client's CPU: the process's, less the bench's own work on the data (verify_seconds,
  // checking what reads returned; stamp_seconds, writing the pattern into write buffers: an
  // application's making of its data, not the client's moving of it).
  double cpu_seconds = 0, cpu_seconds_per_gb = 0;
  double stamp_seconds = 0;
  // Bytes reads delivered, and how many of them the client copied (Client::read_path_stats).
  uint64_t read_bytes = 0, read_bytes_copied = 0;
  uint64_t objects = 0;
  std::string first_error;
  // verify: bytes checked, 4 KiB blocks (or parts) that differed from the pattern, the first
  // wrong byte, and the CPU time spent checking (summed over the threads that checked).
  uint64_t verified_bytes = 0, mismatches = 0;
  std::string first_mismatch_object;
  uint64_t first_mismatch_offset = 0;
  double verify_seconds = 0;
};

// Called about once a second with (elapsed seconds, ops so far, bytes so far).
using BenchProgress = std::function<void(double, uint64_t, uint64_t)>;

Result<BenchResult> RunBench(Client& client, const BenchOptions& options, const BenchProgress& progress);

// The names a write run creates: bench-0, bench-1, ...
std::string BenchObjectName(uint64_t i);

}  // namespace penstock::cli
