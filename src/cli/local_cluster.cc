#include "cli/local_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <random>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/config.h"
#include "mgmt/tenant_registry.h"

namespace penstock::cli {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ClusterRecordPath(const std::string& data_dir) { return data_dir + "/cluster.json"; }

Status SaveClusterRecord(const ClusterRecord& r) {
  json j;
  j["data_dir"] = r.data_dir;
  j["mgmt"] = r.mgmt;
  if (r.client_tls.enabled()) {
    j["tls"] = {{"ca", r.client_tls.ca}, {"cert", r.client_tls.cert}, {"key", r.client_tls.key}};
  }
  j["daemons"] = json::array();
  for (const auto& d : r.daemons) {
    j["daemons"].push_back({{"name", d.name}, {"pid", d.pid}, {"argv", d.argv}, {"log", d.log},
                            {"address", d.address}, {"metrics", d.metrics}});
  }
  std::string path = ClusterRecordPath(r.data_dir);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out) return ErrnoStatus(errno, "cannot write '" + tmp + "'");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus(errno, "cannot write '" + path + "'");
  return OkStatus();
}

Result<ClusterRecord> LoadClusterRecord(const std::string& data_dir) {
  std::string path = ClusterRecordPath(data_dir);
  std::ifstream in(path);
  if (!in) {
    return NotFound("no cluster is recorded in '" + data_dir + "' (" + path +
                    " is missing); start one with `penstock up --data-dir " + data_dir + "`");
  }
  try {
    json j = json::parse(in);
    ClusterRecord r;
    r.data_dir = j.at("data_dir").get<std::string>();
    r.mgmt = j.at("mgmt").get<std::string>();
    if (j.contains("tls")) {
      const json& t = j.at("tls");
      r.client_tls = {t.at("ca").get<std::string>(), t.at("cert").get<std::string>(),
                      t.at("key").get<std::string>()};
    }
    for (const auto& d : j.at("daemons")) {
      DaemonRecord rec;
      rec.name = d.at("name").get<std::string>();
      rec.pid = d.at("pid").get<pid_t>();
      rec.argv = d.at("argv").get<std::vector<std::string>>();
      rec.log = d.at("log").get<std::string>();
      rec.address = d.value("address", "");
      rec.metrics = d.value("metrics", "");
      r.daemons.push_back(std::move(rec));
    }
    return r;
  } catch (const json::exception& e) {
    return DataLoss("'" + path + "' is not a valid cluster record (" + e.what() +
                    "); stop the processes by hand and remove it");
  }
}

bool IsOurProcess(pid_t pid, const std::string& exe) {
  if (pid <= 0 || !ProcessAlive(pid)) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (cmdline.empty()) return false;  // zombie or gone
  std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
  return argv0 == exe || cmdline.find("penstock") != std::string::npos;
}

Result<pid_t> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log) {
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoStatus(errno, "cannot open log file '" + log + "'");
  // Double fork so the daemon is reparented to init and never becomes our zombie.
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  pid_t child = ::fork();
  if (child < 0) return ErrnoStatus(errno, "fork");
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) {
      ::write(pipefd[1], &grandchild, sizeof(grandchild));
      ::_exit(grandchild < 0 ? 1 : 0);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  ::close(log_fd);
  pid_t daemon_pid = -1;
  ssize_t n = ::read(pipefd[0], &daemon_pid, sizeof(daemon_pid));
  ::close(pipefd[0]);
  int st;
  ::waitpid(child, &st, 0);
  if (n != sizeof(daemon_pid) || daemon_pid <= 0) return Internal("could not start " + argv[0]);
  return daemon_pid;
}

bool ProcessAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // An exited daemon stays a zombie until init reaps it; it is not running.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

bool StopProcess(pid_t pid, int grace_ms) {
  // 0 (a daemon that never started) and negative pids name process groups: kill(0) would stop
  // `up` itself and its shell's job.
  if (pid <= 0) return false;
  if (::kill(pid, SIGTERM) != 0) return false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!ProcessAlive(pid)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 200 && ProcessAlive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string TailFile(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::ostringstream out;
  for (const auto& l : tail) out << "  | " << l << "\n";
  return out.str();
}

namespace {

int BindSocket(const std::string& host, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // As the daemons' listeners bind (gRPC, cpp-httplib and UCX's TCP_CM_REUSEADDR): a port whose
  // only sockets are an earlier cluster's connections in TIME_WAIT is free; a listener is not.
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

uint16_t PickFreePort(const std::string& host) {
  // Below the kernel's ephemeral range: ports the daemons' own outgoing and UCX-internal sockets
  // (ephemeral) can never take between this choice and the daemon binding it.
  uint32_t eph_low = 32768, eph_high = 60999;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> eph_low >> eph_high;
  constexpr uint32_t kLowest = 10000;
  if (eph_low > kLowest + 1000) {
    static std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<uint32_t> pick(kLowest, eph_low - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const auto port = static_cast<uint16_t>(pick(rng));
      if (PortIsFree(host, port)) return port;
    }
  }
  int fd = BindSocket(host, 0);  // any free port the kernel picks
  if (fd < 0) return 0;
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool PortIsFree(const std::string& host, uint16_t port) {
  int fd = BindSocket(host, port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "penstock";
  buf[n] = '\0';
  return buf;
}

// `data_dir` (--data-dir), made with its logs/ directory and checked writable; as an absolute
// path.
Result<std::string> PrepareDataDir(const std::string& data_dir) {
  if (data_dir.empty()) return InvalidArgument("--data-dir is required");
  std::error_code ec;
  fs::create_directories(data_dir + "/logs", ec);
  if (ec || ::access(data_dir.c_str(), W_OK) != 0) {
    return PermissionDenied("data dir '" + data_dir + "' is not writable (" +
                            (ec ? ec.message() : std::string("permission denied")) +
                            "); choose another with --data-dir");
  }
  return fs::absolute(data_dir).lexically_normal().string();
}

// Fails when a cluster recorded in `dir` still runs (one of its daemons is a live `exe`).
Status CheckNoClusterRunning(const std::string& dir, const std::string& exe) {
  auto old = LoadClusterRecord(dir);
  if (!old.ok()) return OkStatus();
  for (const auto& d : old->daemons) {
    if (IsOurProcess(d.pid, exe)) {
      return AlreadyExists("a cluster is already running in '" + dir + "' (" + d.name + " pid " +
                           std::to_string(d.pid) + "); stop it with `penstock down --data-dir " + dir + "`");
    }
  }
  return OkStatus();
}

// The admin key lives in DATA_DIR/admin.key (0600), kept across restarts of the cluster: made
// with a new key unless it holds one. Returns its path.
Result<std::string> EnsureAdminKeyFile(const std::string& dir) {
  std::string admin_key_file = dir + "/admin.key";
  std::string key;
  if (std::ifstream in(admin_key_file); in) std::getline(in, key);
  if (!key.empty()) return admin_key_file;
  key = mgmt::NewApiKey();
  int fd = ::open(admin_key_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create '" + admin_key_file + "'");
  std::string line = key + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) return ErrnoStatus(errno, "cannot write '" + admin_key_file + "'");
  return admin_key_file;
}

Result<std::pair<uint16_t, uint16_t>> PortChooser::Pair(int first) {
  PS_ASSIGN_OR_RETURN(uint16_t a, One(first));
  PS_ASSIGN_OR_RETURN(uint16_t b, One(first + 1));
  return std::pair<uint16_t, uint16_t>{a, b};
}

Result<uint16_t> PortChooser::One(int fixed) {
  if (base_port_ == 0) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      uint16_t p = PickFreePort(host_);
      if (p == 0) break;
      if (std::find(taken_.begin(), taken_.end(), p) == taken_.end()) {
        taken_.push_back(p);
        return p;
      }
    }
    return Unavailable("no free TCP port on " + host_);
  }
  if (fixed <= 0 || fixed > 65535 || !PortIsFree(host_, static_cast<uint16_t>(fixed))) {
    return Unavailable("port " + host_ + ":" + std::to_string(fixed) +
                       " is in use; choose other ports with --base-port (0 picks free ones)");
  }
  return static_cast<uint16_t>(fixed);
}


Result<std::string> ResolveCapacity(const std::string& capacity, const std::string& segment_size, int targets,
                                    const std::string& dir) {
  try {
    ParseSize(segment_size, "--segment-size");
    if (capacity != "auto") {
      ParseSize(capacity, "--capacity");
      return capacity;
    }
  } catch (const CLI::ValidationError& e) {
    return InvalidArgument(e.what());
  }
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return ErrnoStatus(errno, "cannot read the free space of '" + dir + "'");
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t gib = free_bytes / (8 * static_cast<uint64_t>(targets)) >> 30;
  return std::to_string(std::clamp<uint64_t>(gib, 1, 16)) + "G";
}

}  // namespace penstock::cli
