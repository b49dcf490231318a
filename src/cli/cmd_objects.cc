// Client tools: `penstock container create|ls|rm`, `put`, `get`, `ls`, `stat`, `rm`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/config.h"
#include "common/log.h"
#include "penstock/client.h"

namespace penstock::cli {

using nlohmann::json;

namespace {

struct ObjectFlags {
  std::string container;
  std::string name;
  std::string local;
  std::string stripe_unit = "1M";
  std::string redundancy;  // empty: the cluster's default (mgmt picks)
  unsigned min_durable = 0;
  bool force = false;
  bool progress = false;
  bool quiet = false;
};

Result<std::unique_ptr<Client>> Connect(const GlobalOptions& g) {
  InitLogging("penstock", g.log_level).IgnoreError();
  return Client::Connect(ToClientOptions(g));
}

// Progress on stderr: when it is a terminal, or when --progress asks for it.
class Progress {
 public:
  Progress(bool enabled, std::string verb) : enabled_(enabled), verb_(std::move(verb)) {}
  void operator()(uint64_t done, uint64_t total) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (done != total && now - last_ < std::chrono::milliseconds(250)) return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\r%s %s / %s (%3.0f%%) %.0f MB/s   ", verb_.c_str(),
                 HumanBytes(static_cast<double>(done)).c_str(), HumanBytes(static_cast<double>(total)).c_str(),
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 secs > 0 ? static_cast<double>(done) / secs / 1e6 : 0.0);
    if (done == total) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  std::string verb_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

// Summary of a transfer: a line on stderr, or a JSON object on stdout.
void ReportTransfer(const GlobalOptions& g, bool quiet, const char* verb, const std::string& name,
                    uint64_t bytes, double secs) {
  double mbps = secs > 0 ? static_cast<double>(bytes) / secs / 1e6 : 0;
  if (g.json) {
    PrintJson(json{{"op", verb}, {"name", name}, {"bytes", bytes}, {"seconds", secs}, {"mb_per_s", mbps}});
  } else if (!quiet) {
    std::fprintf(stderr, "%s '%s': %s in %.3f s (%.1f MB/s)\n", verb, name.c_str(),
                 HumanBytes(static_cast<double>(bytes)).c_str(), secs, mbps);
  }
}

// ", the cluster's default: give --redundancy none for none" when mgmt chose the scheme; the
// write quorum when the scheme is protected.
std::string DefaultNote(const ObjectFlags& f, const Redundancy& red) {
  std::string note;
  if (red.protected_()) note += ", writes acknowledged on " + std::to_string(red.quorum()) + " durable shards";
  if (f.redundancy.empty()) {
    note += red.protected_() ? "; the cluster's default: --redundancy none for none"
                             : "; the default on a one-target cluster: unprotected";
  }
  return note;
}

int ContainerCreate(const GlobalOptions& g, const ObjectFlags& f) {
  ContainerProps props;
  if (!f.redundancy.empty()) {
    auto red = ParseRedundancy(f.redundancy);
    if (!red.ok()) return ReportError(red.status(), g.json);
    props.redundancy = *red;
  }
  props.min_durable = f.min_durable;
  try {
    props.stripe_unit = ParseSize(f.stripe_unit, "--stripe-unit");
  } catch (const CLI::ValidationError& e) {
    return ReportError(InvalidArgument(e.what()), g.json);
  }
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto info = (*c)->CreateContainer(f.container, props);
  if (!info.ok()) return ReportError(info.status(), g.json);
  if (g.json) {
    PrintJson(json{{"id", info->id}, {"name", info->name}, {"redundancy", info->redundancy.ToString()},
                   {"min_durable", info->redundancy.quorum()}, {"default_redundancy", f.redundancy.empty()},
                   {"stripe_unit", info->stripe_unit}});
  } else {
    std::cout << "created container '" << info->name << "' (id " << info->id << ", stripe unit "
              << HumanBytes(static_cast<double>(info->stripe_unit)) << ", redundancy "
              << info->redundancy.ToString() << DefaultNote(f, info->redundancy) << ")\n";
  }
  return 0;
}

int ContainerList(const GlobalOptions& g) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto list = (*c)->ListContainers();
  if (!list.ok()) return ReportError(list.status(), g.json);
  if (g.json) {
    json j = json::array();
    for (const auto& i : *list) {
      j.push_back({{"id", i.id}, {"name", i.name}, {"redundancy", i.redundancy.ToString()}, {"stripe_unit", i.stripe_unit},
                   {"created_ms", i.created_ms}});
    }
    PrintJson(j);
    return 0;
  }
  for (const auto& i : *list) {
    std::printf("%-24s id=%-6llu redundancy=%-8s stripe_unit=%s\n", i.name.c_str(),
                static_cast<unsigned long long>(i.id), i.redundancy.ToString().c_str(),
                HumanBytes(static_cast<double>(i.stripe_unit)).c_str());
  }
  return 0;
}

int ContainerRemove(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  if (Status s = (*c)->DeleteContainer(f.container, f.force); !s.ok()) return ReportError(s, g.json);
  if (g.json) PrintJson(json{{"removed", f.container}});
  return 0;
}

int Put(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  Progress progress(!f.quiet && (f.progress || ::isatty(2)), "put");
  uint64_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  Status s = (*c)->PutFile(f.container, f.name, f.local, [&](uint64_t done, uint64_t total) {
    bytes = total;
    progress(done, total);
  });
  if (!s.ok()) return ReportError(s, g.json);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ReportTransfer(g, f.quiet, "put", f.name, bytes, secs);
  return 0;
}

int Get(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  Progress progress(!f.quiet && (f.progress || ::isatty(2)), "get");
  uint64_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  Status s = (*c)->GetFile(f.container, f.name, f.local, [&](uint64_t done, uint64_t total) {
    bytes = total;
    progress(done, total);
  });
  if (!s.ok()) return ReportError(s, g.json);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ReportTransfer(g, f.quiet, "get", f.name, bytes, secs);
  return 0;
}

int List(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto list = (*c)->List(f.container);
  if (!list.ok()) return ReportError(list.status(), g.json);
  if (g.json) {
    json j = json::array();
    for (const auto& o : *list) j.push_back({{"name", o.name}, {"size", o.size}, {"mtime_ms", o.mtime_ms}});
    PrintJson(j);
    return 0;
  }
  for (const auto& o : *list) {
    std::printf("%12llu  %s\n", static_cast<unsigned long long>(o.size), o.name.c_str());
  }
  return 0;
}

int StatObject(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto info = (*c)->Stat(f.container, f.name);
  if (!info.ok()) return ReportError(info.status(), g.json);
  if (g.json) {
    PrintJson(json{{"name", info->name}, {"size", info->size}, {"stripe_unit", info->stripe_unit},
                   {"mtime_ms", info->mtime_ms}});
  } else {
    std::printf("name %s\nsize %llu\nstripe_unit %llu\nmtime_ms %lld\n", info->name.c_str(),
                static_cast<unsigned long long>(info->size), static_cast<unsigned long long>(info->stripe_unit),
                static_cast<long long>(info->mtime_ms));
  }
  return 0;
}

int Remove(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  if (Status s = (*c)->Delete(f.container, f.name); !s.ok()) return ReportError(s, g.json);
  if (g.json) PrintJson(json{{"removed", f.name}});
  return 0;
}

void AddClientFlags(CLI::App& app, GlobalOptions& g) {
  AddSetting(app, "mgmt", &g.mgmt, "mgmt address (host:port)");
  app.add_flag("--json", g.json, "machine-readable output");
  AddSetting(app, "log-level", &g.log_level, "client log level");
  AddSetting(app, "api-key", &g.api_key, "the tenant's API key (clusters run with --auth need one)");
  AddTlsSettings(app, &g.tls);
  AddDataPlaneSettings(app, g);
}

void AddContainerFlag(CLI::App& app, ObjectFlags& f) {
  AddSetting(app, "container", &f.container, "container name")->required();
}

}  // namespace

void AddObjectCommands(CLI::App& root, std::vector<Command>& out) {
  // Each subcommand binds its own option state: CLI11 applies environment variables to every
  // subcommand's options, so shared variables would let PENSTOCK_* override a flag.
  struct State {
    GlobalOptions g;
    ObjectFlags f;
  };
  auto add = [&](CLI::App& parent, const char* name, const char* help, auto run) {
    auto st = std::make_shared<State>();
    CLI::App* app = parent.add_subcommand(name, help);
    AddClientFlags(*app, st->g);
    out.push_back({app, [st, run] { return run(st->g, st->f); }});
    return std::make_pair(app, st);
  };

  CLI::App* container = root.add_subcommand("container", "create, list and remove containers");
  container->require_subcommand(1);
  {
    auto [app, st] = add(*container, "create", "create a container", ContainerCreate);
    app->add_option("NAME", st->f.container, "container name")->required();
    AddSetting(*app, "stripe-unit", &st->f.stripe_unit, "stripe unit (e.g. 1M)");
    AddSetting(*app, "redundancy", &st->f.redundancy,
               "none, rep:N (N copies) or ec:K+M (K data cells, M parity); default: rep:3 with 3 or more "
               "targets, rep:2 with 2, none with 1");
    AddSetting(*app, "min-durable", &st->f.min_durable,
               "write quorum: shards durable before a write is acknowledged (K..K+M; default 2 for rep, K+1 for ec)");
  }
  add(*container, "ls", "list containers", [](const GlobalOptions& g, const ObjectFlags&) { return ContainerList(g); });
  {
    auto [app, st] = add(*container, "rm", "remove a container", ContainerRemove);
    app->add_option("NAME", st->f.container, "container name")->required();
    app->add_flag("--force", st->f.force, "also remove the objects it holds");
  }
  {
    auto [app, st] = add(root, "put", "store a local file as an object", Put);
    app->add_option("LOCAL", st->f.local, "file to store")->required();
    app->add_option("NAME", st->f.name, "object name")->required();
    AddContainerFlag(*app, st->f);
    app->add_flag("--progress", st->f.progress, "show progress even when stderr is not a terminal");
    app->add_flag("--quiet", st->f.quiet, "print nothing on success");
  }
  {
    auto [app, st] = add(root, "get", "fetch an object into a local file", Get);
    app->add_option("NAME", st->f.name, "object name")->required();
    app->add_option("LOCAL", st->f.local, "file to write")->required();
    AddContainerFlag(*app, st->f);
    app->add_flag("--progress", st->f.progress, "show progress even when stderr is not a terminal");
    app->add_flag("--quiet", st->f.quiet, "print nothing on success");
  }
  {
    auto [app, st] = add(root, "ls", "list the objects of a container", List);
    AddContainerFlag(*app, st->f);
  }
  {
    auto [app, st] = add(root, "stat", "show an object's size and time", StatObject);
    app->add_option("NAME", st->f.name, "object name")->required();
    AddContainerFlag(*app, st->f);
  }
  {
    auto [app, st] = add(root, "rm", "remove an object", Remove);
    app->add_option("NAME", st->f.name, "object name")->required();
    AddContainerFlag(*app, st->f);
  }
}

}  // namespace penstock::cli
