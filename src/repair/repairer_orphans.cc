// repairer_orphans.cc — what repair deletes rather than repairs: orphans (data no object
// head names), tombstones once every copy holds them, and the shards of deleted containers
// (see repairer.h). What a pass notes here waits out a grace period across passes, in the
// Repairer's orphans_, tombstones_ and deleted_containers_ (guarded by pass_mu_).
#include <fmt/format.h>

#include "common/log.h"
#include "repair/pass_state.h"
#include "repair/repairer.h"

namespace penstock {

namespace {

using Clock = std::chrono::steady_clock;

// What a pass noted, kept across passes by (container, hi, lo) of a data or object id.
template <typename Note>
using Notes = std::map<std::tuple<uint64_t, uint64_t, uint64_t>, Note>;

// Drops every note of `container`.
template <typename Note>
void ForgetNotes(Notes<Note>& notes, uint64_t container) {
  notes.erase(notes.lower_bound({container, 0, 0}), notes.lower_bound({container + 1, 0, 0}));
}

// Drops the notes of `container` for which `drop(id, note)` holds.
template <typename Note, typename Drop>
void DropNotes(Notes<Note>& notes, uint64_t container, Drop drop) {
  for (auto it = notes.lower_bound({container, 0, 0}); it != notes.end() && std::get<0>(it->first) == container;) {
    if (drop(Id128{std::get<1>(it->first), std::get<2>(it->first)}, it->second)) {
      it = notes.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

void Repairer::CollectGarbage(PassState& pass, ContainerPass& cp) {
  const uint64_t id = cp.container.id();
  const ContainerScan& scan = cp.scan;
  if (scan.find_orphans && cp.clean &&
      scan.listed.size() == static_cast<size_t>(pass.map.targets_size() - pass.lost_targets)) {
    CollectOrphans(id, scan.listed, std::move(cp.scan.unnamed), scan.heads_listed, Clock::now(), pass.grace);
    // Tombstones whose copies are all gone need no repair.
    for (const auto& gone : CollectTombstones(id, scan.listed, scan.copies, scan.heads_listed, pass.grace)) {
      cp.scan.heads.erase(gone);
    }
  } else {
    // Not a complete listing: start their clocks again later.
    ForgetNotes(orphans_, id);
    ForgetNotes(tombstones_, id);
  }
}

void Repairer::ForgetGoneContainers(const v1::ListContainersResponse& containers) {
  std::set<uint64_t> ids;
  for (const v1::Container& c : containers.containers()) ids.insert(c.id());
  std::erase_if(orphans_, [&](const auto& o) { return !ids.count(std::get<0>(o.first)); });
  std::erase_if(tombstones_, [&](const auto& o) { return !ids.count(std::get<0>(o.first)); });
}

void Repairer::CollectOrphans(uint64_t container, const std::vector<TargetRef>& targets,
                              std::map<Id128, Unnamed> found, Clock::time_point heads_listed,
                              Clock::time_point data_listed, std::chrono::milliseconds grace) {
  // What this container's earlier passes noted and this one no longer finds unnamed is named
  // now (its head landed) or gone.
  DropNotes(orphans_, container, [&](const Id128& id, const Orphan&) { return !found.count(id); });
  Counter* deleted_metric = nullptr;
  if (options_.metrics) {
    deleted_metric = &options_.metrics->GetCounter("penstock_repair_orphan_shards_deleted_total",
                                                   "shards deleted by repair because no object head names their data");
  }
  uint64_t shards_deleted = 0, collected = 0;
  for (auto& [id, u] : found) {
    const auto key = std::make_tuple(container, id.first, id.second);
    // Noted as of the end of the listing that found it (every shard counted landed before);
    // due when the heads were listed at least the grace period after that (a head landing
    // later comes from a put that gave up: PutCommitWindow).
    auto [it, fresh] = orphans_.try_emplace(key, Orphan{data_listed, u.shards.size(), u.newest});
    Orphan& o = it->second;
    if (fresh) continue;
    if (o.shards != u.shards.size() || o.newest != u.newest) {  // still being written: wait again
      o = Orphan{data_listed, u.shards.size(), u.newest};
      continue;
    }
    if (heads_listed - o.first_seen < grace) continue;
    uint64_t failed = 0;
    for (const auto& [target, k] : u.shards) {
      const TargetRef* t = FindTarget(targets, target);
      if (t == nullptr) continue;
      Status s = dp_.shards->DeleteTo(*t, k);
      if (s.ok() || s.code() == StatusCode::kNotFound) {
        ++shards_deleted;
        if (deleted_metric) deleted_metric->Inc();
      } else {
        ++failed;
      }
    }
    PS_LOG_INFO("repair: deleted {} orphan shard(s) of data {:016x}:{:016x} in container id {} (no object head "
                "has named it for {} s){}",
                u.shards.size() - failed, id.first, id.second, container,
                std::chrono::duration_cast<std::chrono::seconds>(heads_listed - o.first_seen).count(),
                failed ? fmt::format("; {} could not be deleted, next pass", failed) : "");
    if (failed == 0) {
      orphans_.erase(it);
      ++collected;
    }
  }
  Update([&](v1::RepairStatus& st) {
    st.set_total_orphan_shards_deleted(st.total_orphan_shards_deleted() + shards_deleted);
    st.set_total_orphans_collected(st.total_orphans_collected() + collected);
  });
}

std::set<Id128> Repairer::CollectTombstones(uint64_t container, const std::vector<TargetRef>& targets,
                                            const std::map<Id128, HeadCopies>& heads, Clock::time_point heads_listed,
                                            std::chrono::milliseconds grace) {
  std::set<Id128> gone;
  // What is no longer the same tombstone everywhere (rewritten, or gone) is forgotten.
  DropNotes(tombstones_, container, [&](const Id128& id, const Tombstone& t) {
    auto h = heads.find(id);
    return h == heads.end() || !h->second.same_tombstone || h->second.version != t.version;
  });
  Counter* metric = nullptr;
  if (options_.metrics) {
    metric = &options_.metrics->GetCounter("penstock_repair_tombstones_collected_total",
                                           "object head tombstones removed by repair once every copy held them");
  }
  uint64_t collected = 0;
  for (const auto& [id, h] : heads) {
    if (!h.same_tombstone) continue;
    auto [it, fresh] = tombstones_.try_emplace({container, id.first, id.second}, Tombstone{heads_listed, h.version});
    if (fresh || heads_listed - it->second.first_seen < grace) continue;
    bool done = true;
    for (const auto& [target, key] : h.copies) {
      const TargetRef* t = FindTarget(targets, target);
      if (t == nullptr) continue;
      Status s = dp_.shards->DeleteTo(*t, key, h.version);
      // kAborted: a put of the name rewrote this copy since; it stays, and so does the object.
      if (!s.ok() && s.code() != StatusCode::kNotFound && s.code() != StatusCode::kAborted) done = false;
    }
    if (done) {
      tombstones_.erase(it);
      gone.insert(id);
      ++collected;
      if (metric) metric->Inc();
    }
  }
  if (collected > 0) {
    PS_LOG_INFO("repair: removed {} tombstone(s) of deleted objects in container id {}", collected, container);
  }
  Update([&](v1::RepairStatus& st) { st.set_total_tombstones_collected(st.total_tombstones_collected() + collected); });
  return gone;
}

void Repairer::CollectDeletedContainers(const std::map<uint64_t, std::vector<TargetRef>>& held,
                                        const std::set<uint64_t>& deleted, Clock::time_point now,
                                        std::chrono::milliseconds grace) {
  std::erase_if(deleted_containers_, [&](const auto& d) { return !held.count(d.first) || !deleted.count(d.first); });
  Counter* deleted_metric = nullptr;
  if (options_.metrics) {
    deleted_metric = &options_.metrics->GetCounter("penstock_repair_deleted_container_shards_total",
                                                   "shards deleted by repair because their container was deleted");
  }
  uint64_t shards_deleted = 0, emptied = 0;
  for (const auto& [id, targets] : held) {
    if (!deleted.count(id)) continue;  // live, or unknown to this mgmt: never touched
    auto [it, fresh] = deleted_containers_.try_emplace(id, now);
    if (fresh || now - it->second < grace) continue;
    uint64_t removed = 0, failed = 0;
    for (const TargetRef& t : targets) {
      auto shards = dp_.shards->List(t, id, 0);
      if (!shards.ok()) {
        PS_LOG_WARN("repair: cannot list what target {} holds of deleted container id {} ({}); next pass", t.id, id,
                    shards.status().ToString());
        ++failed;
        continue;
      }
      for (const ListEntry& e : *shards) {
        Status s = dp_.shards->DeleteTo(t, e.key);
        if (s.ok() || s.code() == StatusCode::kNotFound) {
          ++removed;
          if (deleted_metric) deleted_metric->Inc();
        } else {
          ++failed;
        }
      }
    }
    shards_deleted += removed;
    PS_LOG_INFO("repair: deleted {} shard(s) left on {} target(s) by container id {}, deleted {} s ago or more{}",
                removed, targets.size(), id, std::chrono::duration_cast<std::chrono::seconds>(now - it->second).count(),
                failed ? fmt::format("; {} could not be deleted or listed, next pass", failed) : "");
    if (failed == 0) {
      deleted_containers_.erase(it);
      ++emptied;
    }
  }
  Update([&](v1::RepairStatus& st) {
    st.set_total_deleted_container_shards(st.total_deleted_container_shards() + shards_deleted);
    st.set_total_deleted_containers_emptied(st.total_deleted_containers_emptied() + emptied);
    st.set_deleted_containers_pending(deleted_containers_.size());
  });
}

}  // namespace penstock
