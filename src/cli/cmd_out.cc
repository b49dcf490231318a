// `penstock out ID`: declares a target lost for good (its slots move, repair rebuilds its
// shards on the others). First mgmt says what that would lose (AssessTargetLoss): objects of
// containers that keep one copy, stripes beyond their redundancy's tolerance. When that is not
// nothing, `out` prints it and refuses unless --force-data-loss; forced, the lost objects are
// recorded (status counts them, ls marks them, reads answer kDataLoss naming the target).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "common/config.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock::cli {

using nlohmann::json;

namespace {

struct OutFlags {
  GlobalOptions g;
  uint32_t id = 0;
  bool force_data_loss = false;
};

// Names printed per container; --json has them all.
constexpr int kNamesShown = 10;

json LossJson(const v1::LossReport& loss) {
  json containers = json::array();
  for (const v1::ContainerLoss& c : loss.containers()) {
    json names = json::array();
    for (const v1::LostObject& o : c.lost()) names.push_back(o.name());
    containers.push_back({{"container", c.container()}, {"redundancy", c.redundancy()}, {"objects", c.objects()},
                          {"bytes", c.bytes()}, {"names", names}, {"unlisted", c.unlisted()}});
  }
  return json{{"target", loss.target_id()}, {"target_up", loss.target_up()}, {"containers", containers}};
}

void PrintLoss(const v1::LossReport& loss, const char* verb) {
  std::printf("declaring target %u lost %s:\n", loss.target_id(), verb);
  for (const v1::ContainerLoss& c : loss.containers()) {
    std::printf("  container '%s' (%s):", c.container().c_str(), c.redundancy().c_str());
    if (c.objects() > 0) {
      std::printf(" %llu objects (%s):", static_cast<unsigned long long>(c.objects()), HumanBytes(c.bytes()).c_str());
      for (int i = 0; i < c.lost_size() && i < kNamesShown; ++i) std::printf(" %s", c.lost(i).name().c_str());
      if (c.lost_size() > kNamesShown) std::printf(" ... (%d more)", c.lost_size() - kNamesShown);
    }
    if (c.unlisted()) {
      std::printf("%s the objects whose only head copy target %u holds (it is down, so they cannot be named)",
                  c.objects() > 0 ? " and" : "", loss.target_id());
    }
    std::printf("\n");
  }
}

int RunOut(const OutFlags& f) {
  auto mc = MgmtClient::Connect(f.g.mgmt, std::chrono::milliseconds(60000), f.g.tls);
  if (!mc.ok()) return ReportError(mc.status(), f.g.json);
  (*mc)->set_api_key(f.g.api_key);
  v1::AssessTargetLossRequest ask;
  ask.set_target_id(f.id);
  auto loss = (*mc)->AssessTargetLoss(ask);
  if (!loss.ok() && !f.force_data_loss) return ReportError(loss.status(), f.g.json);
  if (loss.ok() && !loss->containers().empty() && !f.force_data_loss) {
    if (!f.g.json) PrintLoss(*loss, "would lose");
    Status refused = FailedPrecondition(
        "refusing to declare target " + std::to_string(f.id) + " lost: that loses the data above. Bring target " +
        std::to_string(f.id) + " back if you can; to declare it lost anyway, run `penstock out " +
        std::to_string(f.id) + " --force-data-loss` (the objects are then reported lost)");
    if (f.g.json) {
      PrintJson(json{{"target", f.id}, {"state", "refused"}, {"error", refused.message()}, {"loss", LossJson(*loss)}});
      return 1;
    }
    return ReportError(refused, false);
  }
  v1::MarkTargetLostRequest req;
  req.set_target_id(f.id);
  req.set_force_data_loss(f.force_data_loss);
  auto r = (*mc)->MarkTargetLost(req);
  if (!r.ok()) return ReportError(r.status(), f.g.json);
  if (f.g.json) {
    PrintJson(json{{"target", f.id}, {"state", "lost"}, {"epoch", r->epoch()}, {"loss", LossJson(r->loss())}});
    return 0;
  }
  if (!r->loss().containers().empty()) PrintLoss(r->loss(), "lost");
  std::printf("target %u declared lost (epoch %llu); mgmt rebuilds what the other targets can make up for — follow "
              "it with `penstock status`\n",
              f.id, static_cast<unsigned long long>(r->epoch()));
  return 0;
}

}  // namespace

void AddOutCommand(CLI::App& root, std::vector<Command>& out) {
  auto of = std::make_shared<OutFlags>();
  CLI::App* o = root.add_subcommand("out", "declare a target lost for good: its shards are rebuilt on the others");
  o->add_option("ID", of->id, "target id (see `penstock status`)")->required();
  o->add_flag("--force-data-loss", of->force_data_loss,
              "declare it lost even when that loses data (objects in containers with one copy, stripes beyond "
              "their redundancy): they are then reported lost");
  AddSetting(*o, "mgmt", &of->g.mgmt, "mgmt address (host:port)");
  AddSetting(*o, "api-key", &of->g.api_key, "the admin API key (clusters run with --auth)");
  AddTlsSettings(*o, &of->g.tls);
  o->add_flag("--json", of->g.json, "print the result (and what is lost) as JSON");
  out.push_back({o, [of] { return RunOut(*of); }});
}

}  // namespace penstock::cli
