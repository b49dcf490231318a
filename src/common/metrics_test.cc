#include "common/metrics.h"

#include <gtest/gtest.h>

#include "common/http_server.h"
#include <httplib.h>

namespace penstock {
namespace {

TEST(MetricsTest, RendersPrometheusText) {
  MetricsRegistry reg;
  reg.GetCounter("penstock_ops_total", "Operations.", {{"op", "read"}}).Inc(3);
  reg.GetCounter("penstock_ops_total", "Operations.", {{"op", "write"}}).Inc();
  reg.GetGauge("penstock_bytes_used", "Bytes used.").Set(42);
  reg.AddCallbackGauge("penstock_answer", "Computed.", {}, [] { return 7.0; });
  auto& h = reg.GetHistogram("penstock_latency_seconds", "Latency.", {{"op", "read"}});
  h.Observe(0.000005);
  h.Observe(0.5);
  std::string text = reg.RenderText();
  EXPECT_NE(text.find("# TYPE penstock_ops_total counter"), std::string::npos);
  EXPECT_NE(text.find("penstock_ops_total{op=\"read\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("penstock_ops_total{op=\"write\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("penstock_bytes_used 42\n"), std::string::npos);
  EXPECT_NE(text.find("penstock_answer 7\n"), std::string::npos);
  EXPECT_NE(text.find("penstock_latency_seconds_bucket{op=\"read\",le=\"1.0000000000000001e-05\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("penstock_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 2"), std::string::npos);
  EXPECT_NE(text.find("penstock_latency_seconds_count{op=\"read\"} 2"), std::string::npos);
}

TEST(MetricsTest, SameSeriesReturnedTwice) {
  MetricsRegistry reg;
  auto& a = reg.GetCounter("x_total", "X.", {{"k", "v"}});
  auto& b = reg.GetCounter("x_total", "X.", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
}

TEST(HttpServerTest, ServesMetrics) {
  MetricsRegistry reg;
  reg.GetCounter("served_total", "Served.").Inc(5);
  auto server = HttpServer::Start("127.0.0.1", 0, &reg, "--metrics-port");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client cli("127.0.0.1", (*server)->port());
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("served_total 5"), std::string::npos);
  // The same port cannot be bound twice: a clear error, not a crash.
  auto second = HttpServer::Start("127.0.0.1", (*server)->port(), &reg, "--metrics-listen");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("--metrics-listen"), std::string::npos);
}

}  // namespace
}  // namespace penstock
