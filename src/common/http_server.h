// http_server.h — the small HTTP endpoint every daemon serves: GET /metrics (Prometheus
// text from a MetricsRegistry) and GET /healthz. Built on cpp-httplib.
// Owns one listening thread; Stop() (or the destructor) joins it. The registry is borrowed
// and must outlive the server.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/metrics.h"
#include "penstock/status.h"

namespace httplib {
class Server;
}

namespace penstock {

class HttpServer {
 public:
  // Binds `host:port` (port 0 picks a free one) and starts serving.
  // Errors: kUnavailable when the port is in use (names the port and `flag`, the setting that
  // chooses it, e.g. "--metrics-port").
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& host, uint16_t port,
                                                   MetricsRegistry* registry, std::string_view flag);
  ~HttpServer();

  // Adds GET `path` answering `fn()` as JSON. Call before traffic arrives.
  void AddJsonRoute(const std::string& path, std::function<std::string()> fn);

  uint16_t port() const { return port_; }
  void Stop();

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace penstock
