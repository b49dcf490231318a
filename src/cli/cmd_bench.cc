// `penstock bench MODE`: throughput, IOPS and latency of the cluster as one client sees it.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "common/config.h"
#include "common/log.h"

namespace penstock::cli {

namespace {

constexpr uint64_t kMaxBenchSize = uint64_t{1} << 30;

struct BenchFlags {
  GlobalOptions g;
  std::string mode;
  std::string container;
  std::string size = "4M";
  unsigned concurrency = 16;
  double seconds = 10;
  uint64_t objects = 0;
  std::string redundancy;
  int write_percent = 30;
  bool no_cleanup = false;
  bool progress = false;
  bool sequential = false;
  bool verify = false;
};

// The run these flags ask for (but its container: see RunBenchCommand). Errors: kInvalidArgument
// naming the flag.
Result<BenchOptions> ToBenchOptions(const BenchFlags& f) {
  BenchOptions o;
  if (f.mode == "write") o.mode = BenchMode::kWrite;
  else if (f.mode == "seq") o.mode = BenchMode::kSeq;
  else if (f.mode == "rand") o.mode = BenchMode::kRand;
  else if (f.mode == "mixed") o.mode = BenchMode::kMixed;
  else return InvalidArgument("unknown bench mode '" + f.mode + "'; use write, seq, rand or mixed");
  try {
    o.size = ParseSize(f.size, "--size");
  } catch (const CLI::ValidationError& e) {
    return InvalidArgument(e.what());
  }
  // Each operation in flight holds a buffer of --size (and write one pattern of it).
  if (o.size == 0 || o.size > kMaxBenchSize) {
    return InvalidArgument("--size " + f.size + " is out of range: give 1 byte to " +
                           HumanBytes(static_cast<double>(kMaxBenchSize)) + " per operation");
  }
  o.concurrency = f.concurrency;
  o.seconds = f.seconds;
  o.objects = f.objects;
  o.mixed_write_percent = f.write_percent;
  if (f.sequential && o.mode != BenchMode::kMixed) {
    return InvalidArgument("--sequential applies to mixed only (seq reads in order already; rand is "
                           "random by name)");
  }
  o.sequential = f.sequential;
  if (f.verify && o.mode == BenchMode::kWrite) {
    return InvalidArgument("--verify checks what reads return: use it with seq, rand or mixed (write "
                           "runs always write the pattern those check)");
  }
  o.verify = f.verify;
  if (f.container.empty() && f.redundancy.empty()) {
    return InvalidArgument("give --container NAME, or --redundancy R to bench a throw-away container");
  }
  if (!f.container.empty() && !f.redundancy.empty()) {
    return InvalidArgument("--redundancy makes a throw-away container, and --container '" + f.container +
                           "' keeps its own redundancy; give one of them");
  }
  return o;
}

// A throw-away container of redundancy `redundancy` for a write run; returns its name.
Result<std::string> MakeThrowawayContainer(Client& client, BenchMode mode, const std::string& redundancy) {
  if (mode != BenchMode::kWrite) {
    return InvalidArgument("a throw-away container holds nothing to read; give --container");
  }
  std::string name = "bench-" + std::to_string(std::random_device{}() % 1000000);
  ContainerProps props;
  PS_ASSIGN_OR_RETURN(props.redundancy, ParseRedundancy(redundancy));
  PS_RETURN_IF_ERROR(client.CreateContainer(name, props).status());
  return name;
}

// What a run with --verify found wrong: kDataLoss naming the first wrong byte and the fix.
Status MismatchError(const BenchFlags& f, const BenchResult& r) {
  if (r.mismatches == 0) return OkStatus();
  return DataLoss("bench " + r.mode + " --verify: object '" + r.first_mismatch_object + "' in container '" +
                  f.container + "' differs from the bench pattern at offset " +
                  std::to_string(r.first_mismatch_offset) + " (" + std::to_string(r.mismatches) +
                  " blocks of 4 KiB differed in " + HumanBytes(static_cast<double>(r.verified_bytes)) +
                  " read). Objects named bench-* that `penstock bench write` did not write differ "
                  "everywhere: write them again with `penstock bench write --container " + f.container +
                  " --size SIZE --objects N --no-cleanup`; otherwise their data is corrupt");
}

void PrintBenchResult(const BenchFlags& f, const BenchOptions& o, const BenchResult& r, bool throwaway,
                      const Status& mismatch) {
  if (f.g.json) {
    nlohmann::json j = {{"mode", r.mode}, {"container", f.container}, {"size", o.size},
                        {"concurrency", o.concurrency}, {"sequential", o.sequential}, {"ops", r.ops}, {"errors", r.errors},
                        {"bytes", r.bytes}, {"seconds", r.seconds}, {"mb_per_s", r.mb_per_s},
                        {"iops", r.iops}, {"p50_us", r.p50_us}, {"p99_us", r.p99_us},
                        {"p999_us", r.p999_us}, {"max_us", r.max_us}, {"cpu_seconds", r.cpu_seconds},
                        {"cpu_seconds_per_gb", r.cpu_seconds_per_gb}, {"objects", r.objects},
                        {"read_bytes", r.read_bytes}, {"read_bytes_copied", r.read_bytes_copied},
                        {"verify", o.verify}, {"verified_bytes", r.verified_bytes}, {"mismatches", r.mismatches},
                        {"verify_seconds", r.verify_seconds}, {"stamp_seconds", r.stamp_seconds}};
    if (!r.first_error.empty()) j["first_error"] = r.first_error;
    if (r.mismatches > 0) {
      j["first_mismatch"] = {{"object", r.first_mismatch_object}, {"offset", r.first_mismatch_offset}};
      j["error"] = {{"code", std::string(StatusCodeName(mismatch.code()))}, {"message", mismatch.message()}};
    }
    PrintJson(j);
    return;
  }
  if (throwaway) std::printf("container %s (kept: --no-cleanup)\n", f.container.c_str());
  std::printf("%s: %llu ops (%llu errors) of %s in %.2f s, concurrency %u\n", r.mode.c_str(),
              static_cast<unsigned long long>(r.ops), static_cast<unsigned long long>(r.errors),
              HumanBytes(static_cast<double>(o.size)).c_str(), r.seconds, o.concurrency);
  std::printf("  %.1f MB/s  %.0f IOPS\n", r.mb_per_s, r.iops);
  std::printf("  latency us: p50 %.0f  p99 %.0f  p99.9 %.0f  max %.0f\n", r.p50_us, r.p99_us, r.p999_us, r.max_us);
  std::printf("  client CPU: %.2f s (%.2f s per GB)\n", r.cpu_seconds, r.cpu_seconds_per_gb);
  if (r.stamp_seconds > 0) {
    std::printf("  writing the pattern into the write buffers took %.2f s of CPU, not in the figure above\n",
                r.stamp_seconds);
  }
  if (r.read_bytes > 0) {
    std::printf("  client copies per byte read: %.3f\n",
                static_cast<double>(r.read_bytes_copied) / static_cast<double>(r.read_bytes));
  }
  if (o.verify) {
    std::printf("  verified: %s, %llu blocks differed (checking took %.2f s of CPU, not in the figure above)\n",
                HumanBytes(static_cast<double>(r.verified_bytes)).c_str(),
                static_cast<unsigned long long>(r.mismatches), r.verify_seconds);
  }
  if (!r.first_error.empty()) std::printf("  first error: %s\n", r.first_error.c_str());
  if (!mismatch.ok()) {
    std::fflush(stdout);  // the figures, then the error on stderr
    ReportError(mismatch, false);
  }
}

int RunBenchCommand(BenchFlags& f) {
  auto opts = ToBenchOptions(f);
  if (!opts.ok()) return ReportError(opts.status(), f.g.json);
  BenchOptions& o = *opts;
  InitLogging("penstock", f.g.log_level).IgnoreError();
  auto client = Client::Connect(ToClientOptions(f.g));
  if (!client.ok()) return ReportError(client.status(), f.g.json);
  bool throwaway = false;
  if (f.container.empty()) {
    auto name = MakeThrowawayContainer(**client, o.mode, f.redundancy);
    if (!name.ok()) return ReportError(name.status(), f.g.json);
    f.container = *name;
    throwaway = true;
  }
  o.container = f.container;
  const bool show = f.progress || (!f.g.json && ::isatty(2));
  auto result = RunBench(**client, o, [&](double secs, uint64_t ops, uint64_t bytes) {
    if (show) {
      std::fprintf(stderr, "\r%5.0fs  %10llu ops  %9.1f MB/s   ", secs, static_cast<unsigned long long>(ops),
                   static_cast<double>(bytes) / secs / 1e6);
    }
  });
  if (show) std::fprintf(stderr, "\n");
  if (throwaway && (!f.no_cleanup || !result.ok())) {
    // Failed or done with: a throw-away container is never left behind.
    (*client)->DeleteContainer(f.container, /*force=*/true).IgnoreError();
  } else if (result.ok() && !f.no_cleanup && o.mode == BenchMode::kWrite) {
    for (uint64_t i = 0; i < result->objects; ++i) (*client)->Delete(f.container, BenchObjectName(i)).IgnoreError();
  }
  if (!result.ok()) return ReportError(result.status(), f.g.json);
  const Status mismatch = MismatchError(f, *result);
  PrintBenchResult(f, o, *result, throwaway, mismatch);
  return result->errors == 0 && mismatch.ok() ? 0 : 1;
}

}  // namespace

void AddBenchCommand(CLI::App& root, std::vector<Command>& out) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* b = root.add_subcommand("bench", "measure throughput, IOPS and latency (write, seq, rand, mixed)");
  b->add_option("MODE", f->mode, "write | seq | rand | mixed")->required();
  AddSetting(*b, "container", &f->container, "container to use");
  AddSetting(*b, "size", &f->size, "bytes per operation (object size for write), e.g. 4K, 4M");
  AddSetting(*b, "concurrency", &f->concurrency, "operations in flight")->check(CLI::Range(1u, 4096u));
  AddSetting(*b, "seconds", &f->seconds, "how long to run")->check(CLI::Number)->check(CLI::Range(0.1, 86400.0));
  AddSetting(*b, "objects", &f->objects, "write: cycle over this many objects (0: a new object per op)")
      ->check(CLI::NonNegativeNumber);
  AddSetting(*b, "write-percent", &f->write_percent, "mixed: share of operations that write")
      ->check(CLI::Range(0, 100));
  AddSetting(*b, "redundancy", &f->redundancy, "bench a throw-away container with this redundancy");
  b->add_flag("--sequential", f->sequential,
              "mixed: walk the objects in order, --size bytes at a time (as seq does), instead of random ranges");
  b->add_flag("--verify", f->verify,
              "seq, rand, mixed: check every byte read against the pattern bench write wrote; any "
              "difference fails the run, naming the object and offset");
  b->add_flag("--no-cleanup", f->no_cleanup, "keep what write created (for seq/rand/mixed runs)");
  b->add_flag("--progress", f->progress, "show progress even when stderr is not a terminal");
  AddSetting(*b, "mgmt", &f->g.mgmt, "mgmt address (host:port)");
  AddSetting(*b, "api-key", &f->g.api_key, "the tenant's API key (clusters run with --auth need one)");
  AddTlsSettings(*b, &f->g.tls);
  AddDataPlaneSettings(*b, f->g);
  b->add_flag("--json", f->g.json, "machine-readable output");
  out.push_back({b, [f] { return RunBenchCommand(*f); }});
}

}  // namespace penstock::cli
