#include "common/metrics.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace penstock {

void Gauge::Add(double d) {
  double cur = v_.load(std::memory_order_relaxed);
  while (!v_.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {
  }
}

double Histogram::BucketBound(int i) { return 10e-6 * std::ldexp(1.0, i); }

void Histogram::Observe(double seconds) {
  int i = 0;
  while (i < kBuckets && seconds > BucketBound(i)) ++i;
  if (i < kBuckets) buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

MetricsRegistry::Series& MetricsRegistry::FindOrAdd(const std::string& name,
                                                    const std::string& help, Kind kind,
                                                    const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = families_.try_emplace(name);
  Family& fam = it->second;
  if (inserted) {
    fam.kind = kind;
    fam.help = help;
  } else if (fam.kind != kind) {
    throw std::logic_error("metric " + name + " registered twice with different kinds");
  }
  for (auto& s : fam.series) {
    if (s->labels == labels) return *s;
  }
  auto s = std::make_unique<Series>();
  s->labels = labels;
  switch (kind) {
    case Kind::kCounter: s->counter = std::make_unique<Counter>(); break;
    case Kind::kGauge: s->gauge = std::make_unique<Gauge>(); break;
    case Kind::kHistogram: s->histogram = std::make_unique<Histogram>(); break;
  }
  fam.series.push_back(std::move(s));
  return *fam.series.back();
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const Labels& labels) {
  return *FindOrAdd(name, help, Kind::kCounter, labels).counter;
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help,
                                 const Labels& labels) {
  return *FindOrAdd(name, help, Kind::kGauge, labels).gauge;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const Labels& labels) {
  return *FindOrAdd(name, help, Kind::kHistogram, labels).histogram;
}

void MetricsRegistry::AddCallbackGauge(const std::string& name, const std::string& help,
                                       const Labels& labels, std::function<double()> fn) {
  FindOrAdd(name, help, Kind::kGauge, labels).callback = std::move(fn);
}

namespace {

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string LabelText(const Labels& labels, const std::string& extra_key = "",
                      const std::string& extra_val = "") {
  if (labels.empty() && extra_key.empty()) return "";
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) s += ',';
    first = false;
    s += k + "=\"" + EscapeLabel(v) + "\"";
  }
  if (!extra_key.empty()) {
    if (!first) s += ',';
    s += extra_key + "=\"" + extra_val + "\"";
  }
  return s + "}";
}

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

}  // namespace

std::string MetricsRegistry::RenderText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, fam] : families_) {
    const char* type = fam.kind == Kind::kCounter ? "counter"
                       : fam.kind == Kind::kGauge ? "gauge"
                                                  : "histogram";
    out += "# HELP " + name + " " + fam.help + "\n";
    out += "# TYPE " + name + " " + type + "\n";
    for (const auto& s : fam.series) {
      switch (fam.kind) {
        case Kind::kCounter:
          out += name + LabelText(s->labels) + " " + std::to_string(s->counter->value()) + "\n";
          break;
        case Kind::kGauge: {
          double v = s->callback ? s->callback() : s->gauge->value();
          out += name + LabelText(s->labels) + " " + Num(v) + "\n";
          break;
        }
        case Kind::kHistogram: {
          uint64_t cum = 0;
          for (int i = 0; i < Histogram::kBuckets; ++i) {
            cum += s->histogram->bucket(i);
            out += name + "_bucket" + LabelText(s->labels, "le", Num(Histogram::BucketBound(i))) +
                   " " + std::to_string(cum) + "\n";
          }
          out += name + "_bucket" + LabelText(s->labels, "le", "+Inf") + " " +
                 std::to_string(s->histogram->count()) + "\n";
          out += name + "_sum" + LabelText(s->labels) + " " + Num(s->histogram->sum()) + "\n";
          out += name + "_count" + LabelText(s->labels) + " " +
                 std::to_string(s->histogram->count()) + "\n";
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace penstock
