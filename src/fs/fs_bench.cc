// fs_bench — one harness for bench/fs_vs_ext4.sh, run against Penstock's native file system
// API or against any POSIX directory (local ext4, a FUSE mount of Penstock, a bindfs
// passthrough), so both sides of each ratio run the same code.
//
//   fs_bench posix DIR [options]
//   fs_bench native MGMT CONTAINER [options]      (formats the container if it holds no fs)
// Options: --threads P (1), --files N (files per phase, over all threads; 10000),
//          --size BYTES (per file; 0), --layout shared|private (one directory for all
//          threads, or one each; shared), --seq-mib M (a sequential write then read of one file
//          of M MiB in 1 MiB calls; 0 skips), --phases create,stat,readdir,read,unlink
// Phases, in order: create (exclusive create, write --size bytes, close), stat, readdir (every
// thread lists its directory; entries/s), read (open, read --size bytes, close), unlink, then
// seqwrite and seqread. Prints one JSON object: ops per second per phase, MB/s for seq*.
// Files are written without fsync on both sides (Penstock's writes are durable when they
// return; a local file system's are not: the ratio flatters the local side).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "penstock/client.h"
#include "penstock/fs.h"

namespace {

using Clock = std::chrono::steady_clock;

// What a phase does to one file; false on failure (reported, and the run fails).
struct Backend {
  virtual ~Backend() = default;
  virtual bool Mkdir(const std::string& p) = 0;
  virtual bool Create(const std::string& p, const std::vector<char>& data) = 0;
  virtual bool Stat(const std::string& p) = 0;
  virtual long ReadDir(const std::string& p) = 0;  // entries, -1 on failure
  virtual bool Read(const std::string& p, std::vector<char>& buf) = 0;
  virtual bool Unlink(const std::string& p) = 0;
  // Sequential: whole file in 1 MiB calls.
  virtual bool WriteSeq(const std::string& p, uint64_t mib) = 0;
  virtual bool ReadSeq(const std::string& p, uint64_t mib) = 0;
};

struct Posix : Backend {
  std::string root;
  explicit Posix(std::string r) : root(std::move(r)) {}
  std::string P(const std::string& p) { return root + p; }
  bool Mkdir(const std::string& p) override { return ::mkdir(P(p).c_str(), 0755) == 0 || errno == EEXIST; }
  bool Create(const std::string& p, const std::vector<char>& data) override {
    int fd = ::open(P(p).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) return false;
    bool ok = data.empty() || ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    return ::close(fd) == 0 && ok;
  }
  bool Stat(const std::string& p) override {
    struct stat st;
    return ::stat(P(p).c_str(), &st) == 0;
  }
  long ReadDir(const std::string& p) override {
    DIR* d = ::opendir(P(p).c_str());
    if (!d) return -1;
    long n = 0;
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
    return n - 2;  // "." and ".."
  }
  bool Read(const std::string& p, std::vector<char>& buf) override {
    int fd = ::open(P(p).c_str(), O_RDONLY);
    if (fd < 0) return false;
    ssize_t n = ::read(fd, buf.data(), buf.size());
    ::close(fd);
    return n == static_cast<ssize_t>(buf.size());
  }
  bool Unlink(const std::string& p) override { return ::unlink(P(p).c_str()) == 0; }
  bool WriteSeq(const std::string& p, uint64_t mib) override {
    int fd = ::open(P(p).c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) return false;
    std::vector<char> b(1 << 20, 'w');
    bool ok = true;
    for (uint64_t i = 0; i < mib && ok; ++i) ok = ::write(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size());
    return ::close(fd) == 0 && ok;
  }
  bool ReadSeq(const std::string& p, uint64_t mib) override {
    int fd = ::open(P(p).c_str(), O_RDONLY);
    if (fd < 0) return false;
    std::vector<char> b(1 << 20);
    uint64_t got = 0;
    for (ssize_t n; (n = ::read(fd, b.data(), b.size())) > 0;) got += static_cast<uint64_t>(n);
    ::close(fd);
    return got == (mib << 20);
  }
};

struct Native : Backend {
  std::unique_ptr<penstock::Client> client;
  std::unique_ptr<penstock::fs::FileSystem> fs;
  static void Say(const penstock::Status& s, const std::string& what) {
    if (!s.ok()) std::fprintf(stderr, "fs_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  }
  bool Mkdir(const std::string& p) override {
    auto r = fs->MkdirPath(p);
    return r.ok() || penstock::fs::ErrnoOf(r.status()) == EEXIST;
  }
  bool Create(const std::string& p, const std::vector<char>& data) override {
    auto f = fs->OpenPath(p, penstock::fs::kWrite | penstock::fs::kCreate | penstock::fs::kExclusive);
    if (!f.ok()) return Say(f.status(), p), false;
    if (!data.empty()) {
      penstock::Status s = (*f)->Write(0, {reinterpret_cast<const std::byte*>(data.data()), data.size()});
      if (!s.ok()) return Say(s, p), false;
    }
    penstock::Status s = (*f)->Close();
    return Say(s, p), s.ok();
  }
  bool Stat(const std::string& p) override { return fs->StatPath(p).ok(); }
  long ReadDir(const std::string& p) override {
    long n = 0;
    std::string cursor;
    do {
      auto page = fs->ReadDirPath(p, cursor);
      if (!page.ok()) return Say(page.status(), p), -1;
      n += static_cast<long>(page->entries.size());
      cursor = page->next;
    } while (!cursor.empty());
    return n;
  }
  bool Read(const std::string& p, std::vector<char>& buf) override {
    auto f = fs->OpenPath(p, penstock::fs::kRead);
    if (!f.ok()) return Say(f.status(), p), false;
    auto n = (*f)->Read(0, {reinterpret_cast<std::byte*>(buf.data()), buf.size()});
    return n.ok() && *n == buf.size() && (*f)->Close().ok();
  }
  bool Unlink(const std::string& p) override { return fs->UnlinkPath(p).ok(); }
  bool WriteSeq(const std::string& p, uint64_t mib) override {
    auto f = fs->OpenPath(p, penstock::fs::kWrite | penstock::fs::kCreate | penstock::fs::kTruncate);
    if (!f.ok()) return Say(f.status(), p), false;
    std::vector<std::byte> b(1 << 20, std::byte{'w'});
    for (uint64_t i = 0; i < mib; ++i) {
      if (penstock::Status s = (*f)->Write(i << 20, b); !s.ok()) return Say(s, p), false;
    }
    return (*f)->Close().ok();
  }
  bool ReadSeq(const std::string& p, uint64_t mib) override {
    auto f = fs->OpenPath(p, penstock::fs::kRead);
    if (!f.ok()) return Say(f.status(), p), false;
    std::vector<std::byte> b(1 << 20);
    uint64_t got = 0;
    for (uint64_t i = 0; i < mib; ++i) {
      auto n = (*f)->Read(i << 20, b);
      if (!n.ok()) return Say(n.status(), p), false;
      got += *n;
    }
    return got == (mib << 20) && (*f)->Close().ok();
  }
};

struct Options {
  int threads = 1;
  long files = 10000;
  size_t size = 0;
  bool shared = true;
  uint64_t seq_mib = 0;
  std::string phases = "create,stat,readdir,read,unlink";
};

std::string Dir(const Options& o, int t) { return o.shared ? "/bench" : "/bench/t" + std::to_string(t); }
std::string File(const Options& o, int t, long i) { return Dir(o, t) + "/f" + std::to_string(t) + "-" + std::to_string(i); }

// Runs fn(thread, index) for every file of every thread; returns ops per second (-1: a failure).
double Phase(const Options& o, const std::function<bool(int, long)>& fn, long per_thread) {
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < o.threads; ++t) {
    ts.emplace_back([&, t] {
      for (long i = 0; i < per_thread && !failed; ++i) failed = failed || !fn(t, i);
    });
  }
  for (auto& th : ts) th.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return failed ? -1 : static_cast<double>(per_thread) * o.threads / secs;
}

int Run(Backend& b, const Options& o) {
  std::map<std::string, double> out;
  const long per = o.files / o.threads;
  const std::vector<char> data(o.size, 'd');
  if (!b.Mkdir("/bench")) return std::fprintf(stderr, "fs_bench: cannot make /bench\n"), 1;
  for (int t = 0; t < o.threads && !o.shared; ++t) b.Mkdir(Dir(o, t));
  auto has = [&](const char* p) { return o.phases.find(p) != std::string::npos; };
  if (has("create")) out["create"] = Phase(o, [&](int t, long i) { return b.Create(File(o, t, i), data); }, per);
  if (has("stat")) out["stat"] = Phase(o, [&](int t, long i) { return b.Stat(File(o, t, i)); }, per);
  if (has("readdir")) {
    std::atomic<long> entries{0};
    const auto start = Clock::now();
    double ok = Phase(o, [&](int t, long) {
      long n = b.ReadDir(Dir(o, t));
      entries += n;
      return n >= 0;
    }, 1);
    out["readdir"] = ok < 0 ? -1 : entries / std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::vector<std::vector<char>> bufs(o.threads, std::vector<char>(o.size));
  if (has("read") && o.size > 0) out["read"] = Phase(o, [&](int t, long i) { return b.Read(File(o, t, i), bufs[t]); }, per);
  if (has("unlink")) out["unlink"] = Phase(o, [&](int t, long i) { return b.Unlink(File(o, t, i)); }, per);
  if (o.seq_mib > 0) {
    auto t0 = Clock::now();
    bool w = b.WriteSeq("/bench/seq", o.seq_mib);
    auto t1 = Clock::now();
    bool r = w && b.ReadSeq("/bench/seq", o.seq_mib);
    auto t2 = Clock::now();
    out["seqwrite"] = w ? o.seq_mib * 1.048576 / std::chrono::duration<double>(t1 - t0).count() : -1;
    out["seqread"] = r ? o.seq_mib * 1.048576 / std::chrono::duration<double>(t2 - t1).count() : -1;
    b.Unlink("/bench/seq");
  }
  std::printf("{\"threads\": %d, \"files\": %ld, \"size\": %zu, \"layout\": \"%s\"", o.threads, per * o.threads, o.size,
              o.shared ? "shared" : "private");
  bool failed = false;
  for (auto& [k, v] : out) {
    std::printf(", \"%s\": %.1f", k.c_str(), v);
    failed |= v < 0;
  }
  std::printf("}\n");
  return failed ? 1 : 0;
}

bool ParseOptions(int argc, char** argv, int first, Options& o) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return std::fprintf(stderr, "fs_bench: %s needs a value\n", a.c_str()), false;
    std::string v = argv[++i];
    if (a == "--threads") o.threads = std::max(1, std::stoi(v));
    else if (a == "--files") o.files = std::stol(v);
    else if (a == "--size") o.size = std::stoul(v);
    else if (a == "--layout") o.shared = v == "shared";
    else if (a == "--seq-mib") o.seq_mib = std::stoull(v);
    else if (a == "--phases") o.phases = v;
    else return std::fprintf(stderr, "fs_bench: unknown option %s\n", a.c_str()), false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: fs_bench posix DIR [options] | fs_bench native MGMT CONTAINER [options]\n";
  if (argc < 3) return std::fputs(usage.c_str(), stderr), 2;
  Options o;
  const std::string mode = argv[1];
  if (mode == "posix") {
    if (!ParseOptions(argc, argv, 3, o)) return 2;
    Posix b(argv[2]);
    return Run(b, o);
  }
  if (mode != "native" || argc < 4 || !ParseOptions(argc, argv, 4, o)) return std::fputs(usage.c_str(), stderr), 2;
  Native b;
  penstock::ClientOptions co;
  co.mgmt_address = argv[2];
  auto c = penstock::Client::Connect(co);
  if (!c.ok()) return std::fprintf(stderr, "fs_bench: %s\n", c.status().ToString().c_str()), 1;
  b.client = std::move(*c);
  auto fs = penstock::fs::FileSystem::Open(*b.client, argv[3]);
  if (!fs.ok() && penstock::fs::ErrnoOf(fs.status()) == ENOENT) {
    if (auto f = penstock::fs::FileSystem::Format(*b.client, argv[3]); f.ok()) fs = penstock::fs::FileSystem::Open(*b.client, argv[3]);
  }
  if (!fs.ok()) return std::fprintf(stderr, "fs_bench: %s\n", fs.status().ToString().c_str()), 1;
  b.fs = std::move(*fs);
  return Run(b, o);
}
