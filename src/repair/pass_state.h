// pass_state.h — what the steps of one repair pass share: the map it started with and what
// follows from it (PassState), and the container being repaired (ContainerPass).
//
// RunPass (repairer_pass.cc) owns both, on its stack; the steps in repairer_*.cc take them by
// reference. Rebuild jobs (repair_jobs.h) run on other threads while the pass goes on: they
// only read the constant parts and clear the flags the comments mark atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

#include "common/metrics.h"
#include "penstock/mgmt.pb.h"
#include "penstock/redundancy.h"
#include "repair/scan.h"
#include "repair/vote.h"

namespace penstock {

// The counters a pass adds to (null: no metrics registry).
struct PassMetrics {
  Counter* shards = nullptr;  // shards rewritten
  Counter* bytes = nullptr;   // bytes rewritten
  Counter* lost = nullptr;    // stripes found unrecoverable
};

struct PassState {
  // The pass that starts at `started` with `map`; `default_grace`: the orphan grace when the
  // map has none (RepairOptions::orphan_grace).
  PassState(v1::ClusterMap map, std::chrono::steady_clock::time_point started,
            std::chrono::milliseconds default_grace);

  const v1::ClusterMap map;
  const std::chrono::steady_clock::time_point started;
  CorruptSet corrupt;                // (target, key text) reported by targets
  std::vector<uint32_t> recovering;  // targets this pass can clear
  bool any_recovering = false;       // for some container at least
  // A container is clean when every target was up and listed and nothing in it was left
  // unrepaired; the pass is clean when every container is. With a target DOWN, a recovering
  // target's shard may be older than the copy on the down one, so no flag is cleared.
  bool all_up = true;
  int lost_targets = 0;
  std::chrono::milliseconds grace;  // the orphan grace: ClusterMap.orphan_grace_ms, else the default
  // Whether everything is where the placement this pass started with puts it (settles joins):
  // cleared by a shard left off its slots, or that may be (a listing failed, a copy failed).
  // Atomic: rebuild jobs clear it.
  std::atomic<bool> moves_done;
  bool clean = true;                       // every container so far was
  std::vector<uint64_t> clean_containers;  // those checked with nothing left unrepaired
  PassMetrics metrics;
};

// One container's part of a pass.
struct ContainerPass {
  ContainerPass(const v1::Container& c, const Redundancy& r) : container(c), red(r) {}

  const v1::Container& container;
  const Redundancy red;
  ContainerScan scan;                // what the live targets hold of it
  std::atomic<bool> clean{true};     // this container's (see PassState::all_up); rebuild jobs clear it
  std::map<Id128, uint64_t> walked;  // data id -> stripes the walk checks
};

}  // namespace penstock
