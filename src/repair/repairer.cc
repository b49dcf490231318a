#include "repair/repairer.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <thread>

#include "client/capability_cache.h"
#include "client/cluster_view.h"
#include "client/rpc_caller.h"
#include "client/shard_client.h"
#include "client/stripe_io.h"
#include "common/await.h"
#include "common/log.h"
#include "common/thread_pool.h"
#include "mgmt_client/mgmt_client.h"
#include "protocol/object_head.h"
#include "protocol/redundancy.h"
#include "transport/rpc_client.h"

namespace penstock {

namespace {

using Clock = std::chrono::steady_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The text a target reports for a corrupt shard (engine ShardKey::ToString).
std::string KeyText(const WireShardKey& k) {
  std::string stripe = k.stripe == UINT64_MAX ? std::string("head") : std::to_string(k.stripe);
  return fmt::format("c={} obj={:016x}:{:016x} stripe={} shard={}", k.container, k.object_hi, k.object_lo, stripe,
                     k.shard);
}

// Target `id` among `targets`; null when it is not there.
const TargetRef* FindTarget(const std::vector<TargetRef>& targets, uint32_t id) {
  for (const TargetRef& t : targets) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

// Stripes rebuilt at once (each one a read of K shards and a write of the missing ones).
constexpr unsigned kRepairWorkers = 8;

struct Holder {
  uint32_t target;
  uint64_t version;
  uint64_t length;
};

// Every shard of one container that the live targets hold, by (object, stripe) then shard.
using StripeId = std::tuple<uint64_t, uint64_t, uint64_t>;
using ShardIndex = std::map<StripeId, std::map<uint32_t, std::vector<Holder>>>;

}  // namespace

void Repairer::ForgetOrphans(uint64_t container) {
  orphans_.erase(orphans_.lower_bound({container, 0, 0}), orphans_.lower_bound({container + 1, 0, 0}));
}

void Repairer::CollectOrphans(uint64_t container, const std::vector<TargetRef>& targets,
                              std::map<std::pair<uint64_t, uint64_t>, Unnamed> found, Clock::time_point heads_listed,
                              Clock::time_point data_listed, std::chrono::milliseconds grace) {
  // What this container's earlier passes noted and this one no longer finds unnamed is named
  // now (its head landed) or gone.
  for (auto it = orphans_.lower_bound({container, 0, 0}); it != orphans_.end() && std::get<0>(it->first) == container;) {
    if (!found.count({std::get<1>(it->first), std::get<2>(it->first)})) {
      it = orphans_.erase(it);
    } else {
      ++it;
    }
  }
  Counter* deleted_metric = nullptr;
  if (options_.metrics) {
    deleted_metric = &options_.metrics->GetCounter("penstock_repair_orphan_shards_deleted_total",
                                                   "shards deleted by repair because no object head names their data");
  }
  uint64_t shards_deleted = 0, collected = 0;
  for (auto& [id, u] : found) {
    const auto key = std::make_tuple(container, id.first, id.second);
    // Noted as of the end of the listing that found it (every shard counted landed before);
    // due when the heads were listed at least the grace period after that (a head landing
    // later comes from a put that gave up: PutCommitWindow).
    auto [it, fresh] = orphans_.try_emplace(key, Orphan{data_listed, u.shards.size(), u.newest});
    Orphan& o = it->second;
    if (fresh) continue;
    if (o.shards != u.shards.size() || o.newest != u.newest) {  // still being written: wait again
      o = Orphan{data_listed, u.shards.size(), u.newest};
      continue;
    }
    if (heads_listed - o.first_seen < grace) continue;
    uint64_t failed = 0;
    for (const auto& [target, k] : u.shards) {
      const TargetRef* t = FindTarget(targets, target);
      if (t == nullptr) continue;
      Status s = dp_.shards->DeleteTo(*t, k);
      if (s.ok() || s.code() == StatusCode::kNotFound) {
        ++shards_deleted;
        if (deleted_metric) deleted_metric->Inc();
      } else {
        ++failed;
      }
    }
    PS_LOG_INFO("repair: deleted {} orphan shard(s) of data {:016x}:{:016x} in container id {} (no object head "
                "has named it for {} s){}",
                u.shards.size() - failed, id.first, id.second, container,
                std::chrono::duration_cast<std::chrono::seconds>(heads_listed - o.first_seen).count(),
                failed ? fmt::format("; {} could not be deleted, next pass", failed) : "");
    if (failed == 0) {
      orphans_.erase(it);
      ++collected;
    }
  }
  Update([&](v1::RepairStatus& st) {
    st.set_total_orphan_shards_deleted(st.total_orphan_shards_deleted() + shards_deleted);
    st.set_total_orphans_collected(st.total_orphans_collected() + collected);
  });
}

std::set<std::pair<uint64_t, uint64_t>> Repairer::CollectTombstones(
    uint64_t container, const std::vector<TargetRef>& targets,
    const std::map<std::pair<uint64_t, uint64_t>, HeadCopies>& heads, Clock::time_point heads_listed,
    std::chrono::milliseconds grace) {
  std::set<std::pair<uint64_t, uint64_t>> gone;
  // What is no longer the same tombstone everywhere (rewritten, or gone) is forgotten.
  for (auto it = tombstones_.lower_bound({container, 0, 0});
       it != tombstones_.end() && std::get<0>(it->first) == container;) {
    auto h = heads.find({std::get<1>(it->first), std::get<2>(it->first)});
    if (h == heads.end() || !h->second.same_tombstone || h->second.version != it->second.version) {
      it = tombstones_.erase(it);
    } else {
      ++it;
    }
  }
  Counter* metric = nullptr;
  if (options_.metrics) {
    metric = &options_.metrics->GetCounter("penstock_repair_tombstones_collected_total",
                                           "object head tombstones removed by repair once every copy held them");
  }
  uint64_t collected = 0;
  for (const auto& [id, h] : heads) {
    if (!h.same_tombstone) continue;
    auto [it, fresh] = tombstones_.try_emplace({container, id.first, id.second}, Tombstone{heads_listed, h.version});
    if (fresh || heads_listed - it->second.first_seen < grace) continue;
    bool done = true;
    for (const auto& [target, key] : h.copies) {
      const TargetRef* t = FindTarget(targets, target);
      if (t == nullptr) continue;
      Status s = dp_.shards->DeleteTo(*t, key, h.version);
      // kAborted: a put of the name rewrote this copy since; it stays, and so does the object.
      if (!s.ok() && s.code() != StatusCode::kNotFound && s.code() != StatusCode::kAborted) done = false;
    }
    if (done) {
      tombstones_.erase(it);
      gone.insert(id);
      ++collected;
      if (metric) metric->Inc();
    }
  }
  if (collected > 0) {
    PS_LOG_INFO("repair: removed {} tombstone(s) of deleted objects in container id {}", collected, container);
  }
  Update([&](v1::RepairStatus& st) { st.set_total_tombstones_collected(st.total_tombstones_collected() + collected); });
  return gone;
}

void Repairer::CollectDeletedContainers(const std::map<uint64_t, std::vector<TargetRef>>& held,
                                        const std::set<uint64_t>& deleted, Clock::time_point now,
                                        std::chrono::milliseconds grace) {
  std::erase_if(deleted_containers_, [&](const auto& d) { return !held.count(d.first) || !deleted.count(d.first); });
  Counter* deleted_metric = nullptr;
  if (options_.metrics) {
    deleted_metric = &options_.metrics->GetCounter("penstock_repair_deleted_container_shards_total",
                                                   "shards deleted by repair because their container was deleted");
  }
  uint64_t shards_deleted = 0, emptied = 0;
  for (const auto& [id, targets] : held) {
    if (!deleted.count(id)) continue;  // live, or unknown to this mgmt: never touched
    auto [it, fresh] = deleted_containers_.try_emplace(id, now);
    if (fresh || now - it->second < grace) continue;
    uint64_t removed = 0, failed = 0;
    for (const TargetRef& t : targets) {
      auto shards = dp_.shards->List(t, id, 0);
      if (!shards.ok()) {
        PS_LOG_WARN("repair: cannot list what target {} holds of deleted container id {} ({}); next pass", t.id, id,
                    shards.status().ToString());
        ++failed;
        continue;
      }
      for (const ListEntry& e : *shards) {
        Status s = dp_.shards->DeleteTo(t, e.key);
        if (s.ok() || s.code() == StatusCode::kNotFound) {
          ++removed;
          if (deleted_metric) deleted_metric->Inc();
        } else {
          ++failed;
        }
      }
    }
    shards_deleted += removed;
    PS_LOG_INFO("repair: deleted {} shard(s) left on {} target(s) by container id {}, deleted {} s ago or more{}",
                removed, targets.size(), id, std::chrono::duration_cast<std::chrono::seconds>(now - it->second).count(),
                failed ? fmt::format("; {} could not be deleted or listed, next pass", failed) : "");
    if (failed == 0) {
      deleted_containers_.erase(it);
      ++emptied;
    }
  }
  Update([&](v1::RepairStatus& st) {
    st.set_total_deleted_container_shards(st.total_deleted_container_shards() + shards_deleted);
    st.set_total_deleted_containers_emptied(st.total_deleted_containers_emptied() + emptied);
    st.set_deleted_containers_pending(deleted_containers_.size());
  });
}

Repairer::Repairer(const RepairOptions& options) : options_(options) {
  status_.set_state("idle");
}

Result<std::unique_ptr<Repairer>> Repairer::Start(const RepairOptions& options) {
  std::unique_ptr<Repairer> r(new Repairer(options));
  DataPathOptions dp;
  dp.mgmt_address = options.mgmt_address;
  dp.api_key = options.api_key;
  dp.tls = options.tls;
  dp.timeout = options.timeout;
  dp.fetch_map = false;  // a follower has none to give; each pass loads it
  PS_RETURN_IF_ERROR(r->dp_.Open(dp));
  // Repair reads recovering targets too: it knows each stripe's version from the listing and
  // RepairShards checks that the bytes it read are of that version.
  r->dp_.io->set_read_from_recovering(true);
  r->thread_ = std::thread([raw = r.get()] { raw->Loop(); });
  return r;
}

Repairer::~Repairer() { Stop(); }

void Repairer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

v1::RepairStatus Repairer::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void Repairer::Update(const std::function<void(v1::RepairStatus&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(status_);
}

void Repairer::Loop() {
  uint64_t last_epoch = UINT64_MAX;
  auto last_pass = Clock::now() - options_.interval;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) return;
    }
    if (options_.is_leader && !options_.is_leader()) {
      // What was noted as a leader is forgotten: leading again, every orphan waits a whole
      // grace period of new observation.
      std::lock_guard<std::mutex> lock(pass_mu_);
      orphans_.clear();
      tombstones_.clear();
      deleted_containers_.clear();
      continue;
    }
    auto map = dp_.mgmt->GetClusterMap();
    if (!map.ok()) continue;
    if (map->epoch() == last_epoch && Clock::now() - last_pass < options_.interval) continue;
    last_epoch = map->epoch();
    last_pass = Clock::now();
    Status s = RunPass();
    if (!s.ok()) {
      PS_LOG_WARN("repair pass failed: {}", s.ToString());
      Update([&](v1::RepairStatus& st) { st.set_state("failed: " + s.ToString()); });
    }
  }
}

Status Repairer::RunPass() {
  std::lock_guard<std::mutex> pass_lock(pass_mu_);
  const auto started = Clock::now();
  PS_ASSIGN_OR_RETURN(v1::ClusterMap map, dp_.mgmt->GetClusterMap());
  dp_.view->Apply(map);
  std::set<std::pair<uint32_t, std::string>> corrupt;  // (target, key text) reported by targets
  std::vector<uint32_t> recovering;                    // targets this pass can clear
  bool any_recovering = false;                         // for some container at least
  for (const auto& t : map.targets()) {
    for (const auto& k : t.corrupt_shards()) corrupt.emplace(t.id(), k);
    if (t.recovering() && t.state() == v1::TARGET_STATE_UP) recovering.push_back(t.id());
    any_recovering |= t.recovering() || t.recovering_containers_size() > 0;
  }
  // A container is clean when every target was up and listed and nothing in it was left
  // unrepaired; the pass is clean when every container is. With a target DOWN, a recovering
  // target's shard may be older than the copy on the down one, so no flag is cleared.
  bool all_up = true;
  int lost_targets = 0;
  for (const auto& t : map.targets()) {
    if (t.state() == v1::TARGET_STATE_DOWN) all_up = false;
    if (t.state() == v1::TARGET_STATE_LOST) ++lost_targets;
  }
  bool pass_clean = true;
  // Whether everything is where the placement this pass started with puts it (settles joins):
  // cleared by a shard left off its slots, or that may be (a listing failed, a copy failed).
  std::atomic<bool> moves_done{all_up};
  std::vector<uint64_t> clean_containers;
  if (map.placement_epoch() != placement_seen_) {
    placement_seen_ = map.placement_epoch();
    placement_seen_at_ = started;
  }
  const std::chrono::milliseconds grace =
      map.orphan_grace_ms() > 0 ? std::chrono::milliseconds(map.orphan_grace_ms()) : options_.orphan_grace;
  // Which containers the targets hold. Only those mgmt recorded as deleted are emptied: a
  // container mgmt does not know (other metadata: a wrong data dir, a restore from an older
  // backup) is never touched.
  std::map<uint64_t, std::vector<TargetRef>> held;
  const auto held_listed = Clock::now();
  for (const TargetRef& t : dp_.view->targets()) {
    if (t.lost || !t.up) continue;
    auto ids = dp_.shards->List(t, 0, kListContainers);
    if (!ids.ok()) {
      PS_LOG_WARN("repair: cannot list the containers target {} holds ({}); next pass", t.id, ids.status().ToString());
      continue;
    }
    for (const ListEntry& e : *ids) held[e.key.container].push_back(t);
  }
  PS_ASSIGN_OR_RETURN(v1::ListContainersResponse containers, dp_.mgmt->ListContainers());
  {
    std::set<uint64_t> ids;
    for (const v1::Container& c : containers.containers()) ids.insert(c.id());
    std::erase_if(orphans_, [&](const auto& o) { return !ids.count(std::get<0>(o.first)); });
    std::erase_if(tombstones_, [&](const auto& o) { return !ids.count(std::get<0>(o.first)); });
  }
  // A mgmt that stopped leading stops changing anything: the new leader's passes take over
  // (an old pass that went on could rewrite a head the new leader has since collected).
  auto deposed = [&] { return options_.is_leader && !options_.is_leader(); };
  Update([&](v1::RepairStatus& st) {
    st.set_state("running");
    st.set_epoch(map.epoch());
    st.set_stripes_checked(0);
    st.set_stripes_total(0);
    st.set_shards_repaired(0);
    st.set_bytes_repaired(0);
    st.set_stripes_unrecoverable(0);
    st.set_bytes_per_second(0);
  });
  Counter* shards_metric = nullptr;
  Counter* bytes_metric = nullptr;
  Counter* lost_metric = nullptr;
  if (options_.metrics) {
    shards_metric = &options_.metrics->GetCounter("penstock_repair_shards_total", "shards rewritten by repair");
    bytes_metric = &options_.metrics->GetCounter("penstock_repair_bytes_total", "bytes rewritten by repair");
    lost_metric = &options_.metrics->GetCounter("penstock_repair_unrecoverable_stripes_total",
                                                "stripes repair found with fewer than K readable shards");
  }
  // Stripes are rebuilt by a few workers at once; the pass waits for them at the end.
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  uint64_t repaired_bytes = 0;  // guarded by jobs_mu
  int jobs = 0;                 // guarded by jobs_mu
  ThreadPool pool(kRepairWorkers, "ps-repair");
  auto pace = [&](uint64_t bytes) {
    Clock::time_point due;
    {
      std::lock_guard<std::mutex> lock(jobs_mu);
      repaired_bytes += bytes;
      if (options_.rate_bytes_per_s == 0) return;
      due = started + std::chrono::microseconds(repaired_bytes * 1000000 / options_.rate_bytes_per_s);
    }
    std::this_thread::sleep_until(due);
  };
  auto submit = [&](std::function<void()> job) {
    std::unique_lock<std::mutex> lock(jobs_mu);
    jobs_cv.wait(lock, [&] { return jobs < 2 * static_cast<int>(kRepairWorkers); });  // bounded queue
    ++jobs;
    lock.unlock();
    pool.Submit([&, job = std::move(job)] {
      job();
      std::lock_guard<std::mutex> l(jobs_mu);
      --jobs;
      jobs_cv.notify_all();
    });
  };

  for (const v1::Container& c : containers.containers()) {
    if (deposed()) return Aborted("repair pass stopped: this mgmt no longer leads");
    auto red = ParseRedundancy(c.redundancy());
    if (!red.ok()) {
      clean_containers.push_back(c.id());  // nothing to check
      continue;
    }
    std::atomic<bool> clean{true};  // this container's
    // What the live targets hold.
    ShardIndex index;
    std::map<std::pair<uint64_t, uint64_t>, ListEntry> heads;  // each object's newest head copy
    std::vector<TargetRef> listed;
    // Orphans are looked for only with every target up and listed and no head copy of the
    // container left out of a listing as corrupt (it may name data no other copy names).
    bool find_orphans = all_up;
    std::set<std::pair<uint64_t, uint64_t>> named;  // data ids some head copy names
    std::map<std::pair<uint64_t, uint64_t>, HeadCopies> copies;  // every head copy listed, by object
    const auto heads_listed = Clock::now();         // (from now on)
    for (const TargetRef& t : dp_.view->targets()) {
      if (t.lost || !t.up) continue;
      // Heads on every target first, then the data: a put writes its data before its head, so
      // every object whose head is seen here has its data in the listing that follows.
      uint64_t left_out = 0;
      auto hs = dp_.shards->List(t, c.id(), kListHeadsOnly | kListWithData, &left_out);
      if (left_out > 0) find_orphans = false;
      if (!hs.ok()) {
        PS_LOG_WARN("repair: cannot list target {} ({}); its shards wait for the next pass", t.id,
                    hs.status().ToString());
        clean = false;
        moves_done = false;
        continue;
      }
      listed.push_back(t);
      for (ListEntry& e : *hs) {
        if (!e.data.empty()) {
          auto named_head = DecodeObjectHead(e.data);
          if (named_head.ok()) {
            named.insert({named_head->data_hi, named_head->data_lo});
          } else {
            find_orphans = false;  // what it names is unknown
          }
        }
        HeadCopies& hc = copies[{e.key.object_hi, e.key.object_lo}];
        if (hc.copies.empty()) hc.version = e.shard_version;
        hc.same_tombstone &= e.length == 0 && e.shard_version == hc.version && !corrupt.count({t.id, KeyText(e.key)});
        hc.copies.emplace_back(t.id, e.key);
        hc.versions.push_back(e.shard_version);
        ListEntry& newest = heads[{e.key.object_hi, e.key.object_lo}];
        if (newest.shard_version <= e.shard_version) newest = std::move(e);
      }
    }
    std::map<std::pair<uint64_t, uint64_t>, Unnamed> unnamed;
    for (const TargetRef& t : listed) {
      auto all = dp_.shards->List(t, c.id(), 0);
      if (!all.ok()) {
        PS_LOG_WARN("repair: cannot list target {} ({}); its shards wait for the next pass", t.id,
                    all.status().ToString());
        clean = false;
        moves_done = false;
        continue;
      }
      for (const ListEntry& e : *all) {
        if (e.key.stripe == UINT64_MAX) continue;
        if (find_orphans && !named.count({e.key.object_hi, e.key.object_lo})) {
          Unnamed& u = unnamed[{e.key.object_hi, e.key.object_lo}];
          u.newest = std::max(u.newest, e.shard_version);
          u.shards.emplace_back(t.id, e.key);
          continue;  // no live object's stripe
        }
        const bool bad = corrupt.count({t.id, KeyText(e.key)}) != 0;
        if (bad) continue;  // as good as missing
        index[{e.key.object_hi, e.key.object_lo, e.key.stripe}][e.key.shard].push_back({t.id, e.shard_version, e.length});
      }
    }
    // A shard off its slots that no walk below moves (data no head names yet: a put placed
    // with the old map whose head is still to come; stripes past a head's end) keeps the
    // placement unsettled until it is named or collected.
    auto off_slots = [&](uint32_t target, const WireShardKey& k) {
      auto slots = dp_.io->Slots(k, red->width());
      const uint32_t slot = red->width() <= 1 ? 0 : k.shard;
      return !slots.ok() || slot >= slots->size() || (*slots)[slot].id != target;
    };
    for (const auto& [id, u] : unnamed) {
      for (const auto& [t, k] : u.shards) {
        if (moves_done && off_slots(t, k)) moves_done = false;
      }
    }
    if (find_orphans && clean && listed.size() == static_cast<size_t>(map.targets_size() - lost_targets)) {
      CollectOrphans(c.id(), listed, std::move(unnamed), heads_listed, Clock::now(), grace);
      // Tombstones whose copies are all gone need no repair.
      for (const auto& id : CollectTombstones(c.id(), listed, copies, heads_listed, grace)) heads.erase(id);
    } else {
      ForgetOrphans(c.id());  // not a complete listing: start their clocks again later
      tombstones_.erase(tombstones_.lower_bound({c.id(), 0, 0}), tombstones_.lower_bound({c.id() + 1, 0, 0}));
    }
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> walked;  // data id -> stripes the walk checks
    uint64_t total = 0;
    for (const auto& [id, newest] : heads) {
      if (newest.data.empty()) continue;
      auto head = DecodeObjectHead(newest.data);
      if (head.ok()) total += head->stripe_count();
    }
    Update([&](v1::RepairStatus& st) { st.set_stripes_total(st.stripes_total() + total); });

    for (const auto& [id, newest] : heads) {
      if (deposed()) {
        clean = false;
        break;
      }
      // Head copies: every copy slot holds the newest version (tombstones included).
      const Redundancy head_red = HeadRedundancy(*red);
      WireShardKey hkey = newest.key;
      hkey.shard = 0;
      auto hslots = dp_.io->Slots(hkey, head_red.width());
      if (!hslots.ok()) clean = moves_done = false;
      if (hslots.ok()) {
        bool slots_whole = hslots->size() == head_red.width();  // every slot up and newest already
        for (uint32_t i = 0; i < hslots->size(); ++i) {
          const TargetRef& t = (*hslots)[i];
          if (!t.up) {
            if (t.id != 0) clean = moves_done = false;  // down, or suspect to this client: not checked
            slots_whole = false;
            continue;
          }
          // Copy i on slot i's target (a copy under another index there, left by a map change
          // that permuted the slots, is not the one readers ask for).
          bool ok = false;
          if (auto cit = copies.find(id); cit != copies.end()) {
            const HeadCopies& hc = cit->second;
            for (size_t k = 0; k < hc.copies.size(); ++k) {
              ok |= hc.copies[k].first == t.id && hc.copies[k].second.shard == i &&
                    hc.versions[k] >= newest.shard_version && !corrupt.count({t.id, KeyText(hc.copies[k].second)});
            }
          }
          if (ok) continue;
          slots_whole = false;
          WireShardKey k = hkey;
          k.shard = i;
          // Whether a copy this one was made from is still there (not deleted since listed).
          // Kept unless every such copy was asked and is gone.
          auto source_held = [&](uint32_t written_to) {
            auto cit = copies.find(id);
            if (cit == copies.end()) return true;
            const HeadCopies& hc = cit->second;
            bool asked = false;
            for (size_t n = 0; n < hc.copies.size(); ++n) {
              if (hc.copies[n].first == written_to || hc.versions[n] != newest.shard_version) continue;
              const TargetRef* from = FindTarget(listed, hc.copies[n].first);
              if (from == nullptr) return true;  // cannot tell: kept
              auto r = Await<Result<ShardData>>(
                  [&](auto done) { dp_.shards->StartStatTo(*from, hc.copies[n].second, std::move(done)); });
              if (r.ok() || r.status().code() != StatusCode::kNotFound) return true;
              asked = true;
            }
            return !asked;
          };
          Status s = dp_.shards->WriteTo(t, k, newest.data, newest.shard_version, true);
          if (s.ok() && !red->protected_() && !source_held(t.id)) {
            // An unprotected head has no tombstone: a delete that removed the copies listed
            // while this one was written would have missed it. Gone with them (at its version).
            dp_.shards->DeleteTo(t, k, newest.shard_version).IgnoreError();
            continue;
          }
          if (s.ok()) {
            Update([&](v1::RepairStatus& st) { st.set_shards_repaired(st.shards_repaired() + 1); });
            if (shards_metric) shards_metric->Inc();
          } else {
            PS_LOG_WARN("repair: head copy {} of an object in '{}': {}", i, c.name(), s.ToString());
            clean = false;
            moves_done = false;
          }
        }
        // Copies not where readers look (on a target that is no longer a slot, or under another
        // index than its target's slot: a map change moved the head) go once every slot held
        // the newest, each only at the version listed (one written since stays).
        auto cit = copies.find(id);
        if (slots_whole && cit != copies.end()) {
          const HeadCopies& hc = cit->second;
          for (size_t k = 0; k < hc.copies.size(); ++k) {
            const auto& [target, ckey] = hc.copies[k];
            if (ckey.shard < hslots->size() && (*hslots)[ckey.shard].id == target) continue;
            if (const TargetRef* t = FindTarget(listed, target)) {
              dp_.shards->DeleteTo(*t, ckey, hc.versions[k]).IgnoreError();
            }
          }
        }
      }
      if (newest.data.empty()) continue;  // deleted
      auto head = DecodeObjectHead(newest.data);
      if (!head.ok()) {
        clean = false;  // its stripes are not checked
        continue;
      }
      const StripeGeometry geo = StripeGeometry::For(*red, head->stripe_unit);
      walked[{head->data_hi, head->data_lo}] = head->stripe_count();
      for (uint64_t s = 0; s < head->stripe_count(); ++s) {
        WireShardKey key{c.id(), head->data_hi, head->data_lo, s, 0, 0};
        auto it = index.find({head->data_hi, head->data_lo, s});
        Update([&](v1::RepairStatus& st) { st.set_stripes_checked(st.stripes_checked() + 1); });
        if (it == index.end()) continue;  // never written (sparse) or nothing left at all
        auto& shards = it->second;
        // The stripe's version: the newest that enough shards hold.
        // version -> shard indexes. Stale shards (on recovering targets) hold older versions,
        // so the newest version that enough shards hold is the stripe's; with a target DOWN
        // its copies are not counted, and the pass clears no recovering flag (see above).
        std::map<uint64_t, std::set<uint32_t>> holders;
        uint64_t shard_length = 0;
        for (auto& [i, hs] : shards) {
          for (const Holder& x : hs) holders[x.version].insert(i);
        }
        uint64_t version = 0;
        const uint32_t need = red->kind == Redundancy::Kind::kErasure ? red->k : 1;
        for (auto v = holders.rbegin(); v != holders.rend(); ++v) {
          if (v->second.size() >= need) {
            version = v->first;
            break;
          }
        }
        if (version == 0) {
          // Not moved by this walk: a shard of it off its slots keeps the placement unsettled.
          for (const auto& [i, hs] : shards) {
            for (const Holder& x : hs) {
              if (moves_done && off_slots(x.target, WithShard(key, i))) moves_done = false;
            }
          }
          // The listing may be behind a write or delete that raced with it: a read decides.
          auto r = dp_.io->ReadSync(geo, key, 0, red->kind == Redundancy::Kind::kErasure ? geo.cell : UINT64_MAX);
          if (r.ok() || r.status().code() != StatusCode::kDataLoss) {
            if (!r.ok() && r.status().code() != StatusCode::kNotFound) clean = moves_done = false;
            continue;
          }
          clean = false;
          Update([&](v1::RepairStatus& st) { st.set_stripes_unrecoverable(st.stripes_unrecoverable() + 1); });
          if (lost_metric) lost_metric->Inc();
          PS_LOG_ERROR("repair: stripe {} of object '{}' in '{}' has fewer than {} shards of one version; data lost",
                       s, head->name, c.name(), need);
          continue;
        }
        for (auto& [i, hs] : shards) {
          for (const Holder& x : hs) {
            if (x.version == version) shard_length = x.length;
          }
        }
        auto slots = dp_.io->Slots(key, red->width());
        if (!slots.ok()) {
          clean = moves_done = false;
          continue;
        }
        std::vector<uint32_t> fix;
        for (uint32_t i = 0; i < slots->size(); ++i) {
          const TargetRef& t = (*slots)[i];
          if (!t.up) {
            if (t.id != 0) clean = moves_done = false;  // down, or suspect to this client: not checked
            continue;
          }
          bool ok = false;
          auto si = shards.find(i);
          if (si != shards.end()) {
            for (const Holder& x : si->second) ok |= x.target == t.id && x.version >= version;
          }
          if (!ok) fix.push_back(i);
        }
        if (!fix.empty()) {
          // A shard some target holds at the stripe's version, under its own index, though not
          // where its slot is now (a join permuted the slots, a target left them): copied from
          // there. Readers ask slot i for shard i only, and a decode needs K shards where the
          // slots are, which a permutation can leave too few of.
          // Only while some slot target holds a shard of the stripe at that version: copies
          // left only elsewhere (a truncate deletes on the slots) are not brought back.
          bool on_slots = false;
          for (const auto& [i, hs] : shards) {
            for (const Holder& x : hs) {
              for (const TargetRef& t : *slots) on_slots |= x.version == version && x.target == t.id;
            }
          }
          std::vector<std::pair<uint32_t, std::vector<TargetRef>>> copy_from;  // (shard, holders)
          std::vector<uint32_t> rebuild;
          for (uint32_t i : fix) {
            std::vector<TargetRef> from;
            // An unprotected stripe has no other copy: its one slot never holds it before.
            if (auto si = shards.find(i); (on_slots || !red->protected_()) && si != shards.end()) {
              for (const Holder& x : si->second) {
                if (x.version != version || x.target == (*slots)[i].id) continue;
                const TargetRef* t = FindTarget(listed, x.target);
                if (t != nullptr && t->up) from.push_back(*t);
              }
            }
            if (!from.empty()) {
              copy_from.emplace_back(i, std::move(from));
            } else {
              rebuild.push_back(i);
            }
          }
          submit([&, geo, key, shard_length, copy_from, rebuild, version, s, slots = *slots,
                  name = head->name] {
            uint64_t bytes = 0, copied = 0;
            std::vector<uint32_t> rest = rebuild;
            for (const auto& [i, from] : copy_from) {
              const WireShardKey k = WithShard(key, i);
              Status w;
              bool gone = false;
              for (const TargetRef& t : from) {  // each holder in turn; none: rebuilt
                auto got = Await<Result<ShardData>>(
                    [&](auto done) { dp_.shards->StartReadTo(t, k, 0, UINT64_MAX, std::move(done)); });
                w = got.ok() && got->version != version ? Aborted("the copy changed since it was listed")
                                                        : got.status();
                if (w.ok()) w = dp_.shards->WriteTo(slots[i], k, got->data.span(), version, /*only_if_not_older=*/true);
                if (w.ok()) {
                  // A delete (a truncate) that removed the source after it was read missed this
                  // copy: then it goes too, at its version.
                  auto src = Await<Result<ShardData>>([&](auto done) { dp_.shards->StartStatTo(t, k, std::move(done)); });
                  if (!src.ok() && src.status().code() == StatusCode::kNotFound) {
                    dp_.shards->DeleteTo(slots[i], k, version).IgnoreError();
                    w = Aborted("the copy's source was deleted meanwhile");
                    gone = true;
                    break;
                  }
                  bytes += got->data.size();
                  break;
                }
                PS_LOG_WARN("repair: shard {} of stripe {} of object '{}' in '{}', copied from target {}: {}", i, s,
                            name, c.name(), t.id, w.ToString());
              }
              if (w.ok()) {
                ++copied;
              } else if (gone) {
                clean = moves_done = false;  // deleted meanwhile: the next pass sees what is left
              } else {
                rest.push_back(i);
              }
            }
            Result<uint64_t> written = bytes;
            if (!rest.empty()) {
              written = dp_.io->RepairShards(geo, key, shard_length, rest, version);
              if (written.ok()) *written += bytes;
            }
            if (!written.ok()) {
              PS_LOG_WARN("repair: stripe {} of object '{}' in '{}': {}", s, name, c.name(),
                          written.status().ToString());
              clean = false;
              moves_done = false;
              written = bytes;  // the copies still count
            } else {
              copied += rest.size();
            }
            Update([&](v1::RepairStatus& st) {
              st.set_shards_repaired(st.shards_repaired() + copied);
              st.set_bytes_repaired(st.bytes_repaired() + *written);
              const double secs = std::chrono::duration<double>(Clock::now() - started).count();
              st.set_bytes_per_second(secs > 0 ? static_cast<double>(st.bytes_repaired()) / secs : 0);
            });
            if (shards_metric) shards_metric->Inc(copied);
            if (bytes_metric) bytes_metric->Inc(*written);
            pace(*written);
          });
        }
        // The stripe is whole on its slots (or will be once DOWN ones return): copies on
        // targets that are no longer slots go.
        bool all_up = slots->size() == red->width();
        for (const TargetRef& t : *slots) all_up &= t.up;
        if (fix.empty() && all_up) {
          for (auto& [i, hs] : shards) {
            if (i >= slots->size()) continue;
            for (const Holder& x : hs) {
              if (x.target == (*slots)[i].id) continue;
              for (const TargetRef& t : dp_.view->targets()) {
                if (t.id != x.target || !t.up) continue;
                WireShardKey k = key;
                k.shard = i;
                // At the listed version: a write that landed there since (a client still on the
                // old map, before its target learned the new one) stays for the next pass.
                dp_.shards->DeleteTo(t, k, x.version).IgnoreError();
              }
            }
          }
        }
      }
    }
    // Stripes no walk above checked (past a head's end, an older version's, data no head names
    // while orphans are not looked for): one off its slots keeps the placement unsettled.
    for (auto it = index.begin(); moves_done && it != index.end(); ++it) {
      const auto& [hi, lo, stripe] = it->first;
      auto w = walked.find({hi, lo});
      if (w != walked.end() && stripe < w->second) continue;
      for (const auto& [i, hs] : it->second) {
        for (const Holder& x : hs) {
          if (moves_done && off_slots(x.target, WireShardKey{c.id(), hi, lo, stripe, i, 0})) moves_done = false;
        }
      }
    }
    // Jobs refer to this container's data: finish them before the next one.
    std::unique_lock<std::mutex> lock(jobs_mu);
    jobs_cv.wait(lock, [&] { return jobs == 0; });
    if (clean) {
      clean_containers.push_back(c.id());
    } else {
      pass_clean = false;
    }
  }
  // Deleted containers last: emptying them must not hold up the repair of live ones.
  if (deposed()) return Aborted("repair pass stopped: this mgmt no longer leads");
  CollectDeletedContainers(held,
                           std::set<uint64_t>(containers.deleted_container_ids().begin(),
                                              containers.deleted_container_ids().end()),
                           held_listed, grace);
  const int64_t took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  Update([&](v1::RepairStatus& st) {
    st.set_state("idle");
    st.set_orphans_pending(orphans_.size());
    st.set_tombstones_pending(tombstones_.size());
    st.set_passes(st.passes() + 1);
    st.set_last_pass_ms(NowMs());
    const double secs = static_cast<double>(took) / 1000.0;
    st.set_bytes_per_second(secs > 0 ? static_cast<double>(st.bytes_repaired()) / secs : 0);
    st.set_total_shards_repaired(st.total_shards_repaired() + st.shards_repaired());
    st.set_total_bytes_repaired(st.total_bytes_repaired() + st.bytes_repaired());
    if (st.shards_repaired() > 0) {
      st.set_last_active_epoch(st.epoch());
      st.set_last_active_bytes(st.bytes_repaired());
      st.set_last_active_bytes_per_second(st.bytes_per_second());
    }
  });
  if (all_up && any_recovering && options_.on_clean_pass) {
    if (!pass_clean) recovering.clear();
    options_.on_clean_pass(recovering, clean_containers, map.epoch(), started);
  }
  if (moves_done && map.placement_epoch() > map.settled_placement_epoch() &&
      started - placement_seen_at_ >= options_.settle_after && !deposed() && options_.on_placement_settled) {
    options_.on_placement_settled(map.placement_epoch());
  }
  auto st = status();
  if (st.shards_repaired() > 0 || st.stripes_unrecoverable() > 0) {
    PS_LOG_INFO("repair pass done in {} ms: {} stripes checked, {} shards ({} bytes) rewritten, {} unrecoverable",
                took, st.stripes_checked(), st.shards_repaired(), st.bytes_repaired(), st.stripes_unrecoverable());
  }
  if (options_.metrics) options_.metrics->GetCounter("penstock_repair_passes_total", "repair passes completed").Inc();
  return OkStatus();
}

}  // namespace penstock
