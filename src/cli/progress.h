// progress.h — progress of transfers on stderr: a bar redrawn in place while stderr is a
// terminal, plain lines now and then otherwise (logs, pipes), nothing with --quiet. stdout is
// never written (it carries data or --json).
//
// TransferProgress follows one object and is called from one thread. TreeProgress follows many
// files moved by several threads at once: its counters and Warn() are thread-safe and a thread
// of its own draws the bar.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace penstock::cli {

enum class ProgressMode {
  kNone,   // --quiet
  kBar,    // stderr is a terminal (or --progress): redrawn in place
  kLines,  // otherwise: a plain line now and then
};

// kBar when stderr is a terminal or `force`, kNone when `quiet`, else `otherwise`.
ProgressMode ChooseProgressMode(bool quiet, bool force, ProgressMode otherwise);

// One object: "get 1.2 GiB / 4.0 GiB ( 30%) 812 MB/s". Call it with (bytes done, bytes total).
class TransferProgress {
 public:
  TransferProgress(ProgressMode mode, std::string verb) : mode_(mode), verb_(std::move(verb)) {}
  void operator()(uint64_t done, uint64_t total);

 private:
  ProgressMode mode_;
  std::string verb_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

// Many files: "put 1234/5000 files  1.2 GiB / 4.0 GiB ( 30%)  812 MB/s  420 files/s  1 failed".
class TreeProgress {
 public:
  // `lines_every`: how often kLines prints.
  TreeProgress(ProgressMode mode, std::string verb, uint64_t files_total, uint64_t bytes_total,
               std::chrono::milliseconds lines_every);
  ~TreeProgress();  // Stop()
  TreeProgress(const TreeProgress&) = delete;
  TreeProgress& operator=(const TreeProgress&) = delete;

  // Bytes moved so far of files still in progress (may be taken back with a negative delta
  // when a file fails).
  void AddBytes(int64_t delta) { bytes_.fetch_add(delta, std::memory_order_relaxed); }
  void FileDone(bool ok) { (ok ? done_ : failed_).fetch_add(1, std::memory_order_relaxed); }
  // Prints `line` on a line of its own (the bar is redrawn below it).
  void Warn(const std::string& line);
  // Ends the drawing thread and clears the bar. Idempotent.
  void Stop();

 private:
  void Loop();
  std::string Line();

  const ProgressMode mode_;
  const std::string verb_;
  const uint64_t files_total_, bytes_total_;
  const std::chrono::milliseconds every_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<int64_t> bytes_{0};
  std::atomic<uint64_t> done_{0}, failed_{0};
  std::mutex mu_;  // stderr, stop_
  std::condition_variable cv_;
  bool stop_ = false;
  bool drawn_ = false;  // a bar is on screen
  std::thread thread_;
};

}  // namespace penstock::cli
