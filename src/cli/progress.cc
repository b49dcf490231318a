#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"

namespace penstock::cli {

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Percent(uint64_t done, uint64_t total) {
  return total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
}

constexpr const char* kClearLine = "\r\033[K";

}  // namespace

ProgressMode ChooseProgressMode(bool quiet, bool force, ProgressMode otherwise) {
  if (quiet) return ProgressMode::kNone;
  if (force || ::isatty(STDERR_FILENO)) return ProgressMode::kBar;
  return otherwise;
}

void TransferProgress::operator()(uint64_t done, uint64_t total) {
  if (mode_ != ProgressMode::kBar) return;
  auto now = std::chrono::steady_clock::now();
  if (done != total && now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  const double secs = Seconds(start_);
  std::fprintf(stderr, "\r%s %s / %s (%3.0f%%) %.0f MB/s   ", verb_.c_str(),
               HumanBytes(static_cast<double>(done)).c_str(), HumanBytes(static_cast<double>(total)).c_str(),
               Percent(done, total), secs > 0 ? static_cast<double>(done) / secs / 1e6 : 0.0);
  if (done == total) std::fprintf(stderr, "\n");
}

TreeProgress::TreeProgress(ProgressMode mode, std::string verb, uint64_t files_total, uint64_t bytes_total,
                           std::chrono::milliseconds lines_every)
    : mode_(mode), verb_(std::move(verb)), files_total_(files_total), bytes_total_(bytes_total),
      every_(lines_every) {
  if (mode_ != ProgressMode::kNone) thread_ = std::thread([this] { Loop(); });
}

TreeProgress::~TreeProgress() { Stop(); }

std::string TreeProgress::Line() {
  const double secs = Seconds(start_);
  const uint64_t files = done_.load() + failed_.load();
  const auto bytes = static_cast<uint64_t>(std::max<int64_t>(0, bytes_.load()));
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s %llu/%llu files  %s / %s (%3.0f%%)  %.1f MB/s  %.0f files/s", verb_.c_str(),
                static_cast<unsigned long long>(files), static_cast<unsigned long long>(files_total_),
                HumanBytes(static_cast<double>(bytes)).c_str(), HumanBytes(static_cast<double>(bytes_total_)).c_str(),
                Percent(bytes, bytes_total_), secs > 0 ? static_cast<double>(bytes) / secs / 1e6 : 0.0,
                secs > 0 ? static_cast<double>(files) / secs : 0.0);
  std::string line = buf;
  if (const uint64_t f = failed_.load()) line += "  " + std::to_string(f) + " failed";
  return line;
}

void TreeProgress::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = mode_ == ProgressMode::kBar ? std::chrono::milliseconds(250) : every_;
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (mode_ == ProgressMode::kBar) {
      std::fprintf(stderr, "%s%s", kClearLine, Line().c_str());
      drawn_ = true;
    } else {
      std::fprintf(stderr, "penstock: %s\n", Line().c_str());
    }
    std::fflush(stderr);
  }
}

void TreeProgress::Warn(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (drawn_) std::fprintf(stderr, "%s", kClearLine);
  std::fprintf(stderr, "%s\n", line.c_str());
  if (drawn_) std::fprintf(stderr, "%s", Line().c_str());
  std::fflush(stderr);
}

void TreeProgress::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (drawn_) std::fprintf(stderr, "%s", kClearLine);
}

}  // namespace penstock::cli
