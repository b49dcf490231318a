// `penstock tenant create|ls|rm`: tenant administration with the admin API key.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/config.h"
#include "common/log.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock::cli {

using nlohmann::json;

namespace {

struct TenantState {
  GlobalOptions g;
  std::string name;
};

Result<std::unique_ptr<MgmtClient>> ConnectMgmt(const GlobalOptions& g) {
  InitLogging("penstock", g.log_level).IgnoreError();
  PS_ASSIGN_OR_RETURN(auto mc, MgmtClient::Connect(g.mgmt, std::chrono::milliseconds(5000), g.tls));
  mc->set_api_key(g.api_key);
  return mc;
}

int Create(const TenantState& st) {
  auto mc = ConnectMgmt(st.g);
  if (!mc.ok()) return ReportError(mc.status(), st.g.json);
  v1::CreateTenantRequest req;
  req.set_name(st.name);
  auto r = (*mc)->CreateTenant(req);
  if (!r.ok()) return ReportError(r.status(), st.g.json);
  if (st.g.json) {
    PrintJson(json{{"name", r->tenant().name()}, {"id", r->tenant().id()}, {"api_key", r->api_key()}});
  } else {
    std::cout << r->api_key() << std::endl;
    std::cerr << "penstock: tenant '" << st.name << "' created (id " << r->tenant().id()
              << "); the API key above is shown only once" << std::endl;
  }
  return 0;
}

int List(const TenantState& st) {
  auto mc = ConnectMgmt(st.g);
  if (!mc.ok()) return ReportError(mc.status(), st.g.json);
  auto r = (*mc)->ListTenants();
  if (!r.ok()) return ReportError(r.status(), st.g.json);
  if (st.g.json) {
    json a = json::array();
    for (const auto& t : r->tenants()) a.push_back({{"name", t.name()}, {"id", t.id()}, {"created_ms", t.created_ms()}});
    PrintJson(a);
  } else {
    for (const auto& t : r->tenants()) std::cout << t.id() << "\t" << t.name() << std::endl;
  }
  return 0;
}

int Remove(const TenantState& st) {
  auto mc = ConnectMgmt(st.g);
  if (!mc.ok()) return ReportError(mc.status(), st.g.json);
  v1::DeleteTenantRequest req;
  req.set_name(st.name);
  auto r = (*mc)->DeleteTenant(req);
  if (!r.ok()) return ReportError(r.status(), st.g.json);
  if (st.g.json) PrintJson(json{{"removed", st.name}});
  return 0;
}

}  // namespace

void AddTenantCommands(CLI::App& root, std::vector<Command>& out) {
  CLI::App* tenant = root.add_subcommand("tenant", "create, list and revoke tenants (admin key)");
  tenant->require_subcommand(1);
  auto add = [&](const char* name, const char* help, int (*run)(const TenantState&), bool takes_name) {
    auto st = std::make_shared<TenantState>();
    CLI::App* app = tenant->add_subcommand(name, help);
    AddSetting(*app, "mgmt", &st->g.mgmt, "mgmt address (host:port)");
    app->add_flag("--json", st->g.json, "machine-readable output");
    AddSetting(*app, "log-level", &st->g.log_level, "client log level");
    AddSetting(*app, "api-key", &st->g.api_key, "the admin API key");
    AddTlsSettings(*app, &st->g.tls);
    if (takes_name) app->add_option("NAME", st->name, "tenant name")->required();
    out.push_back({app, [st, run] { return run(*st); }});
  };
  add("create", "create a tenant and print its API key (shown once)", Create, true);
  add("ls", "list tenants", List, false);
  add("rm", "delete a tenant and revoke its key and tokens", Remove, true);
}

}  // namespace penstock::cli
