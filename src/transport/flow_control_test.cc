// Tables of cases for the credit accounting in flow_control.h.
#include "transport/flow_control.h"

#include <gtest/gtest.h>

namespace penstock {
namespace {

TEST(InflightWindowTest, BoundsOpsAndBytes) {
  struct Step {
    bool acquire;  // else release
    uint64_t bytes;
    bool admitted;  // for acquires
  };
  InflightWindow w(/*max_ops=*/3, /*max_bytes=*/100);
  const Step steps[] = {
      {true, 40, true},   {true, 40, true},  {true, 40, false},  // bytes full
      {true, 20, true},   {true, 0, false},                      // ops full
      {false, 40, false}, {true, 40, true},                      // room again
      {false, 40, false}, {false, 40, false}, {false, 20, false},
      {true, 1000, true},  // oversized call admitted alone
      {true, 1, false},    {false, 1000, false}, {true, 1, true},
  };
  int i = 0;
  for (const Step& s : steps) {
    if (s.acquire) {
      EXPECT_EQ(w.TryAcquire(s.bytes), s.admitted) << "step " << i;
    } else {
      w.Release(s.bytes);
    }
    ++i;
  }
  EXPECT_EQ(w.ops(), 1u);
  EXPECT_EQ(w.bytes(), 1u);
}

TEST(InflightWindowTest, ZeroMeansUnlimited) {
  InflightWindow w(0, 0);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(w.TryAcquire(1 << 30));
}

TEST(ByteBudgetTest, DefersBeyondTheLimitButAdmitsOneOfAnySize) {
  ByteBudget b(10);
  EXPECT_TRUE(b.TryReserve(100));  // nothing held: admitted
  EXPECT_FALSE(b.TryReserve(1));
  b.ForceReserve(5);
  EXPECT_EQ(b.held(), 105u);
  b.Release(100);
  EXPECT_TRUE(b.TryReserve(5));
  EXPECT_FALSE(b.TryReserve(1));
  b.Release(10);
  EXPECT_EQ(b.held(), 0u);
  b.Release(10);  // never below zero
  EXPECT_EQ(b.held(), 0u);
}

}  // namespace
}  // namespace penstock
