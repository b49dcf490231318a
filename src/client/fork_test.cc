// A Client across fork(): a process with a live client (map watch running, after I/O) forks;
// in the child the inherited client and a new connect fail at once (never hang), and the
// parent keeps working, its map watch included.
//
// Its own binary: the cluster (mgmt and two targets, in process) runs in a child forked before
// this process first touches gRPC or UCX, so the process under test holds only its client.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "client/test_cluster.h"
#include "penstock/client.h"

namespace penstock {
namespace {

using namespace std::chrono_literals;
using testing::RandomBytes;

// mgmt and two targets in a forked child, until the parent closes its end of the pipe.
class ClusterProcess {
 public:
  ClusterProcess() {
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      int rc = 1;
      {
        testing::InProcessCluster cluster(2);
        if (cluster.ok()) {
          std::string a = cluster.mgmt_address() + "\n";
          if (::write(up[1], a.data(), a.size()) == static_cast<ssize_t>(a.size())) {
            char c;
            while (::read(down[0], &c, 1) > 0) {
            }
            rc = 0;
          }
        }
      }
      ::_exit(rc);
    }
    ::close(up[1]);
    ::close(down[0]);
    down_ = down[1];
    char buf[128];
    ssize_t n = 0;
    for (ssize_t r; (r = ::read(up[0], buf + n, sizeof(buf) - 1 - n)) > 0;) {
      n += r;
      if (std::memchr(buf, '\n', n)) break;
    }
    ::close(up[0]);
    if (n <= 0 || buf[n - 1] != '\n') {
      ADD_FAILURE() << "the cluster process did not start";
      return;
    }
    mgmt_ = std::string(buf, n - 1);
  }
  ~ClusterProcess() {
    if (down_ >= 0) ::close(down_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  const std::string& mgmt() const { return mgmt_; }

 private:
  pid_t pid_ = -1;
  int down_ = -1;
  std::string mgmt_;
};

// Waits up to `limit` for `pid`; kills it (a hang) when it has not exited by then.
// Returns its exit code, or -1 when it hung, -2 - signal when a signal ended it.
int WaitChild(pid_t pid, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -2 - WTERMSIG(st);
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(20ms);
  }
}

class ClientForkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new ClusterProcess(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  ClientOptions Options() const {
    ClientOptions o;
    o.mgmt_address = cluster_->mgmt();
    o.timeout = 5000ms;
    return o;
  }
  static ClusterProcess* cluster_;
};
ClusterProcess* ClientForkTest::cluster_ = nullptr;

// The child's part. Exit codes name the step that failed.
int InChild(std::unique_ptr<Client>& inherited, const ClientOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto expect_refused = [](const Status& s, const char* what, const char* fix) {
    if (s.code() == StatusCode::kFailedPrecondition && s.message().find(fix) != std::string::npos) return true;
    std::fprintf(stderr, "child: %s: %s\n", what, s.ToString().c_str());
    return false;
  };
  const char* kNewClient = "connect a new Client in this process";
  if (!expect_refused(inherited->Get("c", "from-parent").status(), "get", kNewClient)) return 10;
  if (!expect_refused(inherited->Put("c", "x", RandomBytes(10, 3)), "put", kNewClient)) return 11;
  if (!expect_refused(inherited->CreateContainer("child").status(), "create", kNewClient)) return 12;
  if (!expect_refused(inherited->ListContainers().status(), "list containers", kNewClient)) return 13;
  if (!expect_refused(inherited->Open("c", "from-parent").status(), "open", kNewClient)) return 14;
  if (inherited->map_epoch() != 0) return 15;
  auto fresh = Client::Connect(options);
  if (!expect_refused(fresh.status(), "connect", "forkserver")) return 16;
  inherited.reset();  // leaks it: joining the parent's threads would hang here
  if (std::chrono::steady_clock::now() - start > 2s) return 17;
  return 0;
}

TEST_F(ClientForkTest, ChildIsRefusedAtOnceParentKeepsWorking) {
  ASSERT_FALSE(cluster_->mgmt().empty());
  auto parent = Client::Connect(Options());
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  ContainerProps props;
  props.stripe_unit = 64 * 1024;
  ASSERT_TRUE((*parent)->CreateContainer("c", props).ok());
  const auto data = RandomBytes(300 * 1024, 1);
  ASSERT_TRUE((*parent)->Put("c", "from-parent", data).ok());
  auto back = (*parent)->Get("c", "from-parent");
  ASSERT_TRUE(back.ok() && *back == data);

  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(InChild(*parent, Options()));
  int rc = WaitChild(pid, 30s);
  ASSERT_EQ(rc, 0) << (rc == -1 ? "the child hung" : "the child failed (exit code names the step)");

  // The parent: containers made after the fork, objects, and the map watch (a container
  // deletion bumps the epoch; only the watch brings it, the deletion's own listing refreshes
  // the map before it).
  ASSERT_TRUE((*parent)->CreateContainer("after", props).ok());
  ASSERT_TRUE((*parent)->GetContainer("after").ok());
  const auto more = RandomBytes(200 * 1024, 4);
  ASSERT_TRUE((*parent)->Put("after", "o", more).ok());
  auto got = (*parent)->Get("after", "o");
  ASSERT_TRUE(got.ok() && *got == more) << got.status().ToString();
  ASSERT_TRUE((*parent)->Delete("after", "o").ok());
  const uint64_t before = (*parent)->map_epoch();
  ASSERT_TRUE((*parent)->DeleteContainer("after").ok());
  const auto until = std::chrono::steady_clock::now() + 10s;
  while ((*parent)->map_epoch() <= before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT((*parent)->map_epoch(), before);
  auto again = (*parent)->Get("c", "from-parent");
  ASSERT_TRUE(again.ok() && *again == data);
}

}  // namespace
}  // namespace penstock
