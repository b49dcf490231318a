#include "transport/local_direct.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace penstock {
namespace {

bool SameIp(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

Status SyscallStatus(int err, const std::string& what) {
  std::string text = what + ": " + std::strerror(err);
  if (err == EPERM) {
    return PermissionDenied(text + " (run the target as the client's user; with Yama, "
                                   "kernel.yama.ptrace_scope must be 0 or 1)");
  }
  return Unavailable(text);
}

// An address as /proc/net/tcp{,6} prints it, IPv4 in its IPv4-mapped IPv6 form.
struct ProcAddress {
  std::array<unsigned char, 16> ip{};
  uint16_t port = 0;
  bool operator==(const ProcAddress&) const = default;
};

std::array<unsigned char, 16> MappedV4(const unsigned char v4[4]) {
  std::array<unsigned char, 16> ip{};
  ip[10] = ip[11] = 0xff;
  std::memcpy(&ip[12], v4, 4);
  return ip;
}

bool FromSockaddr(const SocketAddress& a, ProcAddress* out) {
  const sockaddr* sa = a.get();
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    out->ip = MappedV4(reinterpret_cast<const unsigned char*>(&in->sin_addr));
    out->port = a.port();
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::memcpy(out->ip.data(), &in6->sin6_addr, 16);
    out->port = a.port();
    return true;
  }
  return false;
}

// "0100007F:9598" (tcp) or 32 hex digits ":9598" (tcp6): each 32-bit word printed as the host
// holds it in memory.
bool ParseProcAddress(const std::string& text, ProcAddress* out) {
  const size_t colon = text.find(':');
  if (colon != 8 && colon != 32) return false;
  unsigned char bytes[16];
  for (size_t w = 0; w < colon / 8; ++w) {
    const uint32_t word = static_cast<uint32_t>(std::stoul(text.substr(w * 8, 8), nullptr, 16));
    std::memcpy(bytes + w * 4, &word, 4);
  }
  if (colon == 8) {
    out->ip = MappedV4(bytes);
  } else {
    std::memcpy(out->ip.data(), bytes, 16);
  }
  out->port = static_cast<uint16_t>(std::stoul(text.substr(colon + 1), nullptr, 16));
  return true;
}

// Socket inodes of this host's TCP connections from `client` to port `server_port`.
std::vector<std::string> ClientSocketInodes(const ProcAddress& client, uint16_t server_port) {
  std::vector<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode)) continue;
      ProcAddress l, r;
      try {
        if (!ParseProcAddress(local, &l) || !ParseProcAddress(remote, &r)) continue;
      } catch (const std::exception&) {
        continue;
      }
      if (l == client && r.port == server_port && inode != "0") inodes.push_back(inode);
    }
  }
  return inodes;
}

}  // namespace

bool OwnsConnection(uint32_t pid, const SocketAddress& client, uint16_t server_port) {
  ProcAddress want;
  if (pid == 0 || !FromSockaddr(client, &want)) return false;
  const std::vector<std::string> inodes = ClientSocketInodes(want, server_port);
  if (inodes.empty()) return false;
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(fds.c_str());
  if (dir == nullptr) return false;
  bool owns = false;
  char target[64];
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const ssize_t n = readlinkat(dirfd(dir), e->d_name, target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string link(target, static_cast<size_t>(n));
    for (const std::string& inode : inodes) owns |= link == "socket:[" + inode + "]";
    if (owns) break;
  }
  closedir(dir);
  return owns;
}

bool IsLocalAddress(const SocketAddress& address) {
  const sockaddr* sa = address.get();
  if (sa->sa_family == AF_INET) {
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr);
    if ((ip >> 24) == 127) return true;
  } else if (sa->sa_family == AF_INET6) {
    if (IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr)) return true;
  } else {
    return false;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (ifaddrs* i = list; i != nullptr && !local; i = i->ifa_next) local = SameIp(i->ifa_addr, sa);
  freeifaddrs(list);
  return local;
}

void AllowLocalDirect() {
  std::ifstream scope("/proc/sys/kernel/yama/ptrace_scope");
  int level = 0;
  if (scope >> level && level == 1) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

bool SameUser(uint32_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream ids(line.substr(4));
    unsigned long real = 0, effective = 0;
    if (!(ids >> real >> effective)) return false;
    const uid_t me = geteuid();
    return real == me && effective == me;
  }
  return false;
}

namespace {

// Whether the process `p` names still holds its ticket.
Status CheckTicket(const wire::Placement& p) {
  uint64_t ticket = 0;
  iovec mine{&ticket, sizeof ticket};
  iovec theirs{reinterpret_cast<void*>(p.ticket_addr), sizeof ticket};
  if (process_vm_readv(static_cast<pid_t>(p.pid), &mine, 1, &theirs, 1, 0) !=
      static_cast<ssize_t>(sizeof ticket)) {
    return SyscallStatus(errno, "cannot read the placement ticket of process " + std::to_string(p.pid));
  }
  if (ticket != p.ticket) {
    return FailedPrecondition("process " + std::to_string(p.pid) +
                              " does not hold the request's placement ticket (another process, or "
                              "the call was given up)");
  }
  return OkStatus();
}

// The first `length` bytes of the memory `p` names.
std::vector<iovec> Remote(const wire::Placement& p, uint64_t length) {
  std::vector<iovec> remote;
  for (const wire::PlacementIov& v : p.iovs) {
    if (length == 0) break;
    const uint64_t n = std::min(length, v.len);
    remote.push_back({reinterpret_cast<void*>(v.addr), n});
    length -= n;
  }
  return remote;
}

}  // namespace

Status PlaceReply(const wire::Placement& p, std::span<const std::byte> data) {
  if (data.size() > p.capacity()) {
    return InvalidArgument("reply of " + std::to_string(data.size()) + " bytes is larger than the " +
                           std::to_string(p.capacity()) + " bytes the client lent");
  }
  PS_RETURN_IF_ERROR(CheckTicket(p));
  std::vector<iovec> remote = Remote(p, data.size());
  iovec local{const_cast<std::byte*>(data.data()), data.size()};
  const ssize_t wrote = process_vm_writev(static_cast<pid_t>(p.pid), &local, 1, remote.data(), remote.size(), 0);
  if (wrote < 0) return SyscallStatus(errno, "cannot write a reply into process " + std::to_string(p.pid));
  if (static_cast<uint64_t>(wrote) != data.size()) {
    return DataLoss("wrote " + std::to_string(wrote) + " of " + std::to_string(data.size()) +
                    " reply bytes into process " + std::to_string(p.pid));
  }
  return OkStatus();
}

Status PullPayload(const wire::Placement& p, std::span<std::byte> into) {
  if (into.size() != p.capacity()) {
    return InvalidArgument("payload of " + std::to_string(p.capacity()) + " bytes for a " +
                           std::to_string(into.size()) + "-byte buffer");
  }
  PS_RETURN_IF_ERROR(CheckTicket(p));
  std::vector<iovec> remote = Remote(p, into.size());
  iovec local{into.data(), into.size()};
  const ssize_t got = process_vm_readv(static_cast<pid_t>(p.pid), &local, 1, remote.data(), remote.size(), 0);
  if (got < 0) return SyscallStatus(errno, "cannot read a payload from process " + std::to_string(p.pid));
  if (static_cast<uint64_t>(got) != into.size()) {
    return DataLoss("read " + std::to_string(got) + " of " + std::to_string(into.size()) +
                    " payload bytes from process " + std::to_string(p.pid));
  }
  // Still lent after the copy: the client had not taken the memory back (it clears the ticket
  // first), so what was read is the payload it sent.
  return CheckTicket(p);
}

}  // namespace penstock
