// `penstock status`: the cluster map as an operator sees it (mgmt, the epochs, repair's
// progress, every target and its transport, objects recorded lost). It talks to mgmt over gRPC
// only. (`penstock out`, the one change an operator makes to the map, is cmd_out.cc.)
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "client/transport_probe.h"
#include "common/config.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock::cli {

using nlohmann::json;

namespace {

// Space of a target as its last heartbeat reported it: dead = written but overwritten or
// deleted and not yet reclaimed by GC; free = not in any used segment.
uint64_t DeadBytes(const v1::Target& t) {
  if (t.has_dead_bytes()) return t.dead_bytes();  // the engine's own count
  return t.used_bytes() > t.live_bytes() ? t.used_bytes() - t.live_bytes() : 0;  // an older target
}
uint64_t FreeBytes(const v1::Target& t) {
  return t.capacity_bytes() > t.used_bytes() ? t.capacity_bytes() - t.used_bytes() : 0;
}

const char* StateName(const v1::Target& t) {
  return t.state() == v1::TARGET_STATE_UP ? "up" : t.state() == v1::TARGET_STATE_LOST ? "lost" : "down";
}

// Recovering for some containers only (writes to them missed it): their ids.
std::vector<uint64_t> RecoveringIds(const v1::Target& t) {
  std::vector<uint64_t> ids;
  for (const auto& rc : t.recovering_containers()) ids.push_back(rc.container_id());
  return ids;
}

// What `penstock status` shows: mgmt's status, its cluster map, and how this host reaches each
// target (by id; see client/transport_probe.h).
// Lost objects `status` names (it counts them all).
constexpr size_t kLostShown = 10;

struct StatusView {
  v1::MgmtStatus st;
  v1::ClusterMap map;
  std::map<uint32_t, std::string> transports;
  int up = 0, down = 0, lost = 0;  // targets by state
  std::vector<v1::LostObject> lost_objects;  // the first kLostShown recorded lost (markers left out)

  const std::string& transport(uint32_t id) const {
    static const std::string kNone;
    auto it = transports.find(id);
    return it == transports.end() ? kNone : it->second;
  }
};

Result<StatusView> FetchStatus(const GlobalOptions& g) {
  PS_ASSIGN_OR_RETURN(auto mc, MgmtClient::Connect(g.mgmt, std::chrono::milliseconds(5000), g.tls));
  StatusView v;
  PS_ASSIGN_OR_RETURN(v.st, mc->GetStatus());
  PS_ASSIGN_OR_RETURN(v.map, mc->GetClusterMap());
  for (const auto& t : v.map.targets()) {
    (t.state() == v1::TARGET_STATE_UP ? v.up : t.state() == v1::TARGET_STATE_LOST ? v.lost : v.down)++;
  }
  v.transports = ProbeTransports(v.map, ToClientOptions(g));
  if (v.st.lost_objects() > 0) {
    v1::ListLostObjectsRequest req;
    req.set_limit(kLostShown * 2);  // markers come too
    PS_ASSIGN_OR_RETURN(v1::ListLostObjectsResponse r, mc->ListLostObjects(req));
    for (const v1::LostObject& o : r.objects()) {
      if (!o.name().empty() && v.lost_objects.size() < kLostShown) v.lost_objects.push_back(o);
    }
  }
  return v;
}

json LostJson(const StatusView& v) {
  json out = json::array();
  for (const v1::LostObject& o : v.lost_objects) {
    out.push_back({{"container", o.container()}, {"name", o.name()}, {"bytes", o.bytes()},
                   {"target", o.target_id()}, {"declared_ms", o.declared_ms()}});
  }
  return out;
}

// "3 objects lost (...): c/a, c/b" when some were recorded lost.
void PrintLost(const StatusView& v) {
  if (v.st.lost_objects() == 0) return;
  std::printf("%llu objects lost (data on targets declared lost with --force-data-loss; reads of them fail, "
              "`penstock ls` marks them):",
              static_cast<unsigned long long>(v.st.lost_objects()));
  for (const v1::LostObject& o : v.lost_objects) std::printf(" %s/%s", o.container().c_str(), o.name().c_str());
  if (v.st.lost_objects() > v.lost_objects.size()) {
    std::printf(" ... (%llu more)", static_cast<unsigned long long>(v.st.lost_objects() - v.lost_objects.size()));
  }
  std::printf("\n");
}

json RepairJson(const v1::RepairStatus& rs) {
  return {{"state", rs.state()}, {"epoch", rs.epoch()}, {"stripes_checked", rs.stripes_checked()},
          {"stripes_total", rs.stripes_total()}, {"shards_repaired", rs.shards_repaired()},
          {"bytes_repaired", rs.bytes_repaired()}, {"stripes_unrecoverable", rs.stripes_unrecoverable()},
          {"passes", rs.passes()}, {"last_pass_ms", rs.last_pass_ms()},
          {"bytes_per_second", rs.bytes_per_second()},
          {"total_shards_repaired", rs.total_shards_repaired()},
          {"total_bytes_repaired", rs.total_bytes_repaired()},
          {"last_active_epoch", rs.last_active_epoch()},
          {"last_active_bytes", rs.last_active_bytes()},
          {"last_active_bytes_per_second", rs.last_active_bytes_per_second()},
          {"total_orphan_shards_deleted", rs.total_orphan_shards_deleted()},
          {"total_orphans_collected", rs.total_orphans_collected()},
          {"orphans_pending", rs.orphans_pending()},
          {"total_deleted_container_shards", rs.total_deleted_container_shards()},
          {"total_deleted_containers_emptied", rs.total_deleted_containers_emptied()},
          {"deleted_containers_pending", rs.deleted_containers_pending()},
          {"total_tombstones_collected", rs.total_tombstones_collected()},
          {"tombstones_pending", rs.tombstones_pending()}};
}

json TargetJson(const v1::Target& t, const std::string& transport) {
  return {{"id", t.id()}, {"uuid", t.uuid()},
          {"state", StateName(t)},
          {"recovering", t.recovering() || t.recovering_containers_size() > 0},
          {"recovering_all", t.recovering()}, {"recovering_containers", RecoveringIds(t)},
          {"address", t.address()}, {"metrics", t.metrics_address()},
          {"fault_domain", t.fault_domain()}, {"capacity_bytes", t.capacity_bytes()},
          {"used_bytes", t.used_bytes()}, {"live_bytes", t.live_bytes()},
          {"dead_bytes", DeadBytes(t)}, {"free_bytes", FreeBytes(t)},
          {"corrupt_shard_count", t.corrupt_shard_count()},
          {"corrupt_shards", std::vector<std::string>(t.corrupt_shards().begin(), t.corrupt_shards().end())},
          {"transport", transport}};
}

void PrintStatusJson(const GlobalOptions& g, const StatusView& v) {
  const v1::ClusterMap& map = v.map;
  json j = {{"mgmt", g.mgmt}, {"mgmt_metrics", v.st.metrics_address()}, {"leader", v.st.leader_address()},
            {"epoch", map.epoch()},
            {"placement_epoch", map.placement_epoch()},
            {"settled_placement_epoch", map.settled_placement_epoch()}, {"targets_up", v.up},
            {"targets_down", v.down}, {"targets_lost", v.lost}, {"containers", v.st.containers()},
            {"targets", json::array()}, {"repair", RepairJson(v.st.repair())},
            {"lost_objects", v.st.lost_objects()}, {"lost", LostJson(v)}};
  for (const auto& t : map.targets()) j["targets"].push_back(TargetJson(t, v.transport(t.id())));
  PrintJson(j);
}

// The first line (mgmt, its metrics, epochs, counts), and a line on data moves a join left
// unfinished.
void PrintSummary(const GlobalOptions& g, const StatusView& v) {
  const v1::MgmtStatus& st = v.st;
  const v1::ClusterMap& map = v.map;
  const std::string metrics = st.metrics_address().empty() ? "" : ", metrics " + st.metrics_address();
  std::printf("mgmt %s (leader %s%s)  epoch %llu (placement %llu)  targets %d up, %d down%s  containers %llu\n",
              g.mgmt.c_str(), st.leader_address().empty() ? g.mgmt.c_str() : st.leader_address().c_str(),
              metrics.c_str(),
              static_cast<unsigned long long>(map.epoch()), static_cast<unsigned long long>(map.placement_epoch()),
              v.up, v.down, v.lost ? (", " + std::to_string(v.lost) + " lost").c_str() : "",
              static_cast<unsigned long long>(st.containers()));
  bool unsettled_join = false;
  for (const auto& t : map.targets()) {
    unsettled_join |= t.state() != v1::TARGET_STATE_LOST && t.joined_epoch() > map.settled_placement_epoch();
  }
  if (unsettled_join) {
    std::printf("data moves: repair has not yet moved every shard to the placement of epoch %llu (done up to "
                "%llu): a target joined; reads also look where earlier placements put shards\n",
                static_cast<unsigned long long>(map.placement_epoch()),
                static_cast<unsigned long long>(map.settled_placement_epoch()));
  }
}

// Repair's progress, and what its garbage collections did (only those that did something).
void PrintRepair(const v1::RepairStatus& rs) {
  if (rs.state().empty()) return;
  // The totals take in a pass when it ends well ("idle"); while one runs, or after one
  // failed, its own counts are not in them yet.
  const bool folded = rs.state() == "idle";
  const uint64_t all_shards = rs.total_shards_repaired() + (folded ? 0 : rs.shards_repaired());
  const uint64_t all_bytes = rs.total_bytes_repaired() + (folded ? 0 : rs.bytes_repaired());
  std::printf("repair %s: %llu/%llu stripes checked, %llu shards (%s) rewritten at %s/s, %llu unrecoverable; "
              "%llu passes, %llu shards (%s) rewritten in all\n",
              rs.state().c_str(), static_cast<unsigned long long>(rs.stripes_checked()),
              static_cast<unsigned long long>(rs.stripes_total()),
              static_cast<unsigned long long>(rs.shards_repaired()),
              HumanBytes(static_cast<double>(rs.bytes_repaired())).c_str(),
              HumanBytes(rs.bytes_per_second()).c_str(),
              static_cast<unsigned long long>(rs.stripes_unrecoverable()),
              static_cast<unsigned long long>(rs.passes()),
              static_cast<unsigned long long>(all_shards), HumanBytes(static_cast<double>(all_bytes)).c_str());
  if (rs.total_orphan_shards_deleted() > 0 || rs.orphans_pending() > 0) {
    std::printf("orphans (stripes no object names): %llu shard(s) of %llu object version(s) deleted, %llu waiting "
                "out the grace period\n",
                static_cast<unsigned long long>(rs.total_orphan_shards_deleted()),
                static_cast<unsigned long long>(rs.total_orphans_collected()),
                static_cast<unsigned long long>(rs.orphans_pending()));
  }
  if (rs.total_deleted_container_shards() > 0 || rs.deleted_containers_pending() > 0) {
    std::printf("deleted containers: %llu shard(s) of %llu container(s) deleted, %llu container(s) waiting out the "
                "grace period\n",
                static_cast<unsigned long long>(rs.total_deleted_container_shards()),
                static_cast<unsigned long long>(rs.total_deleted_containers_emptied()),
                static_cast<unsigned long long>(rs.deleted_containers_pending()));
  }
  if (rs.total_tombstones_collected() > 0 || rs.tombstones_pending() > 0) {
    std::printf("tombstones (deleted objects): %llu removed, %llu waiting out the grace period\n",
                static_cast<unsigned long long>(rs.total_tombstones_collected()),
                static_cast<unsigned long long>(rs.tombstones_pending()));
  }
}

// One row per target; a '*' after the state marks a recovering one.
void PrintTargetTable(const StatusView& v) {
  std::printf("%-4s %-5s %-22s %-22s %10s %10s %10s %10s %10s  %s\n", "ID", "STATE", "ADDRESS", "METRICS",
              "CAPACITY", "USED", "LIVE", "DEAD", "FREE", "TRANSPORT");
  auto h = [](uint64_t b) { return HumanBytes(static_cast<double>(b)); };
  for (const auto& t : v.map.targets()) {
    const std::string state =
        std::string(StateName(t)) + (t.recovering() || t.recovering_containers_size() > 0 ? "*" : "");
    std::printf("%-4u %-5s %-22s %-22s %10s %10s %10s %10s %10s  %s\n", t.id(), state.c_str(), t.address().c_str(),
                t.metrics_address().c_str(), h(t.capacity_bytes()).c_str(), h(t.used_bytes()).c_str(), h(t.live_bytes()).c_str(),
                h(DeadBytes(t)).c_str(), h(FreeBytes(t)).c_str(), v.transport(t.id()).c_str());
  }
}

// Why the targets marked '*' are recovering, then the targets that know of corrupt shards.
void PrintTargetNotes(const v1::ClusterMap& map) {
  for (const auto& t : map.targets()) {
    if (t.recovering()) {
      std::printf("target %u*: recovering (restarted or missed writes): no protected reads from it until repair "
                  "has checked it\n",
                  t.id());
    } else if (t.recovering_containers_size() > 0) {
      std::string ids;
      for (uint64_t id : RecoveringIds(t)) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      std::printf("target %u*: missed writes to container id %s: no reads of %s from it until repair has checked "
                  "it\n",
                  t.id(), ids.c_str(), t.recovering_containers_size() > 1 ? "them" : "it");
    }
  }
  for (const auto& t : map.targets()) {
    if (t.corrupt_shard_count() == 0) continue;
    std::printf("target %u: %llu corrupt shard(s) found by scrub or reads, e.g. %s\n", t.id(),
                static_cast<unsigned long long>(t.corrupt_shard_count()),
                t.corrupt_shards().empty() ? "?" : t.corrupt_shards(0).c_str());
  }
}

int RunStatus(const GlobalOptions& g) {
  auto v = FetchStatus(g);
  if (!v.ok()) return ReportError(v.status(), g.json);
  if (g.json) {
    PrintStatusJson(g, *v);
    return 0;
  }
  PrintSummary(g, *v);
  PrintLost(*v);
  PrintRepair(v->st.repair());
  PrintTargetTable(*v);
  PrintTargetNotes(v->map);
  return 0;
}

}  // namespace

void AddStatusCommands(CLI::App& root, std::vector<Command>& out) {
  auto g = std::make_shared<GlobalOptions>();
  CLI::App* status = root.add_subcommand("status", "show mgmt, the cluster map and every target");
  AddSetting(*status, "mgmt", &g->mgmt, "mgmt address (host:port)");
  status->add_flag("--json", g->json, "print as JSON");
  AddTlsSettings(*status, &g->tls);
  out.push_back({status, [g] { return RunStatus(*g); }});

  AddOutCommand(root, out);
}

}  // namespace penstock::cli
