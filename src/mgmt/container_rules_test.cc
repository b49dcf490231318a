#include "mgmt/container_rules.h"

#include <gtest/gtest.h>

namespace penstock::mgmt {
namespace {

TEST(ContainerRules, Names) {
  for (const char* ok : {"a", "data-set_1.v2", "A.B", "..x", "-"}) {
    EXPECT_TRUE(ValidateContainerName(ok).ok()) << ok;
  }
  EXPECT_TRUE(ValidateContainerName(std::string(128, 'x')).ok());
  for (const std::string& bad :
       {std::string(), std::string(129, 'x'), std::string("a/b"), std::string("a b"),
        std::string("é"), std::string("."), std::string(".."), std::string("a\0b", 3)}) {
    Status s = ValidateContainerName(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("[A-Za-z0-9._-]"), std::string::npos) << s.message();
  }
}

TEST(ContainerRules, StripeUnit) {
  EXPECT_EQ(*NormalizeStripeUnit(0), kDefaultStripeUnit);
  EXPECT_EQ(*NormalizeStripeUnit(4096), 4096u);
  EXPECT_EQ(*NormalizeStripeUnit(64ull << 20), 64ull << 20);
  for (uint64_t bad : {1ull, 4095ull, 4097ull, (64ull << 20) + 4096}) {
    EXPECT_EQ(NormalizeStripeUnit(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace penstock::mgmt
