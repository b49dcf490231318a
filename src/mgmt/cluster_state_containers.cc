// cluster_state_containers.cc — ClusterState's container catalogue: create, look up, list and
// delete containers, and the ids of deleted ones (retired: never given out again). Containers
// are not part of the cluster map, but a deletion bumps its epoch: clients cache their container
// lookups for as long as their map stays at one epoch (client/container_cache.h).
#include <string>
#include <vector>

#include "common/log.h"
#include "mgmt/cluster_state.h"
#include "mgmt/cluster_state_keys.h"
#include "mgmt/container_rules.h"
#include "mgmt_client/redundancy_proto.h"
#include "penstock/redundancy.h"

namespace penstock::mgmt {
namespace {

Status NoSuchContainer(const std::string& name) {
  return NotFound("container '" + name + "' does not exist; create it with `penstock container create " + name +
                  "`");
}

}  // namespace

Result<v1::Container> ClusterState::CreateContainer(const std::string& name,
                                                    std::optional<Redundancy> redundancy,
                                                    uint64_t stripe_unit, uint64_t tenant_id,
                                                    uint32_t min_durable) {
  PS_RETURN_IF_ERROR(ValidateContainerName(name));
  PS_ASSIGN_OR_RETURN(uint64_t unit, NormalizeStripeUnit(stripe_unit));

  std::lock_guard<std::mutex> lock(mu_);
  if (containers_.count(name) != 0) {
    return AlreadyExists("container '" + name + "' already exists");
  }
  uint32_t usable = 0;
  for (const auto& [id, t] : targets_) usable += t.state() != v1::TARGET_STATE_LOST;
  Redundancy scheme = redundancy.value_or(DefaultRedundancy(usable));
  if (min_durable != 0) scheme.min_durable = min_durable;
  PS_RETURN_IF_ERROR(ValidateRedundancy(scheme));
  if (scheme.min_durable == 0) scheme.min_durable = scheme.DefaultQuorum();
  const std::string red = scheme.ToString();
  if (scheme.protected_() && scheme.width() > usable) {
    return FailedPrecondition("redundancy " + red + " puts each stripe on " + std::to_string(scheme.width()) +
                              " targets, but the cluster has " + std::to_string(usable) +
                              "; add targets or choose a narrower scheme");
  }
  v1::Container c;
  c.set_id(next_container_id_);
  c.set_name(name);
  c.set_redundancy(red);
  *c.mutable_scheme() = RedundancyToProto(scheme);
  c.set_stripe_unit(unit);
  c.set_created_ms(options_.now_ms());
  c.set_tenant_id(tenant_id);
  WriteBatch batch;
  batch.Put(ContainerKey(name), c.SerializeAsString());
  batch.Put(kNextContainerIdKey, std::to_string(next_container_id_ + 1));
  PS_RETURN_IF_ERROR(store_->Commit(batch));
  ++next_container_id_;
  containers_[name] = c;
  PS_LOG_INFO("container '{}' created (id {}, redundancy {}, stripe unit {})", name, c.id(), red,
              unit);
  return c;
}

Result<v1::Container> ClusterState::GetContainer(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(name);
  if (it == containers_.end()) return NoSuchContainer(name);
  return it->second;
}

Result<v1::Container> ClusterState::GetContainerById(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, c] : containers_) {
    if (c.id() == id) return c;
  }
  return NotFound("container id " + std::to_string(id) + " does not exist (deleted?)");
}

bool ClusterState::ContainerIdRetired(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return deleted_containers_.count(id) != 0;
}

std::vector<uint64_t> ClusterState::DeletedContainerIds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {deleted_containers_.begin(), deleted_containers_.end()};
}

std::vector<v1::Container> ClusterState::ListContainers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Container> out;
  out.reserve(containers_.size());
  for (const auto& [name, c] : containers_) out.push_back(c);
  return out;
}

Status ClusterState::DeleteContainer(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containers_.find(name);
  if (it == containers_.end()) return NoSuchContainer(name);
  // The deletion is recorded: repair deletes what targets still hold of this id, and only of
  // ids recorded so (never of a container a mgmt with other metadata does not know).
  WriteBatch batch;
  batch.Delete(ContainerKey(name));
  batch.Put(DeletedContainerKey(it->second.id()), name);
  PS_RETURN_IF_ERROR(CommitLocked(batch, epoch_ + 1));
  ++epoch_;
  deleted_containers_.insert(it->second.id());
  containers_.erase(it);
  PS_LOG_INFO("container '{}' deleted", name);
  return OkStatus();
}

}  // namespace penstock::mgmt
