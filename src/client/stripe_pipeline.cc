#include "client/stripe_pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "common/log.h"

namespace penstock {

namespace {

// Completions posted by transport threads, consumed by the pipeline's thread.
template <typename T>
class DoneQueue {
 public:
  void Post(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  T Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !items_.empty(); });
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

struct WriteDone {
  uint64_t stripe;
  std::shared_ptr<const AlignedBuffer> data;
  Status status;
  std::chrono::steady_clock::time_point at;  // when the reply came (not when it was taken)
};

// The memory one stripe's read lands in when the transport can put it there (a target on this
// host writes it straight in; a rendezvous reply is received into it): lent whole, returned by
// the read's completion. Cells of an ec read borrow disjoint parts.
class StripeBuffer : public StripeDestination {
 public:
  explicit StripeBuffer(uint64_t length) : buf_(length) {}
  std::vector<std::span<std::byte>> Borrow(uint64_t at, uint64_t length) override {
    if (at > buf_.size() || length > buf_.size() - at) return {};
    return {buf_.span().subspan(at, length)};
  }
  void Return(uint64_t, uint64_t) override {}
  void Zero(uint64_t at, uint64_t length) override {
    if (at < buf_.size()) std::memset(buf_.data() + at, 0, std::min<uint64_t>(length, buf_.size() - at));
  }
  // The bytes a read delivered: the first `placed` here, or its own buffer.
  std::span<const std::byte> Bytes(const ShardData& d) const {
    return d.placed > 0 ? std::span<const std::byte>(buf_.span()).first(d.placed) : d.data.span();
  }

 private:
  AlignedBuffer buf_;
};

struct ReadDone {
  uint64_t stripe;
  Result<ShardData> data;
  std::shared_ptr<StripeBuffer> into;
};

using Clock = std::chrono::steady_clock;

}  // namespace

Status WriteStripes(StripeIo& io, const StripeLayout& layout, ObjectSource& source,
                    unsigned window, uint64_t version, const ProgressFn& progress,
                    const std::string& what, Clock::time_point* last_landed) {
  if (last_landed) *last_landed = Clock::now();
  ShardClient& shards = io.shards();
  const StripeGeometry geo = layout.geometry();
  const uint64_t n = layout.stripe_count();
  if (n == 0) return OkStatus();
  window = static_cast<unsigned>(std::min<uint64_t>(std::max(window, 1u), n));
  DoneQueue<WriteDone> done_q;
  std::vector<std::pair<Clock::time_point, int>> tries(n);  // first attempt, attempts
  auto issue = [&](uint64_t stripe, std::shared_ptr<const AlignedBuffer> data) {
    io.Write(geo, layout.key(stripe), data, version,
             [&done_q, stripe, data](Status s) { done_q.Post({stripe, data, std::move(s), Clock::now()}); });
  };

  // Stripes no head names are collected as orphans once they sit unchanged for the map's
  // grace: this put's must never stay unchanged for a third of it (see object_head.h). The
  // landings are stamped when each reply comes, and the gap is checked whenever the loop looks
  // (a stalled source read counts too: the stripes before it sit unchanged meanwhile).
  const auto stall_limit = io.commit_window();
  Status first_error;
  uint64_t next = 0, inflight = 0, bytes_done = 0;
  bool landed = false;  // a stripe has; `last`: when the latest did
  Clock::time_point last;
  auto stalled = [&](Clock::time_point now) {
    if (!landed || now - last <= stall_limit || !first_error.ok()) return;
    first_error = Aborted("no stripe of " + what + " landed for " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - last).count()) +
                          " s (a stalled source or target): the stripes written before may have been collected "
                          "as orphans; put it again");
  };
  while (next < n || inflight > 0) {
    while (first_error.ok() && next < n && inflight < window) {
      // A buffer per stripe (recycled by the buffer pool): a protected write may hold it for
      // late shard requests after it was acknowledged.
      auto buf = std::make_shared<AlignedBuffer>(layout.stripe_length(next));
      Status s = source.ReadAt(next * layout.stripe_unit, buf->span());
      stalled(Clock::now());  // landings of the stripes in flight come through the queue below
      if (!s.ok()) {
        first_error = s.WithContext("reading the data of " + what);
        break;
      }
      tries[next] = {Clock::now(), 0};
      issue(next, std::move(buf));
      ++inflight;
      ++next;
    }
    if (inflight == 0) break;
    WriteDone d = done_q.Take();
    --inflight;
    if (!d.status.ok()) {
      auto& [first, attempts] = tries[d.stripe];
      // A protected stripe below its write quorum waits for targets until the retry budget ends;
      // an unprotected one whose target mgmt marks down fails at once (ShouldRetry).
      if (first_error.ok() && (geo.red.protected_()
                                   ? shards.Backoff(d.status, first, attempts++)
                                   : shards.ShouldRetry(d.status, layout.key(d.stripe), first, attempts++))) {
        issue(d.stripe, d.data);
        ++inflight;
        continue;
      }
      if (first_error.ok()) {
        first_error = d.status.WithContext("writing stripe " + std::to_string(d.stripe) + " of " + what +
                                           (geo.red.protected_() ? "" : " to " + shards.Describe(layout.key(d.stripe))));
      }
    } else {
      stalled(d.at);
      if (!landed || d.at > last) last = d.at;
      landed = true;
      bytes_done += d.data->size();
      if (progress) progress(bytes_done, layout.size);
    }
  }
  if (last_landed && landed) *last_landed = last;
  return first_error;
}

Status ReadStripes(StripeIo& io, const StripeLayout& layout, ObjectSink& sink,
                   unsigned window, const ProgressFn& progress, const std::string& what) {
  ShardClient& shards = io.shards();
  const StripeGeometry geo = layout.geometry();
  const uint64_t n = layout.stripe_count();
  if (n == 0) return OkStatus();
  window = static_cast<unsigned>(std::min<uint64_t>(std::max(window, 1u), n));
  DoneQueue<ReadDone> done_q;
  std::vector<std::pair<Clock::time_point, int>> tries(n);
  auto issue = [&](uint64_t stripe) {
    // ec returns exactly the bytes asked for; none and rep return up to one byte more than the
    // stripe holds, so a shard of the wrong length shows.
    const uint64_t expect = layout.stripe_length(stripe);
    const uint64_t len = geo.red.kind == Redundancy::Kind::kErasure ? expect : expect + 1;
    auto into = std::make_shared<StripeBuffer>(len);
    io.Read(geo, layout.key(stripe), 0, len, [&done_q, stripe, into](Result<ShardData> r) {
      done_q.Post({stripe, std::move(r), into});
    }, std::nullopt, into);
  };

  Status first_error;
  uint64_t next = 0, inflight = 0, bytes_done = 0;
  while (next < n || inflight > 0) {
    while (first_error.ok() && next < n && inflight < window) {
      tries[next] = {Clock::now(), 0};
      issue(next++);
      ++inflight;
    }
    if (inflight == 0) break;
    ReadDone d = done_q.Take();
    --inflight;
    const std::string where = "stripe " + std::to_string(d.stripe) + " of " + what +
                              (geo.red.protected_() ? "" : " on " + shards.Describe(layout.key(d.stripe)));
    if (!d.data.ok()) {
      Status s = d.data.status();
      auto& [first, attempts] = tries[d.stripe];
      if (first_error.ok() && shards.ShouldRetry(s, layout.key(d.stripe), first, attempts++)) {
        issue(d.stripe);
        ++inflight;
        continue;
      }
      if (s.code() == StatusCode::kNotFound) {
        s = DataLoss(where + " is missing: " + s.message());
      } else if (s.code() == StatusCode::kDataLoss) {
        s = s.WithContext(geo.red.protected_() ? "reading " + where : "checksum error in " + where);
      } else {
        s = s.WithContext("reading " + where);
      }
      if (first_error.ok()) first_error = s;
      continue;
    }
    if (!first_error.ok()) continue;  // draining after an error
    const uint64_t expect = layout.stripe_length(d.stripe);
    std::span<const std::byte> bytes = d.into->Bytes(*d.data);
    std::vector<std::byte> padded;
    if (!layout.dense && bytes.size() != expect) {
      // Written through the Object API: a stripe may hold bytes past a truncated end (zeroed)
      // and end before the object's (never written there: zeros).
      padded.assign(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(bytes.size(), expect)));
      padded.resize(expect);
      bytes = padded;
    }
    if (bytes.size() != expect) {
      first_error = DataLoss(where + " has " + (bytes.size() > expect ? "more than " : "") +
                             std::to_string(std::min<uint64_t>(bytes.size(), expect)) +
                             " bytes, expected " + std::to_string(expect));
      continue;
    }
    Status s = sink.WriteAt(d.stripe * layout.stripe_unit, bytes);
    if (!s.ok()) {
      first_error = s;
      continue;
    }
    bytes_done += expect;
    if (progress) progress(bytes_done, layout.size);
  }
  return first_error;
}

void DeleteStripes(StripeIo& io, const StripeLayout& layout, uint64_t count) {
  const StripeGeometry geo = layout.geometry();
  for (uint64_t i = 0; i < count; ++i) {
    Status s = io.DeleteSync(geo, layout.key(i));
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      PS_LOG_WARN("could not remove stripe {} (left as garbage): {}", i, s.ToString());
    }
  }
}

bool NewStripesUnreferenced(const Status& head_write, const Result<ObjectHead>& head_now, uint64_t data_hi,
                            uint64_t data_lo) {
  switch (head_write.code()) {
    case StatusCode::kResourceExhausted:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kNotFound:
      break;
    default:
      return false;  // may have landed
  }
  if (!head_now.ok()) return head_now.status().code() == StatusCode::kNotFound;
  return head_now->data_hi != data_hi || head_now->data_lo != data_lo;
}

}  // namespace penstock
