// session.cc — see session.h.
#include "fuse/session.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "fuse/mount_context.h"

namespace penstock::fuse {

namespace {

constexpr unsigned kMaxRequestBytes = 1u << 20;  // reads, writes and readahead: 1 MiB requests

void Init(void*, fuse_conn_info* conn) {
  conn->max_write = kMaxRequestBytes;  // libfuse lowers it to its buffer (1 MiB) when needed
  conn->max_readahead = kMaxRequestBytes;
  conn->max_background = 64;  // readahead and async reads in flight
  conn->congestion_threshold = 48;
  conn->time_gran = 1;  // nanosecond times
  // The kernel sends O_TRUNC with open instead of a separate setattr; parallel lookups in one
  // directory; readdirplus when someone looks at attributes.
  conn->want |= conn->capable & (FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_READDIRPLUS |
                                 FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ASYNC_READ | FUSE_CAP_AUTO_INVAL_DATA);
  // Close-to-open needs every write to reach the daemon when it happens (no writeback cache).
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

fuse_lowlevel_ops Operations() {
  fuse_lowlevel_ops ops{};
  ops.init = Init;
  SetNodeOps(ops);
  SetFileOps(ops);
  SetDirOps(ops);
  SetXattrOps(ops);
  return ops;
}

// The -o string for libfuse: the kernel checks permissions (default_permissions), the mount is
// named after the container in /proc/mounts and df, then the caller's own options.
std::string OptionString(const MountOptions& o) {
  std::string s = "default_permissions,fsname=penstock:" + o.container + ",subtype=penstock";
  if (o.read_only) s += ",ro";
  for (const std::string& extra : o.fuse_options) s += "," + extra;
  return s;
}

void UnblockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

// The kernel reads ahead only 128 KiB on a FUSE mount whatever INIT says; raising the mount's
// own read_ahead_kb (as root) lets sequential reads go in 1 MiB requests. Waits for the mount to
// answer first (INIT sets the value too), so it runs on a thread of its own beside the loop.
void RaiseReadahead(const std::string& mountpoint) {
  struct stat st {};
  if (::stat(mountpoint.c_str(), &st) != 0) return;
  const std::string path = "/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" +
                           std::to_string(minor(st.st_dev)) + "/read_ahead_kb";
  std::ofstream f(path);
  f << kMaxRequestBytes / 1024 << "\n";
  f.flush();
  if (!f) PS_LOG_DEBUG("fuse: cannot raise {} (not root?): reads ahead stay at the kernel's default", path);
}

// Mounts and runs the loop on a made session.
Status Run(fuse_session* se, const MountOptions& o, const std::function<void(const Status&)>& ready) {
  if (fuse_set_signal_handlers(se) != 0) return Internal("cannot install the mount's signal handlers");
  if (fuse_session_mount(se, o.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    return FailedPrecondition("cannot mount on '" + o.mountpoint + "' (libfuse said why above)");
  }
  ready(OkStatus());
  std::thread tune(RaiseReadahead, o.mountpoint);
  UnblockSignals();
  fuse_loop_config config{};
  config.clone_fd = 0;
  config.max_idle_threads = 10;
  const int rc = fuse_session_loop_mt(se, &config);
  tune.join();
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  // rc > 0: the signal that ended it (a normal end); < 0: an error reading /dev/fuse.
  if (rc < 0) return Unavailable("the mount at '" + o.mountpoint + "' ended with error " + std::to_string(-rc));
  return OkStatus();
}

}  // namespace

Status ServeSession(fs::FileSystem& fs, const MountOptions& o, const std::function<void(const Status&)>& ready) {
  MountContext ctx{.fs = fs, .read_only = o.read_only, .attr_timeout = o.attr_timeout,
                   .entry_timeout = o.entry_timeout, .session = nullptr, .open_files = {}};
  const std::string opts = OptionString(o);
  std::vector<const char*> argv = {"penstock", "-o", opts.c_str()};
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  const fuse_lowlevel_ops ops = Operations();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &ctx);
  if (se == nullptr) {
    Status s = InvalidArgument("libfuse refused the mount options '" + opts + "' (it said why above)");
    ready(s);
    return s;
  }
  ctx.session = se;
  Status s = Run(se, o, ready);
  if (!s.ok()) ready(s);  // ready() ignores a second report
  fuse_session_destroy(se);
  // Files the kernel never released (a signal or lazy unmount with files open): their writes
  // are published now. (The handles the kernel held are never freed: the process is ending.)
  ctx.open_files.CloseAll();
  PS_LOG_INFO("fuse: '{}' unmounted", o.mountpoint);
  return s;
}

}  // namespace penstock::fuse
