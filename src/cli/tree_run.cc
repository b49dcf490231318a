#include "cli/tree_run.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/local_tree.h"
#include "cli/interrupt.h"

namespace penstock::cli {

using nlohmann::json;

TreeRun::TreeRun(const char* verb, const TreeOptions& options, uint64_t files_total, uint64_t bytes_total)
    : verb_(verb), options_(options), files_total_(files_total),
      progress_(ChooseProgressMode(options.quiet, options.progress, ProgressMode::kLines), verb, files_total,
                bytes_total, std::chrono::seconds(10)) {}

void TreeRun::Run(size_t items, unsigned jobs, const std::function<void(size_t, unsigned)>& work) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const unsigned n = static_cast<unsigned>(std::min<size_t>(std::max(1u, jobs), items));
  for (unsigned job = 0; job < n; ++job) {
    threads.emplace_back([&, job] {
      for (size_t i; !Interrupted() && (i = next.fetch_add(1)) < items;) work(i, job);
    });
  }
  for (auto& t : threads) t.join();
  progress_.Stop();
}

void TreeRun::Done(uint64_t bytes) {
  progress_.FileDone(true);
  std::lock_guard<std::mutex> lock(mu_);
  ++files_;
  bytes_ += bytes;
}

void TreeRun::Fail(const std::string& local, const std::string& name, const Status& s) {
  progress_.FileDone(false);
  if (s.code() == StatusCode::kCancelled && Interrupted()) return;  // not a failure of the file
  const std::string what = name.empty()                  ? "read '" + local + "'"
                           : std::string(verb_) == "put" ? "put '" + local + "' as '" + name + "'"
                                                         : "get '" + name + "' into '" + local + "'";
  progress_.Warn("penstock: warning: cannot " + what + ": " + s.message());
  std::lock_guard<std::mutex> lock(mu_);
  failed_.push_back({local, name, s.message()});
}

void TreeRun::Skip(const std::string& local, const std::string& why) {
  progress_.Warn("penstock: warning: skipped '" + local + "': " + why);
  std::lock_guard<std::mutex> lock(mu_);
  skipped_.push_back({local, "", why});
}

int TreeRun::Finish() {
  progress_.Stop();
  std::lock_guard<std::mutex> lock(mu_);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double mbps = secs > 0 ? static_cast<double>(bytes_) / secs / 1e6 : 0;
  const double fps = secs > 0 ? static_cast<double>(files_) / secs : 0;
  const bool interrupted = Interrupted();
  const int code = interrupted ? 130 : failed_.empty() && skipped_.empty() ? 0 : 1;
  if (options_.json) {
    json j = {{"op", verb_}, {"container", options_.container}, {"prefix", DirectoryPrefix(options_.prefix)},
              {"dir", options_.dir}, {"files", files_}, {"bytes", bytes_}, {"seconds", secs},
              {"mb_per_s", mbps}, {"files_per_s", fps}, {"failed", failed_.size()}, {"skipped", skipped_.size()},
              {"interrupted", interrupted}, {"failures", json::array()}, {"skipped_files", json::array()}};
    for (const auto& p : failed_) j["failures"].push_back({{"path", p.local}, {"name", p.name}, {"error", p.error}});
    for (const auto& p : skipped_) j["skipped_files"].push_back({{"path", p.local}, {"why", p.error}});
    PrintJson(j);
    return code;
  }
  if (!options_.quiet || code != 0) {
    std::fprintf(stderr, "%s %llu files, %s in %.2f s: %.1f MB/s, %.0f files/s; %zu failed, %zu skipped\n", verb_,
                 static_cast<unsigned long long>(files_), HumanBytes(static_cast<double>(bytes_)).c_str(), secs, mbps,
                 fps, failed_.size(), skipped_.size());
  }
  if (interrupted) {
    std::fprintf(stderr, "penstock: error: interrupted after %llu of %llu files; no partial file or object is left "
                 "behind (run the same command again to finish)\n",
                 static_cast<unsigned long long>(files_), static_cast<unsigned long long>(files_total_));
  } else if (code != 0) {
    std::fprintf(stderr, "penstock: error: %zu failed, %zu skipped (see the warnings above); %llu files done\n",
                 failed_.size(), skipped_.size(), static_cast<unsigned long long>(files_));
  }
  return code;
}

}  // namespace penstock::cli
