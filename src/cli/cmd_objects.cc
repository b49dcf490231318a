// Client tools: `penstock container create|ls|rm`, `put`, `get`, `ls`, `stat`, `rm`.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/dataset.h"
#include "cli/destination.h"
#include "cli/interrupt.h"
#include "cli/object_stream.h"
#include "cli/progress.h"
#include "client/lost_objects.h"
#include "common/config.h"
#include "common/log.h"
#include "penstock/client.h"
#include "penstock/fs.h"

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
  std::string prefix;  // ls --prefix
  bool force = false;
  bool progress = false;
  bool quiet = false;
  bool recursive = false;  // put -r / get -r
  unsigned jobs = 16;
  bool long_format = false;  // ls -l
  std::string type = "object";  // container create --type: object | fs
};

Result<std::unique_ptr<Client>> Connect(const GlobalOptions& g, unsigned stripes_in_flight = 0) {
  return ConnectClient(g, stripes_in_flight);
}

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
  if (f.type == "fs") {
    if (Status s = fs::FileSystem::Format(**c, f.container); !s.ok()) {
      return ReportError(s.WithContext("container '" + f.container + "' was created, but writing its file system "
                                       "failed; retry with `penstock fs format --container " + f.container + "`"),
                         g.json);
    }
  }
  if (g.json) {
    PrintJson(json{{"id", info->id}, {"name", info->name}, {"type", f.type}, {"redundancy", info->redundancy.ToString()},
                   {"min_durable", info->redundancy.quorum()}, {"default_redundancy", f.redundancy.empty()},
                   {"stripe_unit", info->stripe_unit}});
  } else {
    std::cout << "created " << (f.type == "fs" ? "file system " : "") << "container '" << info->name << "' (id "
              << info->id << ", stripe unit " << HumanBytes(static_cast<double>(info->stripe_unit)) << ", redundancy "
              << info->redundancy.ToString() << DefaultNote(f, info->redundancy) << ")\n";
    if (f.type == "fs") std::cout << "mount it with `penstock mount " << info->name << " DIR`\n";
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

// A command line that cannot work: one line on stderr, exit code 2 (as for bad flags).
int UsageError(const std::string& message) {
  std::fprintf(stderr, "penstock: error: %s (see --help)\n", message.c_str());
  return 2;
}

// Ctrl-C during a single put or get: says what was left, exit code 130 (as the shell's).
int InterruptedExit(const char* what) {
  std::fprintf(stderr, "penstock: error: interrupted; %s\n", what);
  return 130;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TreeOptions ToTreeOptions(const GlobalOptions& g, const ObjectFlags& f, const std::string& dir,
                          const std::string& prefix) {
  TreeOptions o{f.container, dir, prefix, f.jobs, f.progress, f.quiet, g.json};
  while (o.dir.size() > 1 && o.dir.back() == '/') o.dir.pop_back();
  return o;
}

int Put(const GlobalOptions& g, const ObjectFlags& f) {
  if (f.recursive) {
    auto c = Connect(g, StripesPerJob(f.jobs));
    if (!c.ok()) return ReportError(c.status(), g.json);
    return RunPutTree(**c, ToTreeOptions(g, f, f.local, f.name));
  }
  if (f.name.empty()) {
    return UsageError("put needs the object's NAME: `penstock put LOCAL NAME --container " +
                      (f.container.empty() ? std::string("C") : f.container) + "` (or `put -r DIR [PREFIX]`)");
  }
  if (struct stat st; f.local != "-" && ::stat(f.local.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return UsageError("'" + f.local + "' is a directory; store what it holds with `penstock put -r " + f.local +
                      " [PREFIX]`");
  }
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  std::string path = f.local;
  int stdin_fd = -1;
  if (f.local == "-") {
    InstallInterruptHandler();
    auto spooled = SpoolStdin(&stdin_fd);
    if (!spooled.ok()) {
      return Interrupted() ? InterruptedExit("nothing was stored") : ReportError(spooled.status(), g.json);
    }
    path = *spooled;
  }
  TransferProgress progress(ChooseProgressMode(f.quiet, f.progress, ProgressMode::kNone), "put");
  uint64_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  Status s = (*c)->PutFile(f.container, f.name, path, [&](uint64_t done, uint64_t total) {
    bytes = total;
    progress(done, total);
  });
  if (stdin_fd >= 0) ::close(stdin_fd);
  if (!s.ok()) return ReportError(s, g.json);
  ReportTransfer(g, f.quiet, "put", f.name, bytes, SecondsSince(start));
  return 0;
}

// A read of f.name that failed: said to be lost, naming the target, when mgmt recorded it lost
// (Stat marks it); else named with the object.
Status ExplainLost(Client& client, const ObjectFlags& f, Status failed) {
  failed = failed.WithContext("reading object '" + f.name + "' in container '" + f.container + "'");
  if (failed.code() != StatusCode::kDataLoss) return failed;
  auto info = client.Stat(f.container, f.name);
  if (!info.ok() || info->lost.empty()) return failed;
  return LostObjectError(f.container, f.name, info->lost);
}

// Reads f.name into the regular file (or new file) f.local names, through a temporary file
// beside it and a rename (Client::GetFile); a symbolic link keeps pointing at the new file, and
// a file's permissions are kept.
Status GetIntoRegularFile(Client& client, const ObjectFlags& f, const ProgressFn& progress) {
  std::string path = f.local;
  struct stat before {};
  const bool existed = ::stat(f.local.c_str(), &before) == 0;
  if (existed) {
    char* real = ::realpath(f.local.c_str(), nullptr);
    if (real == nullptr) return ErrnoStatus(errno, "cannot resolve '" + f.local + "'");
    path = real;
    std::free(real);
  }
  Status s = client.GetFile(f.container, f.name, path, progress);
  if (!s.ok()) return s;
  if (existed && ::chmod(path.c_str(), before.st_mode & 07777) != 0) {
    return ErrnoStatus(errno, "cannot restore the permissions of '" + path + "'");
  }
  return OkStatus();
}

int Get(const GlobalOptions& g, const ObjectFlags& f) {
  if (f.recursive) {
    auto c = Connect(g);
    if (!c.ok()) return ReportError(c.status(), g.json);
    return RunGetTree(**c, ToTreeOptions(g, f, f.local, f.name));
  }
  if (f.local == "-" && g.json) return UsageError("--json prints on stdout, which `get NAME -` writes the object to");
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto obj = (*c)->Open(f.container, f.name);
  if (!obj.ok()) return ReportError(obj.status(), g.json);
  auto chunk = ReadChunkBytes(**c, f.container);
  if (!chunk.ok()) return ReportError(chunk.status(), g.json);
  auto dest = Destination::Open(f.local);
  if (!dest.ok()) return ReportError(dest.status(), g.json);
  InstallInterruptHandler();
  TransferProgress progress(ChooseProgressMode(f.quiet, f.progress, ProgressMode::kNone), "get");
  auto start = std::chrono::steady_clock::now();
  if (!(*dest)->in_place()) {
    (*dest)->Abort();  // a regular file: the whole-object read (windowed, degraded where needed)
    Status s = GetIntoRegularFile(**c, f, std::ref(progress));
    if (!s.ok()) return Interrupted() ? InterruptedExit("nothing was written") : ReportError(s, g.json);
    struct stat got {};
    ::stat(f.local.c_str(), &got);
    ReportTransfer(g, f.quiet, "get", f.name, static_cast<uint64_t>(got.st_size), SecondsSince(start));
    return 0;
  }
  ObjectReader reader(*chunk, ClientOptions{}.max_inflight_stripes);  // as many reads in flight as a put has
  auto bytes = reader.Read(**obj, **dest, std::ref(progress));
  Status s = bytes.ok() ? (*dest)->Commit() : ExplainLost(**c, f, bytes.status());
  if (!s.ok()) {
    (*dest)->Abort();
    if (!Interrupted()) return ReportError(s, g.json);
    return InterruptedExit((*dest)->in_place() ? "part of the object was written" : "nothing was written");
  }
  ReportTransfer(g, f.quiet, "get", f.name, *bytes, SecondsSince(start));
  return 0;
}

json ObjectJson(const ObjectInfo& o) {
  json j = {{"name", o.name}, {"size", o.size}, {"mtime_ms", o.mtime_ms}, {"mtime", LocalIsoTime(o.mtime_ms)}};
  if (!o.lost.empty()) j["lost"] = o.lost;
  return j;
}

int List(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto list = (*c)->List(f.container, ListOptions{f.prefix});
  if (!list.ok()) return ReportError(list.status(), g.json);
  if (g.json) {
    json j = json::array();
    for (const auto& o : *list) j.push_back(ObjectJson(o));
    PrintJson(j);
    return 0;
  }
  for (const auto& o : *list) {
    const std::string lost = o.lost.empty() ? "" : "  (lost: " + o.lost + ")";
    if (f.long_format) {
      std::printf("%12llu  %s  %s%s\n", static_cast<unsigned long long>(o.size), LocalIsoTime(o.mtime_ms).c_str(),
                  o.name.c_str(), lost.c_str());
    } else {
      std::printf("%12llu  %s%s\n", static_cast<unsigned long long>(o.size), o.name.c_str(), lost.c_str());
    }
  }
  return 0;
}

int StatObject(const GlobalOptions& g, const ObjectFlags& f) {
  auto c = Connect(g);
  if (!c.ok()) return ReportError(c.status(), g.json);
  auto info = (*c)->Stat(f.container, f.name);
  if (!info.ok()) return ReportError(info.status(), g.json);
  if (g.json) {
    json j = ObjectJson(*info);
    j["stripe_unit"] = info->stripe_unit;
    PrintJson(j);
  } else {
    std::printf("name %s\nsize %llu (%s)\nstripe_unit %s\nmtime %s\n", info->name.c_str(),
                static_cast<unsigned long long>(info->size), HumanBytes(static_cast<double>(info->size)).c_str(),
                HumanBytes(static_cast<double>(info->stripe_unit)).c_str(), LocalIsoTime(info->mtime_ms).c_str());
    if (!info->lost.empty()) std::printf("lost %s\n", info->lost.c_str());
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

void AddContainerFlag(CLI::App& app, ObjectFlags& f) {
  AddSetting(app, "container", &f.container, "container name")->required();
}

// put and get: the container, -r, --jobs and how much they print.
void AddTransferFlags(CLI::App& app, ObjectFlags& f, const char* recursive_help) {
  AddContainerFlag(app, f);
  app.add_flag("-r,--recursive", f.recursive, recursive_help);
  AddSetting(app, "jobs", &f.jobs, "with -r: files moved at once (over one connection to the cluster)")
      ->check(CLI::Range(1u, 1024u));
  app.add_flag("--progress", f.progress, "show progress even when stderr is not a terminal");
  app.add_flag("--quiet", f.quiet, "print nothing on success");
}

}  // namespace

Result<std::unique_ptr<Client>> ConnectClient(const GlobalOptions& g, unsigned stripes_in_flight) {
  InitLogging("penstock", g.log_level).IgnoreError();
  ClientOptions o = ToClientOptions(g);
  if (stripes_in_flight > 0) o.max_inflight_stripes = stripes_in_flight;
  return Client::Connect(o);
}

void AddClientFlags(CLI::App& app, GlobalOptions& g) {
  AddSetting(app, "mgmt", &g.mgmt, "mgmt address (host:port)");
  app.add_flag("--json", g.json, "machine-readable output");
  AddSetting(app, "log-level", &g.log_level, "client log level");
  AddSetting(app, "api-key", &g.api_key, "the tenant's API key (clusters run with --auth need one)");
  AddTlsSettings(app, &g.tls);
  AddDataPlaneSettings(app, g);
}

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
    app->add_option("--type", st->f.type,
                    "object (flat object names) or fs (a POSIX file system: `penstock mount`, `penstock fs`)")
        ->check(CLI::IsMember({"object", "fs"}))
        ->capture_default_str();
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
    auto [app, st] = add(root, "put", "store a local file (- for stdin) as an object, or a directory with -r", Put);
    app->add_option("LOCAL", st->f.local, "file to store, - for standard input, or with -r a directory")->required();
    app->add_option("NAME", st->f.name, "object name; with -r the PREFIX of the names (default: none)");
    AddTransferFlags(*app, st->f, "store every regular file under the directory LOCAL as PREFIX/path");
  }
  {
    auto [app, st] = add(root, "get", "fetch an object into a local file (- for stdout), or many with -r", Get);
    app->add_option("NAME", st->f.name, "object name; with -r the PREFIX of the objects to fetch")->required();
    app->add_option("LOCAL", st->f.local, "file to write, - for standard output, or with -r a directory")
        ->required();
    AddTransferFlags(*app, st->f, "fetch every object named PREFIX/... into the directory LOCAL, recreating the tree");
  }
  {
    auto [app, st] = add(root, "ls", "list the objects of a container", List);
    AddContainerFlag(*app, st->f);
    AddSetting(*app, "prefix", &st->f.prefix, "only objects whose names start with this");
    app->add_flag("-l,--long", st->f.long_format, "also show each object's time (local, ISO 8601)");
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
