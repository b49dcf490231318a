#include "transport/ucx_worker.h"

#include <sched.h>
#include <sys/epoll.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "common/thread_pool.h"
#include "transport/tls_list.h"
#include "transport/wire.h"

namespace penstock {

Status UcxStatus(ucs_status_t status, const std::string& what) {
  return Unavailable("UCX " + what + " failed: " + ucs_status_string(status));
}

namespace {

// A UCX context for `options` (features AM + wakeup; its own UCX_NET_DEVICES when given).
Result<ucp_context_h> NewContext(const UcxWorker::Options& options) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return UcxStatus(st, "config read (check UCX_* environment variables)");
  if (!options.net_devices.empty()) {
    st = ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return InvalidArgument("UCX rejects network devices '" + options.net_devices + "' (" +
                             ucs_status_string(st) + "); list them as UCX_NET_DEVICES takes them, "
                             "e.g. mlx5_0:1,eth1 (see `ucx_info -d`)");
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = options.name.c_str();
  params.mt_workers_shared = options.shared_context ? 1 : 0;
  ucp_context_h context = nullptr;
  st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) return UcxStatus(st, "init (check UCX_TLS)");
  return context;
}

// Whether UCX may move data with RDMA or GPU transports here, where zero-copy sends are what
// make them fast: UCX_TLS names one, or (unset or "all") the host has an RDMA device or an
// NVIDIA GPU.
bool ZeroCopyMatters(const TlsList& tls) {
  const std::initializer_list<std::string_view> kZeroCopy = {"rc", "dc", "ud", "ib", "cuda", "rocm", "gdr"};
  if (tls.Names(kZeroCopy)) return true;
  if (!tls.Allows(kZeroCopy)) return false;
  std::error_code ec;
  const bool rdma = std::filesystem::exists("/sys/class/infiniband", ec) &&
                    !std::filesystem::is_empty("/sys/class/infiniband", ec);
  return rdma || std::filesystem::exists("/dev/nvidiactl", ec);
}

// Transport-level defaults UCX reads only from the environment (ucp_config_modify rejects
// them); set once, before the first ucp_init, and an operator's own setting wins.
//  - MM_ERROR_HANDLING is left to the operator (UCX's default, n): UCX 1.13 then hides its
//    shared-memory FIFOs (posix, sysv) from endpoints with peer-failure handling, as
//    Penstock's are, and messages between processes on one host go over loopback tcp (bulk
//    data by Penstock's direct copies). With it set, a peer killed while writing a message
//    into a process's FIFO leaves an element that is never completed, and the process reads
//    nothing more from any shared-memory peer of that worker: a client killed mid-write
//    stalled a target for every other client on its host until restart (README.md).
//  - TCP_CM_REUSEADDR=y: a restarted server can bind its port while old connections sit in
//    TIME_WAIT (a live listener on the port is still reported as "in use").
//  - TCP_PUT_ENABLE=n: 1.13's tcp put-zcopy rendezvous aborts the whole process (tcp_ep.c:939,
//    assertion on UCT_TCP_EP_FLAG_PUT_TX_WAITING_ACK) when the peer dies in the middle of a
//    put: a client crashed so once when a target was killed mid-write. Without it tcp
//    rendezvous sends the bytes as active-message fragments (speed: docs/performance.md), and
//    a dying peer fails only its own requests.
void SetUcxEnvironmentDefaults() {
  const char* tls_env = std::getenv("UCX_TLS");
  const TlsList tls(tls_env);
  const std::initializer_list<std::string_view> kSharedMemory = {"posix", "sysv", "cma", "sm",
                                                                      "shm", "mm", "xpmem", "knem"};
  const char* mm_eh = std::getenv("UCX_MM_ERROR_HANDLING");
  const bool mm = mm_eh != nullptr && (std::strcmp(mm_eh, "y") == 0 || std::strcmp(mm_eh, "yes") == 0 ||
                                       std::strcmp(mm_eh, "1") == 0 || std::strcmp(mm_eh, "on") == 0);
  if (mm && tls.Allows({"posix", "sysv", "sm", "shm", "mm"})) {
    PS_LOG_INFO("UCX_MM_ERROR_HANDLING={}: messages between processes on this host go through "
                "shared-memory FIFOs; a peer killed while sending one stalls every other "
                "shared-memory connection of the worker until this process restarts (unset it "
                "to use loopback tcp; see src/transport/README.md)", mm_eh);
  }
  setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
  setenv("UCX_TCP_PUT_ENABLE", "n", /*overwrite=*/0);
  //  - ZCOPY_THRESH=inf, TCP_TX_SEG_SIZE=64K, on hosts without RDMA or GPU transports: 1.13
  //    aborts the process (uct_iface.h:884, `comp->count > 0`, status ENDPOINT_TIMEOUT) when a
  //    tcp peer dies while active-message zcopy fragments to it are in flight: a client
  //    sending 16 MiB payloads to a target killed mid-transfer died so in ~1 run in 20
  //    (RpcProcessTest.PeerDyingMidTransferFailsOnlyItsOwnCalls; 0 in 90 with this). Fragments
  //    are then copied into 64 KiB send buffers instead (1 MiB calls over loopback tcp: no
  //    slower, docs/performance.md). Where RDMA or GPU memory is in play zero-copy is kept.
  if (!ZeroCopyMatters(tls)) {
    setenv("UCX_ZCOPY_THRESH", "inf", /*overwrite=*/0);
    setenv("UCX_TCP_TX_SEG_SIZE", "64K", /*overwrite=*/0);
  }
  //  - A shared-memory-only UCX_TLS (e.g. "posix,cma") cannot connect by socket address in
  //    1.13: the connection manager needs tcp listed. Add it. With MM_ERROR_HANDLING on, make
  //    rendezvous data use the shared-memory lane (get_zcopy) so tcp carries only the
  //    connection set-up; without it tcp carries the messages too. See README.md.
  if (!tls.unset() && !tls.Allows({"tcp", "rc", "dc", "ud", "ib"}) && tls.Names(kSharedMemory)) {
    std::string with_cm = std::string(tls_env) + ",tcp";
    setenv("UCX_TLS", with_cm.c_str(), /*overwrite=*/1);
    if (mm) setenv("UCX_RNDV_SCHEME", "get_zcopy", /*overwrite=*/0);
    PS_LOG_INFO("UCX_TLS={} has no connection manager; using UCX_TLS={} ({})", tls_env, with_cm,
                mm ? "tcp for connection set-up only, data over shared memory"
                   : "messages over loopback tcp, bulk data by direct copies on this host");
  }
}

}  // namespace

Result<std::unique_ptr<UcxWorker>> UcxWorker::Create(const Options& options) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  static std::once_flag once;
  std::call_once(once, SetUcxEnvironmentDefaults);
  w->name_ = options.name;
  if (options.context != nullptr) {
    w->context_ = options.context;
  } else {
    PS_ASSIGN_OR_RETURN(w->context_, NewContext(options));
    w->owns_context_ = true;
  }
  PS_RETURN_IF_ERROR(w->CreateWorker());
  PS_RETURN_IF_ERROR(w->SetUpWakeup());
  return w;
}

// The UCP worker on context_ (single-threaded, with wake-up events), and its AM header limit.
Status UcxWorker::CreateWorker() {
  ucs_status_t st;

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  wp.events = UCP_WAKEUP_RMA | UCP_WAKEUP_AMO | UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV |
              UCP_WAKEUP_TX | UCP_WAKEUP_RX;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) return UcxStatus(st, "worker create");

  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  st = ucp_worker_query(worker_, &attr);
  if (st != UCS_OK) return UcxStatus(st, "worker query");
  max_am_header_ = attr.max_am_header;
  if (max_am_header_ < wire::kMaxAmHeader) {
    PS_LOG_WARN("UCX supports AM headers of {} bytes, less than the {} Penstock may send; "
                "large op headers will fail", max_am_header_, wire::kMaxAmHeader);
  }
  return OkStatus();
}

// The epoll set the progress thread sleeps in: the worker's event fd and our wake-up eventfd.
Status UcxWorker::SetUpWakeup() {
  ucs_status_t st = ucp_worker_get_efd(worker_, &worker_fd_);
  if (st != UCS_OK) return UcxStatus(st, "worker event fd");
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return ErrnoStatus(errno, "data-plane epoll/eventfd");
  for (int fd : {worker_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return ErrnoStatus(errno, "data-plane epoll_ctl");
    }
  }
  return OkStatus();
}

UcxWorker::~UcxWorker() {
  Stop(nullptr);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr && owns_context_) ucp_cleanup(context_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void UcxWorker::Start(Tick tick) {
  tick_ = std::move(tick);
  thread_ = NamedThread(name_, [this] { Loop(); });
}

bool UcxWorker::Post(Task task) {
  bool first;
  {
    std::lock_guard lock(mu_);
    if (!accepting_) return false;
    first = queue_.empty();
    queue_.push_back(std::move(task));
  }
  // Only the task that makes the queue non-empty wakes the thread: the ones behind it are run
  // by the same wake-up, since the thread takes the whole queue and checks it (under mu_) again
  // before it sleeps. A group commit that completes many writes then costs one eventfd write.
  if (first && !OnProgressThread()) {
    uint64_t one = 1;
    ssize_t n = write(wake_fd_, &one, sizeof one);
    (void)n;  // EAGAIN only when the counter is saturated: the thread is awake anyway
  }
  return true;
}

void UcxWorker::Stop(Task cleanup) {
  if (!thread_.joinable()) {
    std::lock_guard lock(mu_);
    accepting_ = false;
    queue_.clear();
    return;
  }
  cleanup_ = std::move(cleanup);
  stop_requested_.store(true);
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;
  thread_.join();
}

bool UcxWorker::RunQueued() {
  {
    std::lock_guard lock(mu_);
    if (queue_.empty()) return false;
    batch_.swap(queue_);  // both keep their capacity: no allocation per pass
  }
  for (Task& t : batch_) t();
  batch_.clear();
  return true;
}

std::chrono::microseconds UcxWorker::PollAfterActivity() {
  static const std::chrono::microseconds poll = [] {
    if (const char* v = std::getenv("PENSTOCK_POLL_US"); v != nullptr && *v != '\0') {
      return std::chrono::microseconds(std::strtoul(v, nullptr, 10));
    }
    // Polling trades a core for latency: with few cores it takes them from the threads doing
    // the work (src/transport/README.md has the figures), so only hosts with cores to spare poll.
    cpu_set_t cpus;
    const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus)
                                                                       : static_cast<int>(std::thread::hardware_concurrency());
    return usable >= kPollMinCpus ? kPollAfterActivity : std::chrono::microseconds(0);
  }();
  return poll;
}

Status UcxWorker::SetAmHandlers(std::initializer_list<std::pair<wire::AmId, ucp_am_recv_callback_t>> handlers,
                                void* arg) {
  for (auto [id, cb] : handlers) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = static_cast<unsigned>(id);
    hp.cb = cb;
    hp.arg = arg;
    ucs_status_t st = ucp_worker_set_am_recv_handler(worker_, &hp);
    if (st != UCS_OK) return UcxStatus(st, "set active-message handler");
  }
  return OkStatus();
}

void UcxWorker::AddSource(int fd, Progress progress) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    PS_LOG_WARN("{}: cannot watch fd {}: {}; its events are polled only", name_, fd, std::strerror(errno));
  }
  sources_.emplace_back(fd, std::move(progress));
}

void UcxWorker::Loop() {
  thread_id_.store(std::this_thread::get_id());
  epoll_event events[8];
  auto last_active = std::chrono::steady_clock::now();
  int fruitless_busy = 0;  // passes in a row that progressed nothing while UCX would not arm
  while (!stop_requested_.load()) {
    // What each stage sends (the calls or replies its tasks make, the calls the callbacks of
    // the replies just received make, ...) goes when the stage ends, together for each peer.
    bool active = RunQueued();
    batcher_.Flush();
    while (ucp_worker_progress(worker_) != 0) active = true;
    batcher_.Flush();
    for (auto& [fd, progress] : sources_) active |= progress();
    std::chrono::milliseconds sleep = tick_ ? tick_() : std::chrono::milliseconds::max();
    active |= batcher_.Flush();
    {
      std::lock_guard lock(mu_);
      if (!queue_.empty()) continue;
    }
    if (stop_requested_.load()) break;
    // Keep polling briefly after activity: a burst (e.g. a rendezvous in fragments) then
    // costs no epoll round trip per fragment, while an idle thread still sleeps.
    auto now = std::chrono::steady_clock::now();
    if (active) last_active = now;
    if (now - last_active < PollAfterActivity()) {
      // Poll, but let any other runnable thread on this core go first: on a busy host a
      // spinning transport thread would take the core from the threads doing the work.
      if (!active) std::this_thread::yield();
      continue;
    }
    ucs_status_t st = ucp_worker_arm(worker_);
    if (st == UCS_ERR_BUSY) {  // events arrived meanwhile: progress again
      if (active) {
        fruitless_busy = 0;
      } else if (++fruitless_busy > kBusySpinsBeforePause) {
        pollfd pfd{wake_fd_, POLLIN, 0};
        const timespec pause{0, kBusyPauseNs};
        if (ppoll(&pfd, 1, &pause, nullptr) > 0) {  // a task was posted: drained, run next pass
          uint64_t v;
          ssize_t r = read(wake_fd_, &v, sizeof v);
          (void)r;
        }
      }
      continue;
    }
    fruitless_busy = 0;
    // Sleep at most 1 s even without timers: a safety net should some transport miss a wakeup.
    int timeout_ms = static_cast<int>(std::clamp<int64_t>(sleep.count(), 0, 1000));
    int n = epoll_wait(epoll_fd_, events, 8, timeout_ms);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd != worker_fd_) {  // our eventfd, or a source's: re-arm it
        uint64_t v;
        ssize_t r = read(events[i].data.fd, &v, sizeof v);
        (void)r;
      }
    }
  }
  RunQueued();
  batcher_.Flush();
  if (cleanup_) cleanup_();
  sources_.clear();
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
  }
  RunQueued();
  Cancel(batcher_.TakeAll(), false);  // (the cleanup closed the endpoints)
  while (ucp_worker_progress(worker_) != 0) {
  }
}

void UcxWorker::Cancel(std::vector<std::unique_ptr<OutgoingMessage>> msgs, bool later) {
  if (msgs.empty()) return;
  auto box = std::make_shared<std::vector<std::unique_ptr<OutgoingMessage>>>(std::move(msgs));
  auto run = [box] {
    for (auto& m : *box) m->on_complete(UCS_ERR_CANCELED);
  };
  if (!later || !Post(run)) run();
}

void UcxWorker::CloseEndpointAsync(ucp_ep_h ep, std::function<void()> closed) {
  Cancel(batcher_.Take(ep), true);
  auto* cb = new std::function<void()>(std::move(closed));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                       UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  param.user_data = cb;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(user_data));
    ucp_request_free(request);
    if (*fn) (*fn)();
  };
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    std::unique_ptr<std::function<void()>> fn(cb);
    if (*fn) (*fn)();
  }
}

void UcxWorker::CloseEndpoints(const std::vector<ucp_ep_h>& eps,
                               std::chrono::milliseconds limit) {
  for (ucp_ep_h ep : eps) Cancel(batcher_.Take(ep), false);
  auto remaining = std::make_shared<size_t>(eps.size());
  for (ucp_ep_h ep : eps) CloseEndpointAsync(ep, [remaining] { --*remaining; });
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (*remaining > 0 && std::chrono::steady_clock::now() < deadline) {
    if (ucp_worker_progress(worker_) == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (*remaining > 0) PS_LOG_WARN("data plane: {} endpoints did not close in time", *remaining);
}

std::string EndpointTransports(ucp_ep_h ep) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return "";
  ucp_ep_print_info(ep, f);
  fclose(f);
  std::string text(buf, len);
  free(buf);
  if (getenv("PENSTOCK_PRINT_EP_INFO") != nullptr) fprintf(stderr, "%s\n", text.c_str());
  // "lane[N]:  I:tcp/lo.0 md[..] ..." lines.
  std::vector<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t lane = line.find("lane[");
    if (lane == std::string::npos) continue;
    std::istringstream words(line.substr(lane));
    std::string w;
    words >> w;  // lane[N]:
    words >> w;  // I:tl/dev
    size_t colon = w.find(':');
    size_t slash = w.find('/');
    if (colon == std::string::npos || slash == std::string::npos || slash < colon) continue;
    std::string tl = w.substr(colon + 1, slash - colon - 1);
    if (std::find(names.begin(), names.end(), tl) == names.end()) names.push_back(tl);
  }
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

bool BatchesPay(ucp_ep_h ep) { return EndpointTransports(ep) == "tcp"; }

}  // namespace penstock
