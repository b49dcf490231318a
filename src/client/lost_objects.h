// lost_objects.h — what the client makes of mgmt's record of lost objects (objects whose data
// went with a target declared lost with --force-data-loss; see ListLostObjects in mgmt.proto):
// a failed read of such an object answers kDataLoss naming the target, and List marks them.
//
// Plain functions over a MgmtClient; thread-safe as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mgmt_client/mgmt_client.h"
#include "penstock/client.h"
#include "penstock/mgmt.pb.h"
#include "penstock/status.h"

namespace penstock {

// "target 2 held its data and was declared lost with --force-data-loss at 2026-11-29T10:03:07Z".
std::string LostText(const v1::LostObject& o);

// The error a read of a lost object answers: kDataLoss "object 'x' in container 'c' is lost:
// `why` (LostText); delete it or put it again".
Status LostObjectError(const std::string& container, const std::string& name, const std::string& why);

// What mgmt recorded of object `name` in `container`: its record when it names data id
// `data_hi:data_lo` (any, when both are 0), and the container's marker of objects lost unnamed.
struct LostRecords {
  std::optional<v1::LostObject> object;
  std::optional<v1::LostObject> unnamed;
};
Result<LostRecords> FindLost(MgmtClient& mgmt, const std::string& container, const std::string& name,
                             uint64_t data_hi, uint64_t data_lo);

// `failed`, a read of object `name` in `container` (data id `data_hi:data_lo` when its head
// was read; both 0 when it was not found), explained: kDataLoss naming the target when mgmt
// recorded the object lost; kNotFound saying the object may have been lost unnamed when the
// container lost objects that way; else `failed` as it was. Only kNotFound and kDataLoss are
// looked up (one mgmt call); a lookup that fails leaves `failed` as it was.
Status ExplainLoss(MgmtClient& mgmt, const std::string& container, const std::string& name, uint64_t data_hi,
                   uint64_t data_lo, Status failed);

// The objects of `container` mgmt recorded lost whose names start with `prefix` (markers left
// out). Errors: those of mgmt.
Result<std::vector<v1::LostObject>> ListLost(MgmtClient& mgmt, const std::string& container,
                                             const std::string& prefix);

}  // namespace penstock
