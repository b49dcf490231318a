#include "penstock/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "client/async_op.h"
#include "client/capability_cache.h"
#include "client/container_cache.h"
#include "client/record_store.h"
#include "client/data_path.h"
#include "client/lost_objects.h"
#include "client/cluster_view.h"
#include "client/object_impl.h"
#include "client/object_ids.h"
#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "client/stripe_pipeline.h"
#include "client/write_version.h"
#include "common/fork_generation.h"
#include "common/log.h"
#include "mgmt_client/cluster_map_watch.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt_client/redundancy_proto.h"
#include "protocol/object_head.h"
#include "transport/rpc_client.h"

namespace penstock {

namespace {

Result<ContainerInfo> FromProto(const v1::Container& c) {
  PS_ASSIGN_OR_RETURN(Redundancy red, ContainerRedundancy(c));
  if (red.min_durable == 0) red.min_durable = red.DefaultQuorum();
  return ContainerInfo{c.id(), c.name(), red, c.stripe_unit(), c.created_ms()};
}

class MemorySource : public ObjectSource {
 public:
  explicit MemorySource(std::span<const std::byte> data) : data_(data) {}
  Status ReadAt(uint64_t offset, std::span<std::byte> out) override {
    std::memcpy(out.data(), data_.data() + offset, out.size());
    return OkStatus();
  }

 private:
  std::span<const std::byte> data_;
};

class MemorySink : public ObjectSink {
 public:
  explicit MemorySink(std::vector<std::byte>* out) : out_(out) {}
  Status WriteAt(uint64_t offset, std::span<const std::byte> data) override {
    std::memcpy(out_->data() + offset, data.data(), data.size());
    return OkStatus();
  }

 private:
  std::vector<std::byte>* out_;
};

class FileSource : public ObjectSource {
 public:
  FileSource(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status ReadAt(uint64_t offset, std::span<std::byte> out) override {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "reading '" + path_ + "'");
      if (n == 0) return Aborted("'" + path_ + "' shrank while it was being stored");
      done += static_cast<size_t>(n);
    }
    return OkStatus();
  }

 private:
  int fd_;
  std::string path_;
};

class FileSink : public ObjectSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status WriteAt(uint64_t offset, std::span<const std::byte> data) override {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "writing '" + path_ + "'");
      done += static_cast<size_t>(n);
    }
    return OkStatus();
  }

 private:
  int fd_;
  std::string path_;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

// The data path (mgmt, UCX, map, capabilities, shards, stripe I/O) is the base: destroyed after
// the members below.
class Client::Impl : public DataPath {
 public:
  // The process that connected, and its ForkGeneration: in a forked child the Client's threads,
  // locks and connections are the parent's, so every call fails at once (InThisProcess) and
  // the destructor leaks it.
  const uint64_t fork_generation = ForkGeneration();
  const pid_t pid = ::getpid();
  ClientOptions options;
  OpTracker tracker;
  std::unique_ptr<ContainerCache> containers;  // lookups at the current map epoch
  std::unique_ptr<RecordStore> records;
  // Last member: destroyed first, so no map push arrives while the rest is torn down.
  std::unique_ptr<ClusterMapWatch> watch;

  bool forked_away() const { return fork_generation != ForkGeneration(); }
  Status InThisProcess() const {
    if (!forked_away()) return OkStatus();
    return FailedPrecondition("this penstock client was connected in process " + std::to_string(pid) +
                              " and cannot be used in process " + std::to_string(::getpid()) +
                              ", a fork of it (its threads and connections stayed in the parent): "
                              "connect a new Client in this process");
  }

  Result<ContainerInfo> Container(const std::string& name) { return containers->Lookup(name); }

  Result<ContainerInfo> FetchContainer(const std::string& name) {
    v1::GetContainerRequest req;
    req.set_name(name);
    PS_ASSIGN_OR_RETURN(v1::Container c, mgmt->GetContainer(req));
    return FromProto(c);
  }

  static std::string What(const std::string& container, const std::string& name) {
    return "object '" + name + "' in container '" + container + "'";
  }

  WireShardKey HeadKey(const ContainerInfo& c, const std::string& name) {
    auto [hi, lo] = HeadObjectId(c.id, name);
    return {c.id, hi, lo, UINT64_MAX, 0, 0};
  }

  static const Redundancy& RedundancyOf(const ContainerInfo& c) { return c.redundancy; }

  // The head of `name`, or kNotFound naming the object.
  Result<ObjectHead> ReadHead(const ContainerInfo& c, const std::string& name) {
    auto data = io->ReadHead(RedundancyOf(c), HeadKey(c, name));
    if (!data.ok()) {
      if (data.status().code() == StatusCode::kNotFound) {
        return NotFound(What(c.name, name) + " does not exist; see `penstock ls --container " +
                        c.name + "`");
      }
      return data.status().WithContext("reading the head of " + What(c.name, name));
    }
    auto head = DecodeObjectHead(data->data.span());
    if (!head.ok()) return head.status().WithContext(What(c.name, name));
    return head;
  }

  static StripeLayout Layout(const ContainerInfo& c, const ObjectHead& h) {
    return {c.id, h.data_hi, h.data_lo, h.size, h.stripe_unit, RedundancyOf(c), h.dense};
  }

  Status PutFrom(const std::string& container, const std::string& name, ObjectSource& source,
                 uint64_t size, const ProgressFn& progress) {
    PS_RETURN_IF_ERROR(ValidateObjectName(name));
    PS_ASSIGN_OR_RETURN(ContainerInfo c, Container(container));
    ObjectHead head;
    head.name = name;
    head.size = size;
    head.stripe_unit = c.stripe_unit;
    std::tie(head.data_hi, head.data_lo) = NewDataId();
    head.mtime_ms = WallClockMs();
    head.dense = true;  // every stripe is written below: one found nowhere is lost
    const StripeLayout layout = Layout(c, head);
    const std::string what = What(container, name);
    if (size <= kMaxInlineBytes) return PutInline(c, head, source, progress);
    const uint64_t version = NewVersion();

    std::chrono::steady_clock::time_point landed;
    Status s = WriteStripes(*io, layout, source, options.max_inflight_stripes, version, progress, what, &landed);
    if (!s.ok()) {
      DeleteStripes(*io, layout, layout.stripe_count());  // no head names them
      return s;
    }
    // The head is the commit point: until it is written the new data is invisible (and its
    // stripes orphans to mgmt's repair service: hence the window, see object_head.h).
    const uint64_t head_version = NewVersion();
    auto replaced = std::make_shared<ReplacedHead>(head_version);
    s = io->WriteHead(RedundancyOf(c), HeadKey(c, name), EncodeObjectHead(head), head_version,
                      landed + io->commit_window(), replaced);
    if (!s.ok()) return HeadNotCommitted(c, name, head, layout, s.WithContext("committing " + what));
    FreeReplaced(c, head, *replaced);
    return OkStatus();
  }

  // A delete that reads the head first (a read falls back to earlier placements).
  Status DeleteAfterRead(const ContainerInfo& c, const std::string& name) {
    PS_ASSIGN_OR_RETURN(ObjectHead head, ReadHead(c, name));
    PS_RETURN_IF_ERROR(io->DeleteHead(RedundancyOf(c), HeadKey(c, name), NewVersion()));
    DeleteStripes(*io, Layout(c, head), head.stripe_count());
    return OkStatus();
  }

  // After `head` was written: the stripes of the head it replaced (its targets said which, in
  // the same requests: kWriteReturnReplaced) when that one named other data. What a target
  // did not say stays behind as orphans for mgmt's repair service.
  void FreeReplaced(const ContainerInfo& c, const ObjectHead& head, const ReplacedHead& replaced) {
    if (auto old = replaced.OtherObject(head.data_hi, head.data_lo)) {
      DeleteStripes(*io, Layout(c, *old), old->stripe_count());
    }
  }

  // A small object's put: its bytes go in its head, one shard write per head copy.
  Status PutInline(const ContainerInfo& c, ObjectHead& head, ObjectSource& source, const ProgressFn& progress) {
    head.inlined = true;
    head.data.resize(head.size);
    if (head.size) PS_RETURN_IF_ERROR(source.ReadAt(0, head.data));
    const uint64_t version = NewVersion();
    auto replaced = std::make_shared<ReplacedHead>(version);
    PS_RETURN_IF_ERROR(io->WriteHead(RedundancyOf(c), HeadKey(c, head.name), EncodeObjectHead(head), version,
                                     std::chrono::steady_clock::time_point::max(), replaced)
                           .WithContext("storing " + What(c.name, head.name)));
    FreeReplaced(c, head, *replaced);
    if (progress) progress(head.size, head.size);
    return OkStatus();
  }

  // A put's head write failed with `s`. It may have landed all the same (NewStripesUnreferenced
  // says when it cannot have): then readers follow it to the new stripes, so those stay unless
  // it cannot have, as garbage if the head never lands. The old version's stripes stay either
  // way (a head naming them may still be the one readers find).
  Status HeadNotCommitted(const ContainerInfo& c, const std::string& name, const ObjectHead& head,
                          const StripeLayout& layout, Status s) {
    auto now = ReadHead(c, name);
    if (NewStripesUnreferenced(s, now, head.data_hi, head.data_lo)) {
      DeleteStripes(*io, layout, layout.stripe_count());
      return s;
    }
    const bool ours = now.ok() && now->data_hi == head.data_hi && now->data_lo == head.data_lo;
    PS_LOG_WARN("{}: the new version's {} stripes are kept (its head may have landed: {})",
                What(c.name, name), layout.stripe_count(),
                ours ? "it did, it is the one readers find" : "the failure does not say it did not");
    if (ours) return s.WithContext("the new version is stored and readable, but its commit did not complete; put it again");
    return s;
  }

  // Reads object `name` into `sink`; `prepare(size)` runs once the head is known.
  Status GetInto(const std::string& container, const std::string& name, ObjectSink& sink,
                 const std::function<Status(uint64_t)>& prepare, const ProgressFn& progress) {
    PS_ASSIGN_OR_RETURN(ContainerInfo c, Container(container));
    auto head = ReadHead(c, name);
    if (!head.ok()) return ExplainLoss(*mgmt, container, name, 0, 0, head.status());
    if (prepare) PS_RETURN_IF_ERROR(prepare(head->size));
    if (head->inlined) {
      if (head->size) PS_RETURN_IF_ERROR(sink.WriteAt(0, head->data));
      if (progress) progress(head->size, head->size);
      return OkStatus();
    }
    Status s = ReadStripes(*io, Layout(c, *head), sink, options.max_inflight_stripes, progress, What(container, name));
    return s.ok() ? s : ExplainLoss(*mgmt, container, name, head->data_hi, head->data_lo, s);
  }

  // Marks the objects of `list` (data ids `ids`, by name) that mgmt recorded lost, and adds
  // those recorded lost whose heads went too.
  void MarkLost(const std::string& container, const std::string& prefix,
                std::map<std::string, ObjectInfo>& list, const std::map<std::string, std::pair<uint64_t, uint64_t>>& ids) {
    auto lost = ListLost(*mgmt, container, prefix);
    if (!lost.ok()) {
      PS_LOG_WARN("cannot ask mgmt which objects of '{}' are lost: {}", container, lost.status().ToString());
      return;
    }
    for (const v1::LostObject& o : *lost) {
      auto id = ids.find(o.name());
      if (id == ids.end()) {
        list[o.name()] = ObjectInfo{o.name(), o.bytes(), 0, 0, LostText(o)};
      } else if (id->second == std::pair<uint64_t, uint64_t>{o.data_hi(), o.data_lo()}) {
        list[o.name()].lost = LostText(o);
      }
    }
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() {
  if (impl_ && impl_->forked_away()) (void)impl_.release();  // the parent's: see Impl
}

namespace {

// The ForkGeneration of the process that first connected a Client, or none. A forked child of
// it cannot connect one: gRPC's and UCX's process-wide state (pollers, their threads) came over
// mid-flight, and the first call would hang.
constexpr uint64_t kNoneConnected = UINT64_MAX;
std::atomic<uint64_t> g_connected_in{kNoneConnected};

}  // namespace

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  uint64_t first = kNoneConnected;
  if (!g_connected_in.compare_exchange_strong(first, ForkGeneration()) && first != ForkGeneration()) {
    return FailedPrecondition(
        "a penstock client cannot connect in process " + std::to_string(::getpid()) +
        ": it was forked from a process that had connected one, and the process-wide state of the control "
        "plane (gRPC) and data plane (UCX) that connecting started there cannot start again in a forked "
        "child; start this process with 'spawn' or 'forkserver' instead of fork (or fork before connecting)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  DataPathOptions dp;
  dp.mgmt_address = options.mgmt_address;
  dp.api_key = options.api_key;
  dp.tls = TlsOptions{options.tls_ca, options.tls_cert, options.tls_key};
  dp.timeout = options.timeout;
  dp.straggler = options.straggler_timeout;
  dp.workers = options.data_workers;
  dp.net_devices = options.net_devices;
  dp.local_direct = options.local_direct;
  PS_RETURN_IF_ERROR(impl->Open(dp));
  ClusterView* view = impl->view.get();
  Impl* raw = impl.get();
  impl->containers = std::make_unique<ContainerCache>([raw](const std::string& name) { return raw->FetchContainer(name); },
                                                      [view] { return view->epoch(); });
  impl->records = std::make_unique<RecordStore>(impl->io.get(), view);
  impl->watch = impl->mgmt->WatchClusterMap([view](v1::ClusterMap map) { view->Apply(map); },
                                            view->epoch());
  impl->io->set_report_degraded([mgmt = impl->mgmt.get()](uint64_t container,
                                                           const std::vector<uint32_t>& ids) -> Result<uint64_t> {
    v1::ReportDegradedWriteRequest req;
    req.set_container_id(container);
    for (uint32_t id : ids) req.add_target_ids(id);
    PS_ASSIGN_OR_RETURN(v1::ReportDegradedWriteResponse resp, mgmt->ReportDegradedWrite(req));
    return resp.epoch();
  });
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<ContainerInfo> Client::CreateContainer(const std::string& name, const ContainerProps& props) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  v1::CreateContainerRequest req;
  req.set_name(name);
  if (props.redundancy) *req.mutable_scheme() = RedundancyToProto(*props.redundancy);
  req.set_min_durable(props.min_durable);
  req.set_stripe_unit(props.stripe_unit);
  PS_ASSIGN_OR_RETURN(v1::Container c, impl_->mgmt->CreateContainer(req));
  return FromProto(c);
}

Result<ContainerInfo> Client::GetContainer(const std::string& name) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  return impl_->Container(name);
}

Result<std::vector<ContainerInfo>> Client::ListContainers() {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(v1::ListContainersResponse r, impl_->mgmt->ListContainers(v1::ListContainersRequest()));
  std::vector<ContainerInfo> out;
  for (const auto& c : r.containers()) {
    PS_ASSIGN_OR_RETURN(ContainerInfo info, FromProto(c));
    out.push_back(std::move(info));
  }
  return out;
}

Status Client::DeleteContainer(const std::string& name, bool force) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(auto objects, List(name));
  if (!objects.empty()) {
    if (!force) {
      return FailedPrecondition("container '" + name + "' holds " + std::to_string(objects.size()) +
                                " objects; remove them first or pass --force");
    }
    for (const auto& o : objects) PS_RETURN_IF_ERROR(Delete(name, o.name));
  }
  v1::DeleteContainerRequest req;
  req.set_name(name);
  impl_->containers->Forget(name);
  return impl_->mgmt->DeleteContainer(req).status();
}

Status Client::PutFile(const std::string& container, const std::string& name,
                       const std::string& local_path, const ProgressFn& progress) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  Fd f;
  f.fd = ::open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return ErrnoStatus(errno, "cannot open '" + local_path + "'");
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return ErrnoStatus(errno, "cannot stat '" + local_path + "'");
  if (!S_ISREG(st.st_mode)) return InvalidArgument("'" + local_path + "' is not a regular file");
  FileSource source(f.fd, local_path);
  return impl_->PutFrom(container, name, source, static_cast<uint64_t>(st.st_size), progress);
}

Status Client::Put(const std::string& container, const std::string& name,
                   std::span<const std::byte> data) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  MemorySource source(data);
  return impl_->PutFrom(container, name, source, data.size(), {});
}

Status Client::GetFile(const std::string& container, const std::string& name,
                       const std::string& local_path, const ProgressFn& progress) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  std::string tmp = local_path + ".penstock-partial";
  Fd f;
  auto prepare = [&](uint64_t size) -> Status {
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0) return ErrnoStatus(errno, "cannot create '" + tmp + "'");
    if (::ftruncate(f.fd, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(errno, "cannot size '" + tmp + "'");
    }
    return OkStatus();
  };
  // The file is created once the head says how large the object is.
  struct LazyFileSink : ObjectSink {
    const Fd* f;
    std::string path;
    Status WriteAt(uint64_t off, std::span<const std::byte> d) override {
      return FileSink(f->fd, path).WriteAt(off, d);
    }
  } sink;
  sink.f = &f;
  sink.path = tmp;
  Status s = impl_->GetInto(container, name, sink, prepare, progress);
  if (s.ok() && ::rename(tmp.c_str(), local_path.c_str()) != 0) {
    s = ErrnoStatus(errno, "cannot rename '" + tmp + "' to '" + local_path + "'");
  }
  if (!s.ok() && f.fd >= 0) ::unlink(tmp.c_str());
  return s;
}

Result<std::vector<std::byte>> Client::Get(const std::string& container, const std::string& name) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  std::vector<std::byte> out;
  MemorySink sink(&out);
  PS_RETURN_IF_ERROR(impl_->GetInto(container, name, sink,
                                    [&](uint64_t size) {
                                      out.resize(size);
                                      return OkStatus();
                                    },
                                    {}));
  return out;
}

Result<ObjectInfo> Client::Stat(const std::string& container, const std::string& name) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  auto h = impl_->ReadHead(c, name);
  if (!h.ok()) return ExplainLoss(*impl_->mgmt, container, name, 0, 0, h.status());
  ObjectInfo info{h->name, h->size, h->stripe_unit, h->mtime_ms, ""};
  // Its data lost with a target: says so (a read of it answers kDataLoss).
  auto lost = FindLost(*impl_->mgmt, container, name, h->data_hi, h->data_lo);
  if (lost.ok() && lost->object) info.lost = LostText(*lost->object);
  return info;
}

Result<std::vector<ObjectInfo>> Client::List(const std::string& container, const ListOptions& options) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  PS_RETURN_IF_ERROR(impl_->view->Refresh());
  // Heads of protected containers have several copies (and tombstones for deleted objects):
  // the newest copy of each head id decides.
  // Up to m targets may be unreachable: every head has m + 1 copies on distinct targets.
  const Redundancy red = Impl::RedundancyOf(c);
  std::map<std::pair<uint64_t, uint64_t>, ListEntry> newest;
  uint32_t unreachable = 0;
  for (const TargetRef& t : impl_->view->targets()) {
    if (t.lost) continue;
    auto entries = impl_->shards->List(t, c.id, kListHeadsOnly | kListWithData | kListDataPrefix);
    if (!entries.ok()) {
      if (red.protected_() && ++unreachable <= red.m) continue;
      return entries.status();
    }
    for (auto& e : *entries) {
      auto& slot = newest[{e.key.object_hi, e.key.object_lo}];
      if (slot.shard_version <= e.shard_version) slot = std::move(e);
    }
  }
  std::map<std::string, ObjectInfo> by_name;
  std::map<std::string, std::pair<uint64_t, uint64_t>> ids;
  for (auto& [id, e] : newest) {
    if (e.data.empty()) continue;  // tombstone: deleted
    auto h = DecodeObjectHeadPrefix(e.data);
    if (!h.ok()) {
      PS_LOG_WARN("skipping an unreadable object head: {}", h.status().ToString());
      continue;
    }
    if (!h->name.starts_with(options.prefix)) continue;
    by_name[h->name] = ObjectInfo{h->name, h->size, h->stripe_unit, h->mtime_ms, ""};
    ids[h->name] = {h->data_hi, h->data_lo};
  }
  impl_->MarkLost(container, options.prefix, by_name, ids);
  std::vector<ObjectInfo> out;
  for (auto& [n, info] : by_name) out.push_back(std::move(info));
  return out;
}

Status Client::Delete(const std::string& container, const std::string& name) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  // Head first: the object disappears at once; its stripes are then removed. The head's
  // targets say what they held (one request per copy, no read first), except while a join
  // is not settled: the head may still be only where an earlier placement put it, which
  // only a read (falling back there) finds.
  if (impl_->view->has_earlier_placements()) return impl_->DeleteAfterRead(c, name);
  const uint64_t version = NewVersion();
  auto deleted = std::make_shared<ReplacedHead>(version);
  Status s = impl_->io->DeleteHead(Impl::RedundancyOf(c), impl_->HeadKey(c, name), version, deleted);
  const std::string missing = Impl::What(container, name) + " does not exist; see `penstock ls --container " + container + "`";
  if (s.code() == StatusCode::kNotFound) return NotFound(missing);
  PS_RETURN_IF_ERROR(s.WithContext("deleting " + Impl::What(container, name)));
  if (!deleted->answered()) return OkStatus();  // targets from before the flag: orphans later
  const std::optional<ShardData> found = deleted->Newest();
  if (!found || found->data.size() == 0) return NotFound(missing);  // none, or a tombstone: a protected
                                                                     // head leaves one more
  auto head = DecodeObjectHeadPrefix(found->data.span());
  if (!head.ok()) return OkStatus();  // gone all the same; what it named is for orphan collection
  DeleteStripes(*impl_->io, Impl::Layout(c, *head), head->stripe_count());
  return OkStatus();
}

Result<std::shared_ptr<Object>> Client::Open(const std::string& container, const std::string& name,
                                             const OpenOptions& options) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_RETURN_IF_ERROR(ValidateObjectName(name));
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  if (options.replace) {
    ObjectHead h;
    h.name = name;
    h.stripe_unit = c.stripe_unit;
    std::tie(h.data_hi, h.data_lo) = NewDataId();
    h.mtime_ms = WallClockMs();
    return std::shared_ptr<Object>(std::make_shared<ObjectImpl>(impl_->io.get(), &impl_->tracker, c.id,
                                                                Impl::RedundancyOf(c), impl_->HeadKey(c, name),
                                                                std::move(h), /*uncommitted=*/true));
  }
  auto head = impl_->ReadHead(c, name);
  if (!head.ok()) {
    if (head.status().code() != StatusCode::kNotFound || !options.create) {
      return ExplainLoss(*impl_->mgmt, container, name, 0, 0, head.status());
    }
    ObjectHead h;
    h.name = name;
    h.stripe_unit = c.stripe_unit;
    std::tie(h.data_hi, h.data_lo) = NewDataId();
    h.mtime_ms = WallClockMs();
    PS_RETURN_IF_ERROR(impl_->io->WriteHead(Impl::RedundancyOf(c), impl_->HeadKey(c, name), EncodeObjectHead(h),
                                            NewVersion()));
    head = std::move(h);
  }
  return std::shared_ptr<Object>(std::make_shared<ObjectImpl>(impl_->io.get(), &impl_->tracker, c.id,
                                                              Impl::RedundancyOf(c), impl_->HeadKey(c, name),
                                                              std::move(*head)));
}

Result<Record> Client::GetRecord(const std::string& container, const std::string& group, const std::string& key) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  return impl_->records->Get(c, group, key);
}

Result<uint64_t> Client::PutRecord(const std::string& container, const std::string& group, const std::string& key,
                                   std::span<const std::byte> value, RecordCondition condition,
                                   const RecordLeases* held) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  return impl_->records->Put(c, group, key, value, condition, held);
}

Status Client::DeleteRecord(const std::string& container, const std::string& group, const std::string& key,
                            std::optional<uint64_t> version, const RecordLeases* held) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  return impl_->records->Delete(c, group, key, version, held);
}

Result<RecordPage> Client::ListRecords(const std::string& container, const std::string& group,
                                       const std::string& cursor, uint32_t limit) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  return impl_->records->List(c, group, cursor, limit);
}

Result<std::unique_ptr<RecordLeases>> Client::LockRecords(const std::string& container,
                                                          std::vector<RecordRef> records) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(ContainerInfo c, impl_->Container(container));
  return impl_->records->Lock(c, std::move(records));
}

Result<Client::Space> Client::ClusterSpace() {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(v1::ClusterMap map, impl_->mgmt->GetClusterMap());
  Space s;
  for (const auto& t : map.targets()) {
    if (t.state() == v1::TARGET_STATE_LOST) continue;
    s.capacity_bytes += t.capacity_bytes();
    s.free_bytes += t.capacity_bytes() > t.used_bytes() ? t.capacity_bytes() - t.used_bytes() : 0;
  }
  return s;
}

uint64_t Client::map_epoch() const { return impl_->forked_away() ? 0 : impl_->view->epoch(); }

namespace {

class UcxRegistration : public MemoryRegistration {
 public:
  explicit UcxRegistration(std::shared_ptr<RpcClient::Registration> r) : r_(std::move(r)) {}

 private:
  std::shared_ptr<RpcClient::Registration> r_;
};

}  // namespace

Result<std::unique_ptr<MemoryRegistration>> Client::RegisterMemory(void* data, size_t size) {
  PS_RETURN_IF_ERROR(impl_->InThisProcess());
  PS_ASSIGN_OR_RETURN(auto r, impl_->rpc->Register(data, size));
  return std::unique_ptr<MemoryRegistration>(std::make_unique<UcxRegistration>(std::move(r)));
}

ReadPathStats Client::read_path_stats() const {
  const auto& s = impl_->io->stats();
  return {s.read_bytes.load(), s.read_placed.load(), s.read_copied.load()};
}

}  // namespace penstock
