// TlsList: UCX_TLS values as UCX reads them (whole names and families, aliases, exclusions).
#include "transport/tls_list.h"

#include <gtest/gtest.h>

namespace penstock {
namespace {

TEST(TlsListTest, NamesAreWholeNamesOrFamiliesNeverSubstrings) {
  struct Case {
    const char* tls;
    std::initializer_list<std::string_view> families;
    bool names, allows;
  };
  const Case cases[] = {
      {"tcp", {"tcp"}, true, true},
      {"posix,cma", {"tcp"}, false, false},
      {"posix,cma", {"posix", "sysv", "sm", "shm"}, true, true},
      {"rc_x,sm", {"rc"}, true, true},
      {"rc_verbs", {"rc", "dc"}, true, true},
      {"posix,cma,cuda_copy", {"ud"}, false, false},  // "cuda" holds "ud", names no ud
      {"posix,cma,cuda_copy", {"cuda"}, true, true},
      {"gdr_copy,rc", {"gdr"}, true, true},
      {"shm", {"sm"}, false, false},  // aliases are names of their own
      {"smth", {"sm"}, false, false},
      {"all", {"tcp"}, false, true},
      {nullptr, {"posix"}, false, true},
      {"^tcp", {"tcp"}, false, false},
      {"^tcp", {"posix"}, false, true},
      {"^rc_x,dc", {"rc"}, false, false},
      {"tcp,,posix", {"posix"}, true, true},
      {"", {"tcp"}, false, false},
  };
  for (const Case& c : cases) {
    const TlsList list(c.tls);
    const std::string shown = c.tls == nullptr ? "(unset)" : c.tls;
    EXPECT_EQ(list.Names(c.families), c.names) << shown;
    EXPECT_EQ(list.Allows(c.families), c.allows) << shown;
  }
  EXPECT_TRUE(TlsList(nullptr).unset());
  EXPECT_FALSE(TlsList("tcp").unset());
}

}  // namespace
}  // namespace penstock
