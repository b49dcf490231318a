#include "fs/known_dirs.h"

#include <gtest/gtest.h>

namespace penstock::fs {
namespace {

using namespace std::chrono_literals;

TEST(KnownDirsTest, TypeIsKeptAndExistenceExpires) {
  KnownDirs dirs(1s, 8);
  const auto t0 = KnownDirs::Clock::time_point{} + 100s;
  EXPECT_FALSE(dirs.IsDirectory(5));
  EXPECT_FALSE(dirs.Fresh(5, t0));
  dirs.Seen(5, t0);
  EXPECT_TRUE(dirs.IsDirectory(5));
  EXPECT_TRUE(dirs.Fresh(5, t0 + 999ms));
  EXPECT_FALSE(dirs.Fresh(5, t0 + 1s));
  EXPECT_TRUE(dirs.IsDirectory(5));  // a directory stays one
  dirs.Seen(5, t0 + 2s);
  EXPECT_TRUE(dirs.Fresh(5, t0 + 2500ms));
}

TEST(KnownDirsTest, ForgetAndCapacity) {
  KnownDirs dirs(1s, 3);
  const auto t0 = KnownDirs::Clock::time_point{} + 100s;
  for (uint64_t i = 1; i <= 3; ++i) dirs.Seen(i, t0);
  dirs.Forget(2);
  EXPECT_FALSE(dirs.IsDirectory(2));
  dirs.Seen(4, t0);  // 3 known: fits
  EXPECT_TRUE(dirs.IsDirectory(1));
  dirs.Seen(5, t0);  // over: starts over with just 5
  EXPECT_FALSE(dirs.IsDirectory(1));
  EXPECT_TRUE(dirs.IsDirectory(5));
  dirs.Seen(5, t0 + 1s);  // known already: no start-over
  EXPECT_TRUE(dirs.Fresh(5, t0 + 1s));
}

}  // namespace
}  // namespace penstock::fs
