// socket_address.h — "host:port" strings to and from sockaddr for UCX connection setup.
// Pure functions (getaddrinfo for names); thread-safe.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "penstock/status.h"

namespace penstock {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  uint16_t port() const;
  // "host:port" with the numeric host ("[::1]:7000" for IPv6).
  std::string ToString() const;
};

// Parses "host:port", "[v6]:port"; `host` may be a name. Errors: kInvalidArgument naming the
// string when it is not host:port; kUnavailable when the name does not resolve.
Result<SocketAddress> ResolveSocketAddress(const std::string& address);
Result<SocketAddress> ResolveSocketAddress(const std::string& host, uint16_t port);

// A multi-rail server's address lists one "host:port" per rail, joined by ','
// (RpcServer::address). The rail client worker `worker` uses: piece worker % pieces (the whole
// string when it has no ','), so worker i of a client whose workers are pinned to networks in
// the same order as the server's rails reaches the rail on its own network.
std::string_view RailFor(std::string_view address, size_t worker);

}  // namespace penstock
