// redundancy_proto.h — a container's Redundancy (penstock/redundancy.h) to and from its
// control-plane message (v1::Redundancy in proto/penstock/mgmt.proto). The only place that
// still reads the text form: containers stored, and requests sent, by versions older than the
// typed field. Pure functions; thread-safe.
#pragma once

#include "penstock/mgmt.pb.h"
#include "penstock/redundancy.h"

namespace penstock {

v1::Redundancy RedundancyToProto(const Redundancy& r);
// Errors: kInvalidArgument (ValidateRedundancy) naming the scheme.
Result<Redundancy> RedundancyFromProto(const v1::Redundancy& r);

// The container's scheme: its `scheme`, or its text `redundancy` when it has none (an older
// mgmt's). Errors: kInvalidArgument naming the container and the scheme this build does not
// know (upgrade the client).
Result<Redundancy> ContainerRedundancy(const v1::Container& c);

}  // namespace penstock
