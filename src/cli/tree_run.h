// tree_run.h — the bookkeeping of one `put -r` or `get -r`: the worker threads, what was moved,
// what failed or was skipped (each said as it happens), the progress, and the summary at the
// end. Thread-safe: the workers report into it concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cli/dataset.h"
#include "cli/progress.h"
#include "penstock/status.h"

namespace penstock::cli {

class TreeRun {
 public:
  // `verb` is "put" or "get"; the totals are what the run is to move.
  TreeRun(const char* verb, const TreeOptions& options, uint64_t files_total, uint64_t bytes_total);

  // Runs `work(item, job)` for items [0, items) on min(jobs, items) threads; a thread takes
  // the next item when it is done with one, until none is left or Interrupted().
  void Run(size_t items, unsigned jobs, const std::function<void(size_t item, unsigned job)>& work);

  TreeProgress& progress() { return progress_; }
  // A file moved whole.
  void Done(uint64_t bytes);
  // A file that failed: `local` and `name` say which (local path, object name); warns at once.
  void Fail(const std::string& local, const std::string& name, const Status& s);
  // Something not moved on purpose (a symbolic link, a special file); warns at once.
  void Skip(const std::string& local, const std::string& why);

  // Prints the summary (or the JSON object) and returns the exit code (see dataset.h).
  int Finish();

 private:
  struct Problem {
    std::string local, name, error;
  };

  const char* verb_;
  const TreeOptions& options_;
  const uint64_t files_total_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  TreeProgress progress_;
  std::mutex mu_;  // guards the members below
  uint64_t files_ = 0, bytes_ = 0;
  std::vector<Problem> failed_, skipped_;
};

}  // namespace penstock::cli
