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
  std::string redundancy = "none";
  bool force = false;
  bool progress = false;
  bool quiet = false;
};

Result<std::unique_ptr<Client>> Connect(const GlobalOptions& g) {
  InitLogging("penstock", g.log_level).IgnoreError();
  ClientOptions o;
  o.mgmt_address = g.mgmt;
  return Client::Connect(o);
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
    std::cout << json{{"op", verb}, {"name", name}, {"bytes", bytes}, {"seconds", secs}, {"mb_per_s", mbps}}.dump()
              << std::endl;
  } else if (!quiet) {
    std::fprintf(stderr, "%s '%s': %s in %.3f s (%.1f MB/s)\n", verb, name.c_str(),
                 HumanBytes(static_cast<double>(bytes)).c_str(), secs, mbps);
  }
}

int ContainerCreate(const GlobalOptions& g, const ObjectFlags& f) {
  ContainerProps props;
  props.redundancy = f.redundancy;
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
    std::cout << json{{"id", info->id}, {"name", info->name}, {"redundancy", info->redundancy},
                      {"stripe_unit", info->stripe_unit}}.dump() << std::endl;
  } else {
    std::cout << "created container '" << info->name << "' (id " << info->id << ", stripe unit "
              << HumanBytes(static_cast<double>(info->stripe_unit)) << ", redundancy " << info->redundancy << ")\n";
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
      j.push_back({{"id", i.id}, {"name", i.name}, {"redundancy", i.redundancy}, {"stripe_unit", i.stripe_unit},
                   {"created_ms", i.created_ms}});
    }
    std::cout << j.dump() << std::endl;
    return 0;
  }
  for (const auto& i : *list) {
    std::printf("%-24s id=%-6llu redundancy=%-8s stripe_unit=%s\n", i.name.c_str(),
                static_cast<unsigned long long>(i.id), i.redundancy.c_str(),
                HumanBytes(static_cast<double>(i.stripe_unit)).c_str());
  }
  return 0;
}

int ContainerRemove(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  if (Status s = (*c)->DeleteContainer(f.container, f.force); !s.ok()) return ReportError(s, g.json);
  if (g.json) std::cout << json{{"removed", f.container}}.dump() << std::endl;
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
    std::cout << j.dump() << std::endl;
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
    std::cout << json{{"name", info->name}, {"size", info->size}, {"stripe_unit", info->stripe_unit},
                      {"mtime_ms", info->mtime_ms}}.dump() << std::endl;
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
  if (g.json) std::cout << json{{"removed", f.name}}.dump() << std::endl;
  return 0;
}

void AddClientFlags(CLI::App& app, GlobalOptions& g) {
  AddSetting(app, "mgmt", &g.mgmt, "mgmt address (host:port)");
  app.add_flag("--json", g.json, "machine-readable output");
  AddSetting(app, "log-level", &g.log_level, "client log level");
}

void AddContainerFlag(CLI::App& app, ObjectFlags& f) {
  AddSetting(app, "container", &f.container, "container name")->required();
}

}  // namespace

void AddObjectCommands(CLI::App& root, GlobalOptions& g, std::vector<Command>& out) {
  auto f = std::make_shared<ObjectFlags>();

  CLI::App* container = root.add_subcommand("container", "create, list and remove containers");
  container->require_subcommand(1);
  CLI::App* cc = container->add_subcommand("create", "create a container");
  cc->add_option("NAME", f->container, "container name")->required();
  AddSetting(*cc, "stripe-unit", &f->stripe_unit, "stripe unit (e.g. 1M)");
  AddSetting(*cc, "redundancy", &f->redundancy, "none (rep:N and ec:K+M come with data protection)");
  AddClientFlags(*cc, g);
  out.push_back({cc, [f, &g] { return ContainerCreate(g, *f); }});
  CLI::App* cl = container->add_subcommand("ls", "list containers");
  AddClientFlags(*cl, g);
  out.push_back({cl, [&g] { return ContainerList(g); }});
  CLI::App* cr = container->add_subcommand("rm", "remove a container");
  cr->add_option("NAME", f->container, "container name")->required();
  cr->add_flag("--force", f->force, "also remove the objects it holds");
  AddClientFlags(*cr, g);
  out.push_back({cr, [f, &g] { return ContainerRemove(g, *f); }});

  CLI::App* put = root.add_subcommand("put", "store a local file as an object");
  put->add_option("LOCAL", f->local, "file to store")->required();
  put->add_option("NAME", f->name, "object name")->required();
  AddContainerFlag(*put, *f);
  put->add_flag("--progress", f->progress, "show progress even when stderr is not a terminal");
  put->add_flag("--quiet", f->quiet, "print nothing on success");
  AddClientFlags(*put, g);
  out.push_back({put, [f, &g] { return Put(g, *f); }});

  CLI::App* get = root.add_subcommand("get", "fetch an object into a local file");
  get->add_option("NAME", f->name, "object name")->required();
  get->add_option("LOCAL", f->local, "file to write")->required();
  AddContainerFlag(*get, *f);
  get->add_flag("--progress", f->progress, "show progress even when stderr is not a terminal");
  get->add_flag("--quiet", f->quiet, "print nothing on success");
  AddClientFlags(*get, g);
  out.push_back({get, [f, &g] { return Get(g, *f); }});

  CLI::App* ls = root.add_subcommand("ls", "list the objects of a container");
  AddContainerFlag(*ls, *f);
  AddClientFlags(*ls, g);
  out.push_back({ls, [f, &g] { return List(g, *f); }});

  CLI::App* stat = root.add_subcommand("stat", "show an object's size and time");
  stat->add_option("NAME", f->name, "object name")->required();
  AddContainerFlag(*stat, *f);
  AddClientFlags(*stat, g);
  out.push_back({stat, [f, &g] { return StatObject(g, *f); }});

  CLI::App* rm = root.add_subcommand("rm", "remove an object");
  rm->add_option("NAME", f->name, "object name")->required();
  AddContainerFlag(*rm, *f);
  AddClientFlags(*rm, g);
  out.push_back({rm, [f, &g] { return Remove(g, *f); }});
}

}  // namespace penstock::cli
