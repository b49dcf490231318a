// mount.cc — Mount(): checks, the background fork, the cluster connection, then the session.
#include "fuse/mount.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/log.h"
#include "fuse/background.h"
#include "fuse/mount_checks.h"
#include "fuse/session.h"
#include "penstock/fs.h"

namespace penstock::fuse {

namespace {

// Blocks the signals that end a mount in this thread, before the client starts its threads,
// so that they inherit the mask and only the session's thread takes the signals.
void BlockEndingSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// The file system of the container, with the fix named when it has none.
Result<std::unique_ptr<fs::FileSystem>> OpenFileSystem(Client& client, const std::string& container) {
  auto fs = fs::FileSystem::Open(client, container);
  if (fs.ok() || fs::ErrnoOf(fs.status()) != ENOENT) return fs;
  return NotFound("cannot mount container '" + container + "': " + fs.status().message() +
                  "; a file system container is made with `penstock container create " + container + " --type fs`");
}

// Connects, opens and serves; `ready` hears how starting went.
Status ConnectAndServe(const MountOptions& o, const std::function<void(const Status&)>& ready) {
  BlockEndingSignals();
  auto client = Client::Connect(o.client);
  if (!client.ok()) {
    ready(client.status());
    return client.status();
  }
  auto fs = OpenFileSystem(**client, o.container);
  if (!fs.ok()) {
    ready(fs.status());
    return fs.status();
  }
  return ServeSession(**fs, o, ready);
}

}  // namespace

Status Mount(const MountOptions& given, int* daemon_pid) {
  MountOptions o = given;
  o.mountpoint = AbsolutePath(given.mountpoint);
  if (!o.log_file.empty()) o.log_file = AbsolutePath(o.log_file);
  if (Status s = CheckFuseAvailable(); !s.ok()) return s;
  if (Status s = CheckMountpoint(o.mountpoint); !s.ok()) return s;
  if (o.foreground) {
    return ConnectAndServe(o, [&](const Status& st) {
      if (!st.ok()) return;
      std::fprintf(stderr, "penstock: serving '%s' at %s; Ctrl-C or `penstock umount %s` ends it\n",
                   o.container.c_str(), o.mountpoint.c_str(), o.mountpoint.c_str());
      std::fflush(stderr);
    });
  }
  auto readiness = Fork();
  if (!readiness.ok()) return readiness.status();
  if (!readiness->in_child()) {  // the parent: the mount is ready
    if (daemon_pid != nullptr) *daemon_pid = readiness->child_pid();
    return OkStatus();
  }
  Readiness r = std::move(*readiness);
  // The daemon holds no directory busy (a working directory inside another mount would keep
  // that one from unmounting).
  if (::chdir("/") != 0) PS_LOG_WARN("cannot change the mount daemon's directory to /");
  bool served = false;  // the parent heard OK: later errors go to the log
  Status s = ConnectAndServe(o, [&](const Status& st) {
    if (!r.in_child()) return;
    r.Report(st);
    served = st.ok();
    if (served) Readiness::DetachOutput(o.log_file);
  });
  if (!s.ok() && served) PS_LOG_ERROR("mount of '{}' at '{}': {}", o.container, o.mountpoint, s.ToString());
  // The child never returns into the command line's code: its parent has answered already.
  std::fflush(nullptr);
  ::_exit(s.ok() ? 0 : 1);
}

}  // namespace penstock::fuse
