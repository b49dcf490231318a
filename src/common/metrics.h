// metrics.h — a registry of counters, gauges and histograms rendered as Prometheus text.
//
// Metrics are created once (usually at daemon start) and live as long as the registry; the
// returned references stay valid. Updating a metric is lock-free (atomics) and safe from any
// thread; creating metrics and rendering take the registry's mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace penstock {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  void Inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  void Add(double d);
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Latency histogram in seconds with fixed exponential buckets from 10 us to ~84 s.
class Histogram {
 public:
  static constexpr int kBuckets = 24;  // upper bounds 10us * 2^i
  static double BucketBound(int i);
  void Observe(double seconds);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9; }
  uint64_t bucket(int i) const { return buckets_[i].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

class MetricsRegistry {
 public:
  // Finds or creates the metric `name` with `labels`. `help` is kept from the first call.
  // Names follow Prometheus rules; counters should end in _total.
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const Labels& labels = {});

  // A gauge computed when scraped (e.g. bytes used read from the engine). `fn` must be
  // thread-safe and must not touch the registry.
  void AddCallbackGauge(const std::string& name, const std::string& help, const Labels& labels,
                        std::function<double()> fn);

  // Prometheus text exposition format 0.0.4.
  std::string RenderText() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> callback;
  };
  struct Family {
    Kind kind;
    std::string help;
    std::vector<std::unique_ptr<Series>> series;
  };
  Series& FindOrAdd(const std::string& name, const std::string& help, Kind kind,
                    const Labels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace penstock
