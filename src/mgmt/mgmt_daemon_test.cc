// Tests of MgmtDaemon: the server and the repair service start, report and stop as one.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/temp_dir.h"
#include "mgmt/mgmt_daemon.h"
#include "mgmt_client/mgmt_client.h"

namespace penstock {
namespace {

using namespace std::chrono_literals;

TEST(MgmtDaemon, ServesRepairStatusAndStops) {
  ::penstock::testing::TempDir dir;
  MgmtDaemonOptions o;
  o.server.data_dir = dir.path();
  o.server.metrics_listen = "";
  o.repair_interval = 200ms;
  auto daemon = MgmtDaemon::Start(o);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  auto client = MgmtClient::Connect((*daemon)->server()->address(), 2000ms);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // The repair service's progress is what GetStatus reports (empty without one).
  auto st = (*client)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->repair().state().empty());

  std::thread waiter([&] { (*daemon)->Wait(); });
  (*daemon)->Stop();
  waiter.join();
  (*daemon)->Stop();  // again: nothing left to stop
}

}  // namespace
}  // namespace penstock
