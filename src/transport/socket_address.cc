#include "transport/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstring>

namespace penstock {

uint16_t SocketAddress::port() const {
  if (storage.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
}

std::string SocketAddress::ToString() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host,
              sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(port());
}

Result<SocketAddress> ResolveSocketAddress(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Unavailable("cannot resolve data-plane host '" + host + "': " + gai_strerror(rc) +
                       "; check the name or use an IP address");
  }
  SocketAddress out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.length = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

Result<SocketAddress> ResolveSocketAddress(const std::string& address) {
  auto bad = [&] {
    return InvalidArgument("data-plane address '" + address +
                           "' is not host:port (e.g. 10.0.0.5:7100 or [::1]:7100)");
  };
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 >= address.size()) return bad();
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned long port = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9') return bad();
    port = port * 10 + static_cast<unsigned>(c - '0');
    if (port > 65535) return bad();
  }
  if (host.empty() || port == 0) return bad();
  return ResolveSocketAddress(host, static_cast<uint16_t>(port));
}

std::string_view RailFor(std::string_view address, size_t worker) {
  const size_t rails = static_cast<size_t>(std::count(address.begin(), address.end(), ',')) + 1;
  if (rails == 1) return address;
  size_t begin = 0;
  for (size_t skip = worker % rails; skip > 0; --skip) begin = address.find(',', begin) + 1;
  return address.substr(begin, address.find(',', begin) - begin);
}

}  // namespace penstock
