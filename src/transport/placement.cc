#include "transport/placement.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

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

}  // namespace

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
