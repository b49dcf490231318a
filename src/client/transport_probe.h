// transport_probe.h — which UCX transport a client reaches each target with ("tcp", "posix",
// ...), for `penstock status`. Each up target of the map gets one cheap stat request (a shard
// no one writes) from a data plane set up as a Client with the same options would set up its
// own (workers, network devices); any answer of the target's own shows the connection works.
// Blocking (up to 2 s per unreachable target); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "penstock/client.h"
#include "penstock/mgmt.pb.h"

namespace penstock {

// Target id → transport name; "-" for a target that is down or does not answer, "?" when it
// answered but the transport could not be named.
std::map<uint32_t, std::string> ProbeTransports(const v1::ClusterMap& map, const ClientOptions& options);

}  // namespace penstock
