// `penstock mount CONTAINER MOUNTPOINT` and `penstock umount MOUNTPOINT`: thin mains over
// src/fuse (mount.h).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "common/config.h"
#include "common/log.h"
#include "fuse/mount.h"

namespace penstock::cli {

namespace {

struct MountFlags {
  GlobalOptions g;
  std::string container;
  std::string mountpoint;
  bool foreground = false;
  bool read_only = false;
  std::vector<std::string> options;  // -o, may repeat
  std::string log_file;
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
  bool lazy = false;  // umount
};

int RunMount(const MountFlags& f) {
  InitLogging("penstock-mount", f.g.log_level).IgnoreError();
  fuse::MountOptions o;
  o.client = ToClientOptions(f.g);
  o.container = f.container;
  o.mountpoint = f.mountpoint;
  o.foreground = f.foreground;
  o.read_only = f.read_only;
  o.fuse_options = f.options;
  o.log_file = f.log_file;
  o.attr_timeout = f.attr_timeout;
  o.entry_timeout = f.entry_timeout;
  int pid = 0;
  if (Status s = fuse::Mount(o, &pid); !s.ok()) return ReportError(s, f.g.json);
  if (!f.foreground) {
    if (f.g.json) {
      PrintJson({{"mounted", f.container}, {"mountpoint", f.mountpoint}, {"read_only", f.read_only}, {"pid", pid}});
    } else {
      std::fprintf(stderr, "mounted '%s' at %s%s (process %d); unmount with `penstock umount %s`\n",
                   f.container.c_str(), f.mountpoint.c_str(), f.read_only ? " (read-only)" : "", pid,
                   f.mountpoint.c_str());
    }
  }
  return 0;
}

int RunUmount(const MountFlags& f) {
  if (Status s = fuse::Unmount(f.mountpoint, f.lazy); !s.ok()) return ReportError(s, f.g.json);
  if (f.g.json) PrintJson({{"unmounted", f.mountpoint}});
  return 0;
}

}  // namespace

void AddMountCommands(CLI::App& root, std::vector<Command>& out) {
  {
    auto f = std::make_shared<MountFlags>();
    CLI::App* app = root.add_subcommand(
        "mount",
        "mount a file system container (`container create NAME --type fs`) with FUSE; returns once the mount is "
        "ready and serves it in the background (-f: in this process)");
    AddClientFlags(*app, f->g);
    app->add_option("CONTAINER", f->container, "the file system container")->required();
    app->add_option("MOUNTPOINT", f->mountpoint, "an empty directory")->required();
    app->add_flag("-f,--foreground", f->foreground, "serve in this process until unmounted or Ctrl-C");
    app->add_flag("--read-only", f->read_only, "refuse every change (EROFS)");
    app->add_option("-o", f->options,
                    "more FUSE mount options, comma-separated (e.g. allow_other to let other users in)");
    AddSetting(*app, "log-file", &f->log_file, "where the background mount logs (default: nowhere)");
    AddSetting(*app, "attr-timeout", &f->attr_timeout,
               "seconds the kernel trusts a file's attributes (another client's change shows after this)")
        ->check(CLI::Range(0.0, 3600.0));
    AddSetting(*app, "entry-timeout", &f->entry_timeout,
               "seconds the kernel trusts a name (another client's rename or unlink shows after this)")
        ->check(CLI::Range(0.0, 3600.0));
    out.push_back({app, [f] { return RunMount(*f); }});
  }
  {
    auto f = std::make_shared<MountFlags>();
    CLI::App* app = root.add_subcommand("umount", "unmount a `penstock mount` (its daemon then exits)");
    app->add_option("MOUNTPOINT", f->mountpoint, "where it is mounted")->required();
    app->add_flag("--lazy", f->lazy, "detach it now even while files are open there");
    app->add_flag("--json", f->g.json, "machine-readable output");
    out.push_back({app, [f] { return RunUmount(*f); }});
  }
}

}  // namespace penstock::cli
