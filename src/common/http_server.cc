#include "common/http_server.h"

#include <httplib.h>

#include <chrono>

namespace penstock {

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, uint16_t port,
                                                      MetricsRegistry* registry, std::string_view flag) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->RenderText(), "text/plain; version=0.0.4");
  });
  s->server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  // httplib's default sets SO_REUSEPORT, which would let a second daemon silently share the
  // port; keep only SO_REUSEADDR so "port in use" is an error.
  s->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int bound;
  if (port == 0) {
    bound = s->server_->bind_to_any_port(host.c_str());
  } else {
    bound = s->server_->bind_to_port(host.c_str(), port) ? port : -1;
  }
  if (bound <= 0) {
    return Unavailable("metrics HTTP port " + host + ":" + std::to_string(port) +
                       " cannot be bound (in use?); choose another with " + std::string(flag));
  }
  s->port_ = static_cast<uint16_t>(bound);
  httplib::Server* raw = s->server_.get();
  s->thread_ = std::thread([raw] { raw->listen_after_bind(); });
  // httplib's stop() does nothing until the listen loop has started (it sets is_running()
  // there), so a Stop() right after Start() would leave the thread listening and the join
  // hanging: wait for the loop (bounded, in case it fails at once).
  for (int i = 0; i < 5000 && !raw->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

void HttpServer::AddJsonRoute(const std::string& path, std::function<std::string()> fn) {
  server_->Get(path, [fn = std::move(fn)](const httplib::Request&, httplib::Response& res) {
    res.set_content(fn(), "application/json");
  });
}

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace penstock
