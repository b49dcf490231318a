// ucx_worker.h — one UCX context + worker driven by one progress thread.
//
// The unit of threading for the data plane: RpcServer and RpcClient each own one UcxWorker.
// The worker is created with UCS_THREAD_MODE_SINGLE, so every UCX call on it (and every UCX
// callback) happens on the progress thread. Other threads hand work over with Post(), which
// queues a task and wakes the thread through an eventfd in the same epoll set as the worker's
// own event fd. Idle, the thread sleeps in epoll_wait (ucp_worker_arm): no busy polling.
//
// Lifetime: Create() -> Start(tick) -> ... -> Stop(cleanup) -> destructor. Post() is thread-safe
// at any time; after Stop() it returns false and drops the task. Everything else that takes a
// ucp handle is for the progress thread only.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "penstock/status.h"
#include "transport/am_message.h"

namespace penstock {

class UcxWorker {
 public:
  using Task = std::function<void()>;
  // Called on the progress thread after each round of progress; returns how long the thread
  // may sleep before it must be called again (timers), or milliseconds::max() for "no timer".
  using Tick = std::function<std::chrono::milliseconds()>;

  struct Options {
    std::string name = "ps-ucx";  // the UCX context's and the progress thread's name
    // UCX_NET_DEVICES for this worker's context (e.g. "mlx5_0:1" or "eth1"); "" : the
    // environment's (UCX's default: all devices).
    std::string net_devices{};
    // Several workers of one context on different threads: the context is created for that
    // (mt_workers_shared), and the other workers pass it here (borrowed: it must outlive them;
    // net_devices is then the owner's).
    bool shared_context = false;
    ucp_context_h context = nullptr;
  };

  // Errors: kUnavailable when UCX cannot be initialised (message carries UCX's reason).
  // The first call sets UCX_TCP_CM_REUSEADDR=y (and other transport defaults) in the
  // environment unless already set, and leaves UCX_MM_ERROR_HANDLING to the operator (see
  // README.md).
  static Result<std::unique_ptr<UcxWorker>> Create(const Options& options);
  ~UcxWorker();  // Stop()s with no cleanup if still running.

  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Starts the progress thread.
  void Start(Tick tick);

  // Queues `task` for the progress thread. Thread-safe. Returns false (dropping the task)
  // once the thread has stopped.
  bool Post(Task task);

  // Stops the thread: runs the queued tasks, then `cleanup` on the progress thread (close
  // endpoints there with CloseEndpoints), then any tasks queued meanwhile, then joins.
  // Call from any thread but the progress thread. Idempotent.
  void Stop(Task cleanup);

  bool OnProgressThread() const { return std::this_thread::get_id() == thread_id_.load(); }

  // Progress thread only. Adds an event source to the loop: `progress` runs on this thread
  // after every round of network progress (it returns whether it did anything, which keeps the
  // loop from sleeping) and when `fd`, an eventfd, is signalled (the loop reads it first, to
  // re-arm it). The source stays until the thread stops; `fd` must stay open until then, and
  // `progress` is not called after the Stop cleanup has run.
  using Progress = std::function<bool()>;
  void AddSource(int fd, Progress progress);

  // Registers `cb` (with `arg`) as the handler of each AM id on this worker. Before Start.
  Status SetAmHandlers(std::initializer_list<std::pair<wire::AmId, ucp_am_recv_callback_t>> handlers,
                       void* arg);

  // Progress thread only. Sends a message through this thread's batcher (MessageBatcher): small
  // ones leave together at the end of the loop's pass. Use it for every message the thread
  // sends.
  void Send(ucp_ep_h ep, wire::AmId id, std::unique_ptr<OutgoingMessage> msg, uint32_t flags) {
    batcher_.Send(ep, id, std::move(msg), flags);
  }
  // Progress thread only. Sends what waits in the batcher now, before the pass ends.
  bool FlushSends() { return batcher_.Flush(); }
  // Counts the messages this thread sends in batches into `counter` too. Before Start.
  void CountBatchedInto(Counter* counter) { batcher_.CountInto(counter); }

  // Progress thread only. Force-closes `eps` and progresses until UCX has released them
  // (bounded by `limit`); their outstanding sends complete with an error meanwhile.
  void CloseEndpoints(const std::vector<ucp_ep_h>& eps,
                      std::chrono::milliseconds limit = std::chrono::milliseconds(2000));
  // Progress thread only. Force-closes `ep` without waiting; `closed` runs once UCX released it.
  void CloseEndpointAsync(ucp_ep_h ep, std::function<void()> closed);

  ucp_worker_h worker() const { return worker_; }
  ucp_context_h context() const { return context_; }
  size_t max_am_header() const { return max_am_header_; }

 private:
  UcxWorker() = default;
  // Create's steps, once context_ is set.
  Status CreateWorker();
  Status SetUpWakeup();
  void Loop();
  bool RunQueued();  // true when it ran anything
  // Completes messages that never left (their endpoint closed, the thread stopping) with
  // UCS_ERR_CANCELED: as a task when `later`, as UCX completes a send after its call.
  void Cancel(std::vector<std::unique_ptr<OutgoingMessage>> msgs, bool later);

  static constexpr std::chrono::microseconds kPollAfterActivity{100};
  static constexpr int kPollMinCpus = 4;
  // ucp_worker_arm can answer UCS_ERR_BUSY pass after pass while progress finds nothing to do
  // (a peer's shared-memory FIFO full, its thread waiting for a core): after this many such
  // passes in a row the loop pauses kBusyPauseNs (or until a task is posted) instead of spinning
  // on, so the threads that would drain it get the CPU.
  static constexpr int kBusySpinsBeforePause = 64;
  static constexpr long kBusyPauseNs = 50'000;
  // PENSTOCK_POLL_US when set; else kPollAfterActivity when this process may run on at least
  // kPollMinCpus CPUs, and no polling with fewer.
  static std::chrono::microseconds PollAfterActivity();

  Tick tick_;
  std::string name_;  // the progress thread's (Options::name)
  ucp_context_h context_ = nullptr;
  bool owns_context_ = false;
  ucp_worker_h worker_ = nullptr;
  size_t max_am_header_ = 0;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;    // our eventfd: Post() writes it
  int worker_fd_ = -1;  // UCX's event fd (owned by UCX)
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stop_requested_{false};
  Task cleanup_;

  std::vector<std::pair<int, Progress>> sources_;  // the progress thread's (AddSource)
  MessageBatcher batcher_;                          // the progress thread's

  std::mutex mu_;
  std::vector<Task> queue_;  // guarded by mu_
  std::vector<Task> batch_;  // the progress thread's: tasks being run (swapped with queue_)
  bool accepting_ = true;   // guarded by mu_
};

// "UCX <what> failed: <ucs_status_string>".
Status UcxStatus(ucs_status_t status, const std::string& what);

// The transports an endpoint's lanes use, from ucp_ep_print_info: "tcp", "posix,cma", ... ("" if
// it cannot tell). Progress thread. (PENSTOCK_PRINT_EP_INFO=1 prints UCX's whole description.)
std::string EndpointTransports(ucp_ep_h ep);
// Whether small messages to `ep` should go in batches (MessageBatcher): on tcp, where each
// message costs a system call, a packet and a wake-up of the peer. Not on shared memory (a
// message is a copy into the peer's FIFO; a batch over its 8 KiB segment goes in fragments:
// 4 KiB calls ran 30% slower batched) nor on RDMA (no system call to save). Progress thread,
// once the endpoint is connected.
bool BatchesPay(ucp_ep_h ep);

}  // namespace penstock
