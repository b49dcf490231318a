// up_targets.h — which targets `penstock up` starts in a data dir, and under which ids, so that a
// target has one id everywhere: mgmt's map (`penstock status`), its data dir DATA_DIR/target-ID,
// its log DATA_DIR/logs/target-ID.log and its name in cluster.json.
//
// mgmt gives a target its id when the target first registers (the next unused id, in order of
// registration), and the target keeps it by the uuid in its data dir. So `up` asks mgmt for its
// map before it starts any target: a directory whose uuid mgmt knows is named after that id
// (renamed while its target is stopped, for data dirs made before this rule), a target declared
// lost (`penstock out`) is left stopped, and new targets start one at a time, each named after
// the id mgmt will give it and checked against the id it got.
// Used by the CLI's main thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "penstock/status.h"
#include "penstock/mgmt.pb.h"

namespace penstock::cli {

// "target-7"
std::string TargetName(uint32_t id);

// What `up` does with the targets of one data dir.
struct TargetLayout {
  std::vector<uint32_t> restart;   // known to mgmt, data dir present, not lost: start again
  std::vector<uint32_t> lost;      // declared lost: not started (their data dirs are kept)
  std::vector<uint32_t> missing;   // in mgmt's map, but no data dir holds their uuid
  std::vector<uint32_t> fresh;     // new targets (or dirs mgmt does not know), in this order
};

// Lays out the targets of `data_dir` against mgmt's `map` so that `want` targets are in the
// cluster (known ones always start again; new ones make up the difference), renaming data dirs
// and logs of known targets to their ids. Fresh ids are the ones mgmt will assign next.
Result<TargetLayout> LayOutTargets(const std::string& data_dir, const v1::ClusterMap& map, int want);

// The uuid a target keeps in `target_dir`/target.uuid; "" until the target has written it.
std::string ReadTargetUuid(const std::string& target_dir);

}  // namespace penstock::cli
