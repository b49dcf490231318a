#include "penstock/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace penstock {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd number " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  PS_ASSIGN_OR_RETURN(int h, Half(x));
  PS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  PS_RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(OkStatus().ok());
  Status s = NotFound("container 'c' does not exist");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not_found: container 'c' does not exist");
  EXPECT_EQ(s.WithContext("get x").message(), "get x: container 'c' does not exist");
}

TEST(StatusTest, CodesMatchGrpc) {
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(StatusCode::kDataLoss), 15);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnauthenticated), 16);
}

TEST(StatusTest, Retryable) {
  EXPECT_TRUE(Unavailable("x").retryable());
  EXPECT_TRUE(DeadlineExceeded("x").retryable());
  EXPECT_FALSE(DataLoss("x").retryable());
  EXPECT_FALSE(InvalidArgument("x").retryable());
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Quarter(6).status().message(), "odd number 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(StatusTest, ResultFromOkStatusIsInternalError) {
  Result<int> r(OkStatus());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

// value() of an error is a bug in the caller: it aborts naming the status, instead of throwing
// std::bad_variant_access that says nothing of what failed.
TEST(StatusDeathTest, ValueOfAnErrorAbortsWithTheStatus) {
  Result<int> r = NotFound("object 'x' in container 'c'");
  EXPECT_DEATH((void)r.value(), "value\\(\\) of a Result holding an error: .*object 'x' in container 'c'");
  EXPECT_DEATH((void)*r, "object 'x'");
  const Result<std::string> c = Unavailable("target 3 is down");
  EXPECT_DEATH((void)c->size(), "target 3 is down");
  EXPECT_EQ(Result<int>(7).value(), 7);
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "open x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EADDRINUSE, "bind").code(), StatusCode::kUnavailable);
  EXPECT_NE(ErrnoStatus(ENOENT, "open x").message().find("open x: "), std::string::npos);
}

}  // namespace
}  // namespace penstock
