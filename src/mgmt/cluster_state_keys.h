// cluster_state_keys.h — the MetaStore layout of ClusterState: every key it reads and writes, in
// one place. Internal to the cluster_state*.cc files (the tenants keep theirs in
// tenant_registry.cc). Values of records are serialized protobuf messages; counters are decimal
// text. Changing a key or its encoding changes the format of every mgmt data dir and etcd
// cluster: do it only with a new version prefix and a migration.
// Plain functions and constants; thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace penstock::mgmt {

// MetaStore layout (version 1). Values of records are serialized protobuf messages.
//   mgmt/v1/epoch                  decimal uint64
//   mgmt/v1/next_target_id         decimal uint32
//   mgmt/v1/next_container_id      decimal uint64
//   mgmt/v1/orphan_grace_ms        decimal uint64
//   mgmt/v1/settled_placement_epoch  decimal uint64
//   mgmt/v1/target/<id, 10 digits> v1::Target
//   mgmt/v1/container/<name>       v1::Container
//   mgmt/v1/deleted_container/<id, 20 digits>  the deleted container's name
//   mgmt/v1/lost/<container id, 20 digits>/<name>  v1::LostObject (empty name: the marker
//                                  that objects were lost unnamed)
inline constexpr const char* kEpochKey = "mgmt/v1/epoch";
inline constexpr const char* kNextTargetIdKey = "mgmt/v1/next_target_id";
inline constexpr const char* kNextContainerIdKey = "mgmt/v1/next_container_id";
// The orphan grace period (ClusterMap.orphan_grace_ms), fixed when the cluster is made: every
// mgmt that leads it, and so every client, uses the same one.
inline constexpr const char* kOrphanGraceKey = "mgmt/v1/orphan_grace_ms";
inline constexpr const char* kSettledPlacementKey = "mgmt/v1/settled_placement_epoch";
inline constexpr const char* kTargetPrefix = "mgmt/v1/target/";
inline constexpr const char* kContainerPrefix = "mgmt/v1/container/";
inline constexpr const char* kDeletedContainerPrefix = "mgmt/v1/deleted_container/";

inline constexpr const char* kLostPrefix = "mgmt/v1/lost/";

inline std::string TargetKey(uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%010u", id);
  return kTargetPrefix + std::string(buf);
}

inline std::string ContainerKey(const std::string& name) { return kContainerPrefix + name; }

inline std::string DeletedContainerKey(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(id));
  return kDeletedContainerPrefix + std::string(buf);
}

inline std::string LostContainerPrefix(uint64_t container_id) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%020llu/", static_cast<unsigned long long>(container_id));
  return kLostPrefix + std::string(buf);
}

inline std::string LostObjectKey(uint64_t container_id, const std::string& name) {
  return LostContainerPrefix(container_id) + name;
}

}  // namespace penstock::mgmt
