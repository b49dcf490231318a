#include "penstock/redundancy.h"

#include <gtest/gtest.h>

namespace penstock {
namespace {

TEST(RedundancyTest, ParsesTheThreeForms) {
  auto none = ParseRedundancy("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->protected_());
  EXPECT_EQ(none->width(), 1u);
  EXPECT_EQ(ParseRedundancy("none")->ToString(), "none");

  auto rep = ParseRedundancy("rep:3");
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->kind, Redundancy::Kind::kReplicate);
  EXPECT_EQ(rep->width(), 3u);
  EXPECT_EQ(rep->m, 2u);
  EXPECT_EQ(rep->head_copies(), 3u);
  EXPECT_EQ(rep->ToString(), "rep:3");
  EXPECT_EQ(ParseRedundancy("rep:1")->ToString(), "none");

  auto ec = ParseRedundancy("ec:4+2");
  ASSERT_TRUE(ec.ok());
  EXPECT_EQ(ec->kind, Redundancy::Kind::kErasure);
  EXPECT_EQ(ec->k, 4u);
  EXPECT_EQ(ec->m, 2u);
  EXPECT_EQ(ec->width(), 6u);
  EXPECT_EQ(ec->head_copies(), 3u);
  EXPECT_EQ(ec->ToString(), "ec:4+2");
  EXPECT_EQ(ec->cell_size(1 << 20), (1u << 20) / 4);
  EXPECT_EQ(ParseRedundancy("ec:3+1")->cell_size(1 << 20) % 64, 0u);
  EXPECT_GE(ParseRedundancy("ec:3+1")->cell_size(1 << 20) * 3, 1u << 20);
}

TEST(RedundancyTest, RejectsBadTextWithTheAcceptedForms) {
  for (const char* bad : {"rep:0", "rep:17", "rep:", "rep:x", "ec:4", "ec:0+1", "ec:4+0", "ec:33+1",
                          "ec:4+17", "ec:+2", "raid5", "ec:4+2 ", "rep:-1"}) {
    auto r = ParseRedundancy(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("use none, rep:N"), std::string::npos) << r.status().ToString();
  }
}

// Validation in one place: every scheme ParseRedundancy accepts is valid; struct values built
// by hand (from the wire) are checked against the same limits, and so is the write quorum.
TEST(RedundancyTest, ValidatesSchemesAndQuorums) {
  for (const char* text : {"none", "rep:2", "rep:16", "ec:1+1", "ec:4+2", "ec:32+16"}) {
    EXPECT_TRUE(ValidateRedundancy(*ParseRedundancy(text)).ok()) << text;
  }
  using K = Redundancy::Kind;
  struct Case {
    Redundancy r;
    const char* error;
  } cases[] = {
      {{K::kNone, 1, 1, 0}, "k 1 and m 0"},
      {{K::kReplicate, 1, 0, 0}, "copies"},
      {{K::kReplicate, 2, 1, 0}, "copies"},
      {{K::kReplicate, 1, 16, 0}, "copies"},
      {{K::kErasure, 0, 2, 0}, "K"},
      {{K::kErasure, 4, 0, 0}, "M"},
      {{K::kErasure, 33, 1, 0}, "K"},
      {{K::kErasure, 4, 2, 3}, "between 4 (K) and 6"},
      {{K::kErasure, 4, 2, 7}, "between 4 (K) and 6"},
      {{K::kReplicate, 1, 2, 4}, "between 1 (K) and 3"},
  };
  for (const auto& c : cases) {
    Status s = ValidateRedundancy(c.r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.r.ToString();
    EXPECT_NE(s.message().find(c.error), std::string::npos) << s.message();
  }
  EXPECT_TRUE(ValidateRedundancy({K::kErasure, 4, 2, 6}).ok());
  EXPECT_TRUE(ValidateRedundancy({K::kReplicate, 1, 2, 1}).ok());
}

TEST(RedundancyTest, DefaultQuorumIsOneMoreThanK) {
  EXPECT_EQ(ParseRedundancy("none")->quorum(), 1u);
  EXPECT_EQ(ParseRedundancy("rep:2")->quorum(), 2u);
  EXPECT_EQ(ParseRedundancy("rep:3")->quorum(), 2u);
  EXPECT_EQ(ParseRedundancy("ec:4+2")->quorum(), 5u);
  Redundancy set = *ParseRedundancy("rep:3");
  set.min_durable = 3;
  EXPECT_EQ(set.quorum(), 3u);
}

}  // namespace
}  // namespace penstock
