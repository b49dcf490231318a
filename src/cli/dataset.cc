#include "cli/dataset.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/destination.h"
#include "cli/local_tree.h"
#include "cli/object_stream.h"
#include "cli/tree_run.h"

namespace penstock::cli {

namespace {

constexpr unsigned kStripesInFlight = 64;

uint64_t TotalBytes(const std::vector<LocalFile>& files) {
  uint64_t n = 0;
  for (const auto& f : files) n += f.size;
  return n;
}

uint64_t TotalBytes(const std::vector<ObjectInfo>& objects) {
  uint64_t n = 0;
  for (const auto& o : objects) n += o.size;
  return n;
}

// Feeds a transfer's (done, total) progress into the run's byte count; takes it back if the
// transfer fails.
class ByteCounter {
 public:
  explicit ByteCounter(TreeProgress& p) : p_(p) {}
  void operator()(uint64_t done, uint64_t) {
    p_.AddBytes(static_cast<int64_t>(done) - static_cast<int64_t>(seen_));
    seen_ = done;
  }
  void TakeBack() { p_.AddBytes(-static_cast<int64_t>(std::exchange(seen_, 0))); }

 private:
  TreeProgress& p_;
  uint64_t seen_ = 0;
};

// Gets object `o` into `root_fd` (shown as `dir`) at its name after `prefix`.
void GetOne(Client& client, ObjectReader& reader, const TreeOptions& o, int root_fd, const std::string& prefix,
            const ObjectInfo& info, TreeRun& run) {
  const std::string rel = info.name.substr(prefix.size());
  const std::string local = o.dir + "/" + rel;
  if (!info.lost.empty()) return run.Fail(local, info.name, DataLoss(info.lost));
  auto obj = client.Open(o.container, info.name);
  if (!obj.ok()) return run.Fail(local, info.name, obj.status());
  std::string leaf;
  auto parent = OpenParentIn(root_fd, o.dir, rel, &leaf);
  if (!parent.ok()) {
    const bool bad_name = parent.status().code() == StatusCode::kInvalidArgument;
    return run.Fail(local, info.name,
                    bad_name ? InvalidArgument("the name cannot be a path under '" + o.dir + "': " +
                                               parent.status().message())
                             : parent.status());
  }
  Status s;
  ByteCounter counter(run.progress());
  if (auto dest = Destination::OpenIn(*parent, leaf, local); !dest.ok()) {
    s = dest.status();
  } else if (auto n = reader.Read(**obj, **dest, std::ref(counter)); !n.ok()) {
    s = n.status();
  } else {
    s = (*dest)->Commit();
    if (s.ok()) run.Done(*n);
  }
  ::close(*parent);
  if (!s.ok()) {
    counter.TakeBack();
    run.Fail(local, info.name, s);
  }
}

}  // namespace

unsigned StripesPerJob(unsigned jobs) { return std::max(2u, kStripesInFlight / std::max(1u, jobs)); }

int RunPutTree(Client& client, const TreeOptions& o) {
  auto listing = ListTree(o.dir);
  if (!listing.ok()) return ReportError(listing.status(), o.json);
  InstallInterruptHandler();
  const std::string prefix = DirectoryPrefix(o.prefix);
  TreeRun run("put", o, listing->files.size(), TotalBytes(listing->files));
  for (const auto& p : listing->skipped) run.Skip(p.path, p.why);
  for (const auto& p : listing->failed) run.Fail(p.path, "", Internal(p.why));
  run.Run(listing->files.size(), o.jobs, [&](size_t i, unsigned) {
    const LocalFile& f = listing->files[i];
    const std::string name = prefix + f.rel;
    ByteCounter counter(run.progress());
    uint64_t size = f.size;
    Status s = client.PutFile(o.container, name, f.path, [&](uint64_t done, uint64_t total) {
      size = total;
      counter(done, total);
    });
    if (s.ok()) return run.Done(size);
    counter.TakeBack();
    run.Fail(f.path, name, s);
  });
  return run.Finish();
}

int RunGetTree(Client& client, const TreeOptions& o) {
  const std::string prefix = DirectoryPrefix(o.prefix);
  auto objects = client.List(o.container, ListOptions{prefix});
  if (!objects.ok()) return ReportError(objects.status(), o.json);
  if (objects->empty()) {
    return ReportError(NotFound("no object in container '" + o.container + "' has a name starting with '" + prefix +
                                "'; see `penstock ls --container " + o.container + " --prefix " + prefix + "`"),
                       o.json);
  }
  auto chunk = ReadChunkBytes(client, o.container);
  if (!chunk.ok()) return ReportError(chunk.status(), o.json);
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  const int root_fd = ::open(o.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return ReportError(ErrnoStatus(errno, "cannot create or open the directory '" + o.dir + "'"), o.json);
  }
  InstallInterruptHandler();
  TreeRun run("get", o, objects->size(), TotalBytes(*objects));
  std::vector<std::unique_ptr<ObjectReader>> readers(std::max(1u, o.jobs));
  run.Run(objects->size(), o.jobs, [&](size_t i, unsigned job) {
    if (!readers[job]) readers[job] = std::make_unique<ObjectReader>(*chunk, StripesPerJob(o.jobs));
    GetOne(client, *readers[job], o, root_fd, prefix, (*objects)[i], run);
  });
  ::close(root_fd);
  return run.Finish();
}

}  // namespace penstock::cli
