#include "mgmt_client/redundancy_proto.h"

#include <gtest/gtest.h>

namespace penstock {
namespace {

TEST(RedundancyProtoTest, RoundTripsEveryKind) {
  for (const char* text : {"none", "rep:3", "ec:4+2"}) {
    Redundancy r = *ParseRedundancy(text);
    r.min_durable = r.DefaultQuorum();
    auto back = RedundancyFromProto(RedundancyToProto(r));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, r) << text;
  }
}

TEST(RedundancyProtoTest, RefusesWhatItCannotUse) {
  v1::Redundancy unknown;
  unknown.set_kind(static_cast<v1::Redundancy::Kind>(9));
  EXPECT_NE(RedundancyFromProto(unknown).status().message().find("does not know"), std::string::npos);
  v1::Redundancy bad;
  bad.set_kind(v1::Redundancy::ERASURE);
  bad.set_k(4);
  bad.set_m(0);
  EXPECT_EQ(RedundancyFromProto(bad).status().code(), StatusCode::kInvalidArgument);
}

// A container stored by an older mgmt has only the text; a newer one the typed scheme, which wins.
TEST(RedundancyProtoTest, ContainersFromOlderVersionsAreReadByTheirText) {
  v1::Container old;
  old.set_name("photos");
  old.set_redundancy("rep:2");
  EXPECT_EQ(ContainerRedundancy(old)->ToString(), "rep:2");
  old.set_redundancy("raid5");
  Status s = ContainerRedundancy(old).status();
  EXPECT_NE(s.message().find("photos"), std::string::npos) << s.message();
  v1::Container typed;
  typed.set_redundancy("none");
  *typed.mutable_scheme() = RedundancyToProto(*ParseRedundancy("ec:2+1"));
  EXPECT_EQ(ContainerRedundancy(typed)->ToString(), "ec:2+1");
}

}  // namespace
}  // namespace penstock
