#include "mgmt/cluster_state.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "mgmt/fake_meta_store.h"
#include "protocol/object_head.h"

namespace penstock::mgmt {
namespace {

// The scheme of `text` ("": none given).
std::optional<Redundancy> R(const char* text) {
  if (*text == 0) return std::nullopt;
  return *ParseRedundancy(text);
}


constexpr int64_t kTimeout = 5000;

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override { Reload(); }

  void Reload() {
    state_.reset();
    ClusterStateOptions o;
    o.heartbeat_timeout_ms = kTimeout;
    o.lost_timeout_ms = lost_timeout_ms_;
    o.now_ms = [this] { return now_; };
    Result<std::unique_ptr<ClusterState>> s = ClusterState::Load(&store_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    state_ = std::move(s).value();
  }

  static v1::RegisterTargetRequest Reg(const std::string& uuid, const std::string& addr,
                                       const std::string& domain = "host-a") {
    v1::RegisterTargetRequest r;
    r.set_uuid(uuid);
    r.set_address(addr);
    r.set_metrics_address("127.0.0.1:9100");
    r.set_capacity_bytes(1 << 30);
    r.set_fault_domain(domain);
    return r;
  }

  static v1::HeartbeatRequest Hb(uint32_t id, const std::string& uuid, uint64_t used = 0) {
    v1::HeartbeatRequest h;
    h.set_target_id(id);
    h.set_uuid(uuid);
    h.set_used_bytes(used);
    h.set_live_bytes(used / 2);
    h.set_shards(7);
    return h;
  }

  const v1::Target& TargetAt(const v1::ClusterMap& m, int i) { return m.targets(i); }

  FakeMetaStore store_;
  int64_t now_ = 1'000'000;
  int64_t lost_timeout_ms_ = 0;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ClusterStateTest, NewTargetsGetSequentialIdsAndBumpEpoch) {
  EXPECT_EQ(state_->GetClusterMap().epoch(), 0u);
  Result<Registration> a = state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->target_id, 1u);
  EXPECT_EQ(a->epoch, 1u);
  Result<Registration> b = state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->target_id, 2u);
  EXPECT_EQ(b->epoch, 2u);

  v1::ClusterMap m = state_->GetClusterMap();
  EXPECT_EQ(m.epoch(), 2u);
  ASSERT_EQ(m.targets_size(), 2);
  EXPECT_EQ(m.targets(0).id(), 1u);
  EXPECT_EQ(m.targets(0).uuid(), "uuid-a");
  EXPECT_EQ(m.targets(0).address(), "10.0.0.1:5000");
  EXPECT_EQ(m.targets(0).metrics_address(), "127.0.0.1:9100");
  EXPECT_EQ(m.targets(0).state(), v1::TARGET_STATE_UP);
  EXPECT_EQ(m.targets(0).fault_domain(), "host-a");
  EXPECT_EQ(m.targets(0).capacity_bytes(), 1u << 30);
  EXPECT_EQ(m.targets(0).last_heartbeat_ms(), now_);
  EXPECT_EQ(m.targets(1).fault_domain(), "host-b");
}

TEST_F(ClusterStateTest, KnownUuidKeepsIdAndBumpsOnlyOnChange) {
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000")).ok());
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000")).ok());

  // Same registration again (a restart with the same config): same id; the target becomes
  // recovering (it may have missed writes), which bumps the epoch once.
  Result<Registration> same = state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->target_id, 1u);
  EXPECT_EQ(same->epoch, 3u);
  EXPECT_TRUE(state_->GetClusterMap().targets(0).recovering());
  EXPECT_EQ(state_->GetClusterMap().targets(0).recovering_since_epoch(), 3u);
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"))->epoch, 3u);  // nothing new

  // Repair checked it at epoch 2: too early; at epoch 3: it serves reads again.
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(*state_->MarkRecovered({1}, {}, 2, before), 3u);
  EXPECT_TRUE(state_->GetClusterMap().targets(0).recovering());
  EXPECT_EQ(*state_->MarkRecovered({1}, {}, 3, before), 4u);
  EXPECT_FALSE(state_->GetClusterMap().targets(0).recovering());
  // A client reports a write it missed: recovering again, one bump; a repeat changes nothing.
  EXPECT_EQ(*state_->MarkRecovering(0, {1, 1}), 5u);
  const auto pass_started = std::chrono::steady_clock::now();
  EXPECT_EQ(*state_->MarkRecovering(0, {1}), 5u);
  EXPECT_EQ(state_->MarkRecovering(0, {9}).status().code(), StatusCode::kNotFound);
  // The repeat came after that pass started (its listing may predate the missed write): the
  // pass clears nothing; one started after the report does.
  EXPECT_EQ(*state_->MarkRecovered({1}, {}, 5, pass_started), 5u);
  EXPECT_TRUE(state_->GetClusterMap().targets(0).recovering());
  EXPECT_EQ(*state_->MarkRecovered({1}, {}, 5, std::chrono::steady_clock::now()), 6u);

  // New port after restart: same id, address updated, bump.
  Result<Registration> moved = state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:6000"));
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->target_id, 1u);
  EXPECT_EQ(moved->epoch, 7u);
  EXPECT_EQ(state_->GetClusterMap().targets(0).address(), "10.0.0.1:6000");
  EXPECT_EQ(state_->GetClusterMap().targets_size(), 2);

  // A third target still gets the next id.
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-c", "10.0.0.3:5000"))->target_id, 3u);
}

TEST_F(ClusterStateTest, RegistrationValidation) {
  for (const char* bad : {"", "nohost", ":5000", "host:", "host:99999", "host:50x0"}) {
    Result<Registration> r = state_->RegisterTarget(Reg("uuid-a", bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("host:port"), std::string::npos);
  }
  EXPECT_EQ(state_->RegisterTarget(Reg("", "h:1")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(state_->RegisterTarget(Reg("u", "[::1]:5000")).ok());
  EXPECT_EQ(state_->GetClusterMap().epoch(), 1u);
}

TEST_F(ClusterStateTest, HeartbeatUpdatesUsageWithoutBump) {
  Registration r = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  now_ += 1000;
  Result<uint64_t> e = state_->Heartbeat(Hb(r.target_id, "uuid-a", 4096));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, 1u);
  v1::Target t = state_->GetClusterMap().targets(0);
  EXPECT_EQ(t.used_bytes(), 4096u);
  EXPECT_EQ(t.live_bytes(), 2048u);
  EXPECT_EQ(t.shards(), 7u);
  EXPECT_EQ(t.last_heartbeat_ms(), now_);
}

TEST_F(ClusterStateTest, HeartbeatFromUnknownTargetIsNotFound) {
  Registration r = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  Result<uint64_t> wrong_id = state_->Heartbeat(Hb(99, "uuid-a"));
  EXPECT_EQ(wrong_id.status().code(), StatusCode::kNotFound);
  EXPECT_NE(wrong_id.status().message().find("register again"), std::string::npos);
  EXPECT_EQ(state_->Heartbeat(Hb(r.target_id, "uuid-other")).status().code(),
            StatusCode::kNotFound);
}

TEST_F(ClusterStateTest, SilentTargetGoesDownAndComesBack) {
  Registration a = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  Registration b = *state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000"));
  ASSERT_EQ(b.epoch, 2u);

  // Within the timeout nothing changes.
  now_ += kTimeout;
  EXPECT_EQ(*state_->CheckLiveness(now_), 0);
  EXPECT_EQ(state_->GetClusterMap().epoch(), 2u);

  // b heartbeats; a stays silent past the timeout.
  ASSERT_TRUE(state_->Heartbeat(Hb(b.target_id, "uuid-b")).ok());
  now_ += 1;
  EXPECT_EQ(*state_->CheckLiveness(now_), 1);
  v1::ClusterMap m = state_->GetClusterMap();
  EXPECT_EQ(m.epoch(), 3u);
  EXPECT_EQ(m.targets(0).state(), v1::TARGET_STATE_DOWN);
  EXPECT_EQ(m.targets(1).state(), v1::TARGET_STATE_UP);
  ClusterSummary s = state_->Summary();
  EXPECT_EQ(s.targets_up, 1u);
  EXPECT_EQ(s.targets_down, 1u);

  // Already DOWN: no further bump.
  now_ += kTimeout / 2;
  EXPECT_EQ(*state_->CheckLiveness(now_), 0);
  EXPECT_EQ(state_->GetClusterMap().epoch(), 3u);

  // a heartbeats again: UP, bump.
  Result<uint64_t> e = state_->Heartbeat(Hb(a.target_id, "uuid-a"));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, 4u);
  EXPECT_EQ(state_->GetClusterMap().targets(0).state(), v1::TARGET_STATE_UP);

  // Both silent: both DOWN with a single bump.
  now_ += 10 * kTimeout;
  EXPECT_EQ(*state_->CheckLiveness(now_), 2);
  EXPECT_EQ(state_->GetClusterMap().epoch(), 5u);
  EXPECT_EQ(state_->Summary().targets_down, 2u);

  // Re-registration of a DOWN target also brings it UP with a bump.
  Result<Registration> again = state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000"));
  EXPECT_EQ(again->target_id, b.target_id);
  EXPECT_EQ(again->epoch, 6u);
  EXPECT_EQ(state_->GetClusterMap().targets(1).state(), v1::TARGET_STATE_UP);
}

TEST_F(ClusterStateTest, LostTargetsGiveUpTheirPlaceForGood) {
  lost_timeout_ms_ = 10 * kTimeout;
  Reload();
  Registration a = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  Registration b = *state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b"));
  ASSERT_TRUE(state_->CreateContainer("two", R("rep:2"), 0).ok());
  EXPECT_EQ(state_->CreateContainer("three", R("ec:2+1"), 0).status().code(), StatusCode::kFailedPrecondition);

  // Down first, then lost once silent past the lost timeout (one bump each).
  now_ += kTimeout + 1;
  ASSERT_TRUE(state_->Heartbeat(Hb(b.target_id, "uuid-b")).ok());
  EXPECT_EQ(*state_->CheckLiveness(now_), 1);
  EXPECT_EQ(state_->GetClusterMap().targets(0).state(), v1::TARGET_STATE_DOWN);
  now_ += 10 * kTimeout;
  ASSERT_TRUE(state_->Heartbeat(Hb(b.target_id, "uuid-b")).ok());
  const uint64_t before = state_->GetClusterMap().epoch();
  EXPECT_EQ(*state_->CheckLiveness(now_), 1);
  EXPECT_EQ(state_->GetClusterMap().targets(0).state(), v1::TARGET_STATE_LOST);
  EXPECT_EQ(state_->GetClusterMap().epoch(), before + 1);
  EXPECT_EQ(state_->Summary().targets_lost, 1u);

  // It may not come back under its old identity, and it no longer counts for new containers.
  Result<Registration> back = state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  EXPECT_EQ(back.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(back.status().message().find("empty its data directory"), std::string::npos);
  EXPECT_EQ(state_->Heartbeat(Hb(a.target_id, "uuid-a")).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(state_->CreateContainer("again", R("rep:2"), 0).status().code(), StatusCode::kFailedPrecondition);

  // An operator can declare a live target lost; the state survives a reload.
  Result<uint64_t> e = state_->MarkTargetLost(b.target_id);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(state_->MarkTargetLost(99).status().code(), StatusCode::kNotFound);
  Reload();
  EXPECT_EQ(state_->GetClusterMap().targets(1).state(), v1::TARGET_STATE_LOST);
  EXPECT_EQ(state_->GetClusterMap().epoch(), *e);
}

// A DOWN target is not declared LOST for silence while mgmt was not running: after a restart it
// gets a heartbeat timeout to report, then the lost timeout applies again.
TEST_F(ClusterStateTest, MgmtDowntimeDoesNotCountAsATargetsSilence) {
  lost_timeout_ms_ = 10 * kTimeout;
  Reload();
  Registration a = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  Registration b = *state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b"));
  now_ += kTimeout + 1;
  ASSERT_TRUE(state_->Heartbeat(Hb(b.target_id, "uuid-b")).ok());
  ASSERT_EQ(*state_->CheckLiveness(now_), 1);  // a is DOWN
  // mgmt is away for longer than the lost timeout; a comes back meanwhile.
  now_ += 20 * kTimeout;
  Reload();
  EXPECT_EQ(*state_->CheckLiveness(now_ + 1000), 0) << "declared LOST at once";
  EXPECT_EQ(state_->GetClusterMap().targets(0).state(), v1::TARGET_STATE_DOWN);
  ASSERT_TRUE(state_->Heartbeat(Hb(a.target_id, "uuid-a")).ok());  // within the grace
  EXPECT_NE(state_->GetClusterMap().targets(0).state(), v1::TARGET_STATE_LOST);
  // One that stays silent is declared LOST once the grace has passed.
  now_ += 1000;
  Reload();
  ASSERT_TRUE(state_->Heartbeat(Hb(a.target_id, "uuid-a")).ok());
  now_ += kTimeout + 1;
  ASSERT_TRUE(state_->Heartbeat(Hb(a.target_id, "uuid-a")).ok());
  ASSERT_EQ(*state_->CheckLiveness(now_), 1);  // b is DOWN now
  now_ += 20 * kTimeout;
  Reload();
  EXPECT_EQ(*state_->CheckLiveness(now_), 0);
  now_ += kTimeout + 1;
  ASSERT_TRUE(state_->Heartbeat(Hb(a.target_id, "uuid-a")).ok());
  EXPECT_EQ(*state_->CheckLiveness(now_), 1);
  EXPECT_EQ(state_->GetClusterMap().targets(1).state(), v1::TARGET_STATE_LOST);
}

// A write that missed a target makes it recovering for the written container only; a pass
// that checked that container clears it, one that did not leaves it.
TEST_F(ClusterStateTest, MissedWritesMarkTargetsRecoveringForTheirContainer) {
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000")).ok());
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b")).ok());
  const uint64_t one = state_->CreateContainer("one", R("rep:2"), 0)->id();
  const uint64_t two = state_->CreateContainer("two", R("rep:2"), 0)->id();
  const uint64_t gone = state_->CreateContainer("gone", R("rep:2"), 0)->id();
  EXPECT_EQ(state_->MarkRecovering(999, {1}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*state_->MarkRecovering(one, {1, 1}), 3u);
  EXPECT_EQ(*state_->MarkRecovering(one, {1}), 3u);  // a repeat changes nothing
  EXPECT_EQ(*state_->MarkRecovering(gone, {1}), 4u);
  EXPECT_EQ(*state_->MarkRecovering(two, {2}), 5u);
  v1::Target a = state_->GetClusterMap().targets(0);
  EXPECT_FALSE(a.recovering());  // not for every container
  ASSERT_EQ(a.recovering_containers_size(), 2);
  EXPECT_EQ(a.recovering_containers(0).container_id(), one);
  EXPECT_EQ(a.recovering_containers(0).since_epoch(), 3u);
  EXPECT_EQ(a.recovering_containers(1).container_id(), gone);

  // The entries survive a reload (a failover).
  Reload();
  ASSERT_EQ(state_->GetClusterMap().targets(0).recovering_containers_size(), 2);
  ASSERT_TRUE(state_->DeleteContainer("gone").ok());  // epoch 6: clients drop cached lookups
  // A pass that started at epoch 4 and checked "two" only: target 1 keeps "one", loses the deleted
  // container; target 2's "two" was reported at epoch 5, after the pass started.
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(*state_->MarkRecovered({}, {two}, 4, started), 7u);
  a = state_->GetClusterMap().targets(0);
  ASSERT_EQ(a.recovering_containers_size(), 1);
  EXPECT_EQ(a.recovering_containers(0).container_id(), one);
  EXPECT_EQ(state_->GetClusterMap().targets(1).recovering_containers_size(), 1);
  // A write in "one" missed target 1 again after the next pass started: that pass leaves it.
  const auto next_started = std::chrono::steady_clock::now();
  EXPECT_EQ(*state_->MarkRecovering(one, {1}), 7u);
  EXPECT_EQ(*state_->MarkRecovered({}, {one, two}, 7, next_started), 8u);
  EXPECT_EQ(state_->GetClusterMap().targets(0).recovering_containers_size(), 1);
  EXPECT_EQ(state_->GetClusterMap().targets(1).recovering_containers_size(), 0);
  EXPECT_EQ(*state_->MarkRecovered({}, {one, two}, 8, std::chrono::steady_clock::now()), 9u);
  EXPECT_EQ(state_->GetClusterMap().targets(0).recovering_containers_size(), 0);

  // A DOWN target still gets the entry (readers must not fall back to it), and is recovering
  // for every container when it returns; no pass clears an entry while it is down.
  now_ += kTimeout + 1;
  ASSERT_TRUE(state_->Heartbeat(Hb(1, "uuid-a")).ok());
  EXPECT_EQ(*state_->CheckLiveness(now_), 1);
  EXPECT_EQ(*state_->MarkRecovering(one, {2}), 11u);
  EXPECT_EQ(*state_->MarkRecovered({}, {one}, 11, std::chrono::steady_clock::now()), 11u);
  v1::Target b = state_->GetClusterMap().targets(1);
  EXPECT_EQ(b.state(), v1::TARGET_STATE_DOWN);
  ASSERT_EQ(b.recovering_containers_size(), 1);
  ASSERT_TRUE(state_->Heartbeat(Hb(2, "uuid-b")).ok());
  EXPECT_TRUE(state_->GetClusterMap().targets(1).recovering());
  // A write in "one" missing it while a pass runs keeps "one" recovering, not the whole
  // target: the pass clears the whole-target flag (a tenant reporting in a loop cannot keep a
  // target from serving every other container).
  const uint64_t at = state_->GetClusterMap().epoch();
  const auto pass_started = std::chrono::steady_clock::now();
  EXPECT_EQ(*state_->MarkRecovering(one, {2}), at);  // still listed: no change
  EXPECT_EQ(*state_->MarkRecovered({2}, {one}, at, pass_started), at + 1);
  b = state_->GetClusterMap().targets(1);
  EXPECT_FALSE(b.recovering());
  ASSERT_EQ(b.recovering_containers_size(), 1);
  EXPECT_EQ(b.recovering_containers(0).container_id(), one);
}

// The orphan grace period is the cluster's, fixed when it is made: a mgmt started later with
// another value (a new leader, a restart) publishes the stored one, so clients and repair agree.
TEST_F(ClusterStateTest, OrphanGraceIsFixedWhenTheClusterIsMade) {
  EXPECT_EQ(state_->GetClusterMap().orphan_grace_ms(), static_cast<uint64_t>(kOrphanGrace.count()));
  FakeMetaStore store;
  ClusterStateOptions o;
  o.orphan_grace_ms = 5000;
  auto made = ClusterState::Load(&store, o);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ((*made)->GetClusterMap().orphan_grace_ms(), 5000u);
  o.orphan_grace_ms = 90000;
  auto later = ClusterState::Load(&store, o);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->GetClusterMap().orphan_grace_ms(), 5000u);
}

// The placement epoch moves only with what moves slots: a new member, a new fault domain, a
// target declared lost; not with restarts, down/up or recovering.
TEST_F(ClusterStateTest, PlacementEpochFollowsOnlyPlacementChanges) {
  lost_timeout_ms_ = 10 * kTimeout;
  Reload();
  Registration a = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  EXPECT_EQ(a.placement_epoch, 1u);
  Registration b = *state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b"));
  EXPECT_EQ(b.placement_epoch, 2u);
  EXPECT_EQ(state_->GetClusterMap().placement_epoch(), 2u);
  Registration again = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:6000"));  // restart, new port
  EXPECT_GT(again.epoch, 2u);
  EXPECT_EQ(again.placement_epoch, 2u);
  ASSERT_TRUE(state_->MarkRecovering(0, {b.target_id}).ok());
  now_ += kTimeout + 1;
  ASSERT_TRUE(state_->Heartbeat(Hb(a.target_id, "uuid-a")).ok());
  EXPECT_EQ(*state_->CheckLiveness(now_), 1);  // b down
  EXPECT_EQ(state_->placement_epoch(), 2u);
  const uint64_t moved = state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:6000", "rack-2"))->epoch;
  EXPECT_EQ(state_->placement_epoch(), moved);
  const uint64_t lost = *state_->MarkTargetLost(b.target_id);
  EXPECT_EQ(state_->placement_epoch(), lost);
  Reload();
  EXPECT_EQ(state_->GetClusterMap().placement_epoch(), lost);
}

// Joins are recorded (Target.joined_epoch); repair marks a placement settled once it moved the
// data, which never goes back, never runs ahead of the placement, and survives a reload.
TEST_F(ClusterStateTest, SettledPlacementFollowsRepairAndSurvivesReload) {
  Registration a = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  ASSERT_TRUE(state_->CreateContainer("c1", R("none"), 0).ok());
  Registration b = *state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b"));
  v1::ClusterMap m = state_->GetClusterMap();
  EXPECT_EQ(m.settled_placement_epoch(), 0u);
  EXPECT_EQ(TargetAt(m, 0).joined_epoch(), 0u);  // before any container: no data to move
  EXPECT_EQ(TargetAt(m, 1).joined_epoch(), b.epoch);
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:6000")).ok());  // a restart is no join
  EXPECT_EQ(TargetAt(state_->GetClusterMap(), 0).joined_epoch(), 0u);

  const uint64_t before = state_->GetClusterMap().epoch();
  const uint64_t e = *state_->MarkPlacementSettled(a.placement_epoch);
  EXPECT_EQ(e, before + 1);  // clients learn it
  EXPECT_EQ(state_->GetClusterMap().settled_placement_epoch(), a.placement_epoch);
  EXPECT_EQ(*state_->MarkPlacementSettled(a.placement_epoch), e);  // no change, no bump
  EXPECT_EQ(*state_->MarkPlacementSettled(0), e);                 // never back
  ASSERT_TRUE(state_->MarkPlacementSettled(1000).ok());           // capped at the placement
  EXPECT_EQ(state_->GetClusterMap().settled_placement_epoch(), state_->placement_epoch());
  Reload();
  EXPECT_EQ(state_->GetClusterMap().settled_placement_epoch(), b.placement_epoch);
  EXPECT_EQ(TargetAt(state_->GetClusterMap(), 1).joined_epoch(), b.epoch);
}

TEST_F(ClusterStateTest, CapacityChangeInHeartbeatBumps) {
  Registration a = *state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"));
  v1::HeartbeatRequest h = Hb(a.target_id, "uuid-a");
  h.set_capacity_bytes(2ull << 30);
  EXPECT_EQ(*state_->Heartbeat(h), 2u);
  EXPECT_EQ(state_->GetClusterMap().targets(0).capacity_bytes(), 2ull << 30);
  EXPECT_EQ(*state_->Heartbeat(h), 2u);
}

TEST_F(ClusterStateTest, Containers) {
  Result<v1::Container> c = state_->CreateContainer("ckpt", R(""), 0);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->id(), 1u);
  EXPECT_EQ(c->name(), "ckpt");
  EXPECT_EQ(c->redundancy(), "none");
  EXPECT_EQ(c->stripe_unit(), 1u << 20);
  EXPECT_EQ(c->created_ms(), now_);

  Result<v1::Container> d = state_->CreateContainer("data.set-1", R("none"), 65536);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->id(), 2u);
  EXPECT_EQ(d->stripe_unit(), 65536u);

  EXPECT_EQ(state_->GetContainer("ckpt")->id(), 1u);
  std::vector<v1::Container> all = state_->ListContainers();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name(), "ckpt");
  EXPECT_EQ(all[1].name(), "data.set-1");
  EXPECT_EQ(state_->Summary().containers, 2u);
  // Containers are not part of the cluster map.
  EXPECT_EQ(state_->GetClusterMap().epoch(), 0u);

  EXPECT_TRUE(state_->DeletedContainerIds().empty());
  ASSERT_TRUE(state_->DeleteContainer("ckpt").ok());
  EXPECT_EQ(state_->ListContainers().size(), 1u);
  // A re-created container gets a new id, never a reused one.
  EXPECT_EQ(state_->CreateContainer("ckpt", R("none"), 0)->id(), 3u);
  // The deletion is recorded (repair empties only recorded ids), and survives a reload.
  Reload();
  EXPECT_EQ(state_->DeletedContainerIds(), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(state_->ContainerIdRetired(1));
  EXPECT_FALSE(state_->ContainerIdRetired(2));  // live
  EXPECT_FALSE(state_->ContainerIdRetired(3));  // live, the re-created one
  EXPECT_FALSE(state_->ContainerIdRetired(4));  // never given out
  EXPECT_FALSE(state_->ContainerIdRetired(0));
  EXPECT_EQ(state_->CreateContainer("next", R("none"), 0)->id(), 4u);
}

TEST_F(ClusterStateTest, ContainerErrors) {
  ASSERT_TRUE(state_->CreateContainer("x", R("none"), 0).ok());
  Result<v1::Container> dup = state_->CreateContainer("x", R("none"), 0);
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.status().message(), "container 'x' already exists");

  Result<v1::Container> missing = state_->GetContainer("y");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "container 'y' does not exist; create it with `penstock container create y`");
  Status del = state_->DeleteContainer("y");
  EXPECT_EQ(del.code(), StatusCode::kNotFound);
  EXPECT_EQ(del.message(), missing.status().message());

  Result<v1::Container> rep = state_->CreateContainer("z", R("rep:3"), 0);
  EXPECT_EQ(rep.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(rep.status().message(),
            "redundancy rep:3 puts each stripe on 3 targets, but the cluster has 0; add targets or choose a "
            "narrower scheme");
  EXPECT_EQ(state_->CreateContainer("z", Redundancy{Redundancy::Kind::kErasure, 4, 0, 0}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->CreateContainer("bad/name", R("none"), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->CreateContainer("z", R("none"), 1000).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->ListContainers().size(), 1u);
}

// A reload that cannot read the store (a new leader, etcd briefly unreachable) keeps the state
// it had: no empty map served, no ids or epochs handed out again.
TEST_F(ClusterStateTest, FailedReloadKeepsTheState) {
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000")).ok());
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b")).ok());
  ASSERT_TRUE(state_->CreateContainer("keep", R("none"), 0).ok());
  const v1::ClusterMap before = state_->GetClusterMap();
  store_.set_fail_scans(true);
  EXPECT_EQ(state_->Reload().code(), StatusCode::kUnavailable);
  store_.set_fail_scans(false);
  const v1::ClusterMap after = state_->GetClusterMap();
  EXPECT_EQ(after.epoch(), before.epoch());
  EXPECT_EQ(after.targets_size(), 2);
  EXPECT_EQ(state_->ListContainers().size(), 1u);
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "host-b"))->target_id, 2u);  // not a new id
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-c", "10.0.0.3:5000"))->target_id, 3u);
}

TEST_F(ClusterStateTest, FailedCommitChangesNothing) {
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000")).ok());
  ASSERT_TRUE(state_->CreateContainer("keep", R("none"), 0).ok());
  store_.set_fail_writes(true);
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000")).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(state_->CreateContainer("new", R("none"), 0).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(state_->DeleteContainer("keep").code(), StatusCode::kUnavailable);
  now_ += 2 * kTimeout;
  EXPECT_EQ(state_->CheckLiveness(now_).status().code(), StatusCode::kUnavailable);
  v1::ClusterMap m = state_->GetClusterMap();
  EXPECT_EQ(m.epoch(), 1u);
  ASSERT_EQ(m.targets_size(), 1);
  EXPECT_EQ(m.targets(0).state(), v1::TARGET_STATE_UP);
  EXPECT_EQ(state_->ListContainers().size(), 1u);

  store_.set_fail_writes(false);
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000"))->target_id, 2u);
  EXPECT_EQ(state_->CreateContainer("new", R("none"), 0)->id(), 2u);
}

TEST_F(ClusterStateTest, StateSurvivesReload) {
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000")).ok());
  Registration b = *state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000", "rack-2"));
  ASSERT_TRUE(state_->CreateContainer("c1", R("none"), 8192).ok());
  ASSERT_TRUE(state_->CreateContainer("c2", R("none"), 0).ok());
  ASSERT_TRUE(state_->DeleteContainer("c2").ok());
  // b heartbeats, a goes DOWN.
  now_ += kTimeout;
  ASSERT_TRUE(state_->Heartbeat(Hb(b.target_id, "uuid-b")).ok());
  now_ += 1;
  ASSERT_EQ(*state_->CheckLiveness(now_), 1);
  const v1::ClusterMap before = state_->GetClusterMap();

  now_ += 100;
  Reload();
  v1::ClusterMap after = state_->GetClusterMap();
  EXPECT_EQ(after.epoch(), before.epoch());
  ASSERT_EQ(after.targets_size(), 2);
  EXPECT_EQ(after.targets(0).uuid(), "uuid-a");
  EXPECT_EQ(after.targets(0).state(), v1::TARGET_STATE_DOWN);
  EXPECT_EQ(after.targets(1).state(), v1::TARGET_STATE_UP);
  EXPECT_EQ(after.targets(1).fault_domain(), "rack-2");
  EXPECT_EQ(after.targets(1).address(), "10.0.0.2:5000");
  // UP targets get a grace period from the reload.
  EXPECT_EQ(after.targets(1).last_heartbeat_ms(), now_);
  now_ += kTimeout;
  EXPECT_EQ(*state_->CheckLiveness(now_), 0);

  ASSERT_EQ(state_->ListContainers().size(), 1u);
  EXPECT_EQ(state_->GetContainer("c1")->stripe_unit(), 8192u);
  // Counters survive: ids are not reused.
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-c", "10.0.0.3:5000"))->target_id, 3u);
  EXPECT_EQ(state_->CreateContainer("c3", R("none"), 0)->id(), 3u);
  // Known uuid keeps its id after reload.
  EXPECT_EQ(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000"))->target_id, 1u);
}

TEST_F(ClusterStateTest, CorruptRecordIsDataLoss) {
  ASSERT_TRUE(store_.Put("mgmt/v1/target/0000000001", "\xff\xff garbage").ok());
  ClusterStateOptions o;
  o.now_ms = [this] { return now_; };
  Result<std::unique_ptr<ClusterState>> s = ClusterState::Load(&store_, o);
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(store_.Put("mgmt/v1/target/0000000001", "").ok());
  ASSERT_TRUE(store_.Put("mgmt/v1/epoch", "12abc").ok());
  EXPECT_EQ(ClusterState::Load(&store_, o).status().code(), StatusCode::kDataLoss);
}

TEST_F(ClusterStateTest, ReloadTakesOverAnotherWritersStateWithGracePeriod) {
  // Another instance (a previous leader) writes through its own ClusterState.
  ClusterStateOptions o;
  o.heartbeat_timeout_ms = kTimeout;
  o.now_ms = [this] { return now_; };
  auto other = ClusterState::Load(&store_, o);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->RegisterTarget(Reg("u1", "10.0.0.1:7000")).ok());
  ASSERT_TRUE((*other)->RegisterTarget(Reg("u2", "10.0.0.2:7000")).ok());
  ASSERT_TRUE((*other)->CreateContainer("data", R(""), 0).ok());
  EXPECT_EQ(state_->Summary().epoch, 0u);  // not seen before the reload

  now_ += kTimeout - 1;  // the old leader saw its last heartbeats long ago
  ASSERT_TRUE(state_->Reload().ok());
  ClusterSummary sum = state_->Summary();
  EXPECT_EQ(sum.epoch, 2u);
  EXPECT_EQ(sum.targets_up, 2u);
  EXPECT_EQ(sum.containers, 1u);
  // Grace: a full timeout from the reload before anything is marked DOWN.
  now_ += kTimeout;
  EXPECT_EQ(*state_->CheckLiveness(now_), 0);
  now_ += 1;
  EXPECT_EQ(*state_->CheckLiveness(now_), 2);
  // Ids continue after the other writer's.
  EXPECT_EQ(state_->RegisterTarget(Reg("u3", "10.0.0.3:7000"))->target_id, 3u);
}

TEST_F(ClusterStateTest, WaitForEpochAboveWakesOnChange) {
  EXPECT_EQ(state_->WaitForEpochAbove(0, std::chrono::milliseconds(1)), 0u);
  std::thread t([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(state_->RegisterTarget(Reg("u1", "10.0.0.1:7000")).ok());
  });
  EXPECT_EQ(state_->WaitForEpochAbove(0, std::chrono::seconds(5)), 1u);
  t.join();
}

TEST_F(ClusterStateTest, AContainerWithoutASchemeGetsTheStrongestTheClusterHolds) {
  EXPECT_EQ(state_->CreateContainer("zero", R(""), 0)->redundancy(), "none");
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-a", "10.0.0.1:5000")).ok());
  EXPECT_EQ(state_->CreateContainer("one", R(""), 0)->redundancy(), "none");
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-b", "10.0.0.2:5000")).ok());
  Result<v1::Container> two = state_->CreateContainer("two", R(""), 0);
  EXPECT_EQ(two->redundancy(), "rep:2");
  EXPECT_EQ(two->scheme().min_durable(), 2u);
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-c", "10.0.0.3:5000")).ok());
  ASSERT_TRUE(state_->RegisterTarget(Reg("uuid-d", "10.0.0.4:5000")).ok());
  Result<v1::Container> four = state_->CreateContainer("four", R(""), 0);
  EXPECT_EQ(four->redundancy(), "rep:3");
  EXPECT_EQ(four->scheme().min_durable(), 2u);
  // Chosen explicitly: as asked.
  EXPECT_EQ(state_->CreateContainer("scratch", R("none"), 0)->redundancy(), "none");
}

TEST_F(ClusterStateTest, TheWriteQuorumIsSetPerContainerNeverBelowK) {
  for (const char* id : {"uuid-a", "uuid-b", "uuid-c"}) ASSERT_TRUE(state_->RegisterTarget(Reg(id, "10.0.0.1:5000")).ok());
  EXPECT_EQ(state_->CreateContainer("ec", R("ec:2+1"), 0)->scheme().min_durable(), 3u);  // K + 1
  EXPECT_EQ(state_->CreateContainer("all", R("rep:3"), 0, 0, 3)->scheme().min_durable(), 3u);
  EXPECT_EQ(state_->CreateContainer("k", R("ec:2+1"), 0, 0, 2)->scheme().min_durable(), 2u);
  EXPECT_EQ(state_->CreateContainer("below", R("ec:2+1"), 0, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->CreateContainer("above", R("rep:3"), 0, 0, 4).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClusterStateTest, LostObjectsAreRecordedDurablyAndListed) {
  v1::LossReport loss;
  loss.set_target_id(2);
  v1::ContainerLoss* c = loss.add_containers();
  c->set_container_id(7);
  c->set_container("scratch");
  for (const char* name : {"a", "b/c"}) {
    v1::LostObject* o = c->add_lost();
    o->set_name(name);
    o->set_bytes(100);
    o->set_data_hi(1);
  }
  c->set_unlisted(true);
  ASSERT_TRUE(state_->RecordLostObjects(loss, now_).ok());
  EXPECT_EQ(*state_->LostObjectCount(), 2u);  // the unnamed marker is not an object

  auto all = state_->ListLostObjects(0, "", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->total(), 3u);
  auto one = state_->ListLostObjects(7, "b/c", 0);
  ASSERT_EQ(one->objects_size(), 2);  // its record and the container's marker
  EXPECT_EQ(one->objects(0).name(), "b/c");
  EXPECT_EQ(one->objects(0).target_id(), 2u);
  EXPECT_EQ(one->objects(0).declared_ms(), now_);
  EXPECT_EQ(one->objects(0).container(), "scratch");
  EXPECT_EQ(one->objects(1).name(), "");
  EXPECT_EQ(state_->ListLostObjects(7, "zzz", 0)->objects_size(), 1);  // the marker only
  EXPECT_EQ(state_->ListLostObjects(8, "", 0)->total(), 0u);
  EXPECT_EQ(state_->ListLostObjects(0, "", 1)->objects_size(), 1);

  // Kept in the store: a new leader sees them.
  ClusterStateOptions o;
  o.now_ms = [this] { return now_; };
  auto other = ClusterState::Load(&store_, o);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*(*other)->LostObjectCount(), 2u);
}

}  // namespace
}  // namespace penstock::mgmt
