// cluster_state_lost.cc — the record of objects lost when a target was declared lost with
// --force-data-loss: one MetaStore record per object (and a marker per container whose lost
// objects could not be named), read by `status`, `ls` and reads (ListLostObjects). The records
// are in the store only, not in memory: they are read when something asks.
#include "mgmt/cluster_state.h"
#include "mgmt/cluster_state_keys.h"

namespace penstock::mgmt {

Status ClusterState::RecordLostObjects(const v1::LossReport& loss, int64_t now_ms) {
  WriteBatch batch;
  for (const v1::ContainerLoss& c : loss.containers()) {
    for (v1::LostObject o : c.lost()) {
      o.set_container_id(c.container_id());
      o.set_container(c.container());
      o.set_target_id(loss.target_id());
      o.set_declared_ms(now_ms);
      batch.Put(LostObjectKey(c.container_id(), o.name()), o.SerializeAsString());
    }
    if (c.unlisted()) {
      v1::LostObject marker;
      marker.set_container_id(c.container_id());
      marker.set_container(c.container());
      marker.set_target_id(loss.target_id());
      marker.set_declared_ms(now_ms);
      batch.Put(LostObjectKey(c.container_id(), ""), marker.SerializeAsString());
    }
  }
  if (batch.empty()) return OkStatus();
  return store_->Commit(batch);
}

Result<v1::ListLostObjectsResponse> ClusterState::ListLostObjects(uint64_t container_id, const std::string& name,
                                                                  uint32_t limit) const {
  std::vector<std::pair<std::string, std::string>> rows;
  if (container_id != 0 && !name.empty()) {
    // The object's record, then the container's marker.
    for (const std::string& key : {LostObjectKey(container_id, name), LostObjectKey(container_id, "")}) {
      PS_ASSIGN_OR_RETURN(auto v, store_->Get(key));
      if (v) rows.emplace_back(key, std::move(*v));
    }
  } else {
    PS_ASSIGN_OR_RETURN(rows, store_->Scan(container_id == 0 ? kLostPrefix : LostContainerPrefix(container_id)));
  }
  v1::ListLostObjectsResponse out;
  for (const auto& [key, value] : rows) {
    v1::LostObject o;
    if (!o.ParseFromString(value)) return DataLoss("lost-object record '" + key + "' cannot be parsed");
    out.set_total(out.total() + 1);
    if (limit == 0 || static_cast<uint32_t>(out.objects_size()) < limit) *out.add_objects() = std::move(o);
  }
  return out;
}

Status ClusterState::ForgetLostObject(uint64_t container_id, const std::string& name) {
  return store_->Delete(LostObjectKey(container_id, name));
}

Result<uint64_t> ClusterState::LostObjectCount() const {
  PS_ASSIGN_OR_RETURN(auto rows, store_->Scan(kLostPrefix));
  uint64_t n = 0;
  for (const auto& [key, value] : rows) n += key.back() != '/';  // not a marker
  return n;
}

}  // namespace penstock::mgmt
