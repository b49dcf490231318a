// The engine on a real block device: a loop device over a file, made by the test (needs root
// and loop-control, as on CI and developer machines here). Where no loop device can be made the
// test says so and is skipped, naming the reason.
#include <gtest/gtest.h>
#include <stdio.h>

#include <fstream>
#include <string>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace penstock::engine {
namespace {

using testing::Key;
using testing::Pattern;
using testing::SameBytes;
using testing::ScratchDir;

// A loop device over a sparse file; detached at destruction.
class LoopDevice {
 public:
  LoopDevice(const std::string& backing, uint64_t bytes) {
    std::ofstream(backing).close();
    if (::truncate(backing.c_str(), static_cast<off_t>(bytes)) != 0) {
      error_ = "cannot size " + backing;
      return;
    }
    FILE* p = ::popen(("losetup -f --show " + backing + " 2>&1").c_str(), "r");
    char buf[256] = {};
    if (p == nullptr || std::fgets(buf, sizeof(buf), p) == nullptr) {
      error_ = "losetup gave no output";
    }
    int rc = p ? ::pclose(p) : -1;
    std::string out(buf);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    if (rc != 0 || out.rfind("/dev/loop", 0) != 0) {
      error_ = "losetup failed: " + out;
      return;
    }
    path_ = out;
  }
  ~LoopDevice() {
    if (!path_.empty()) (void)::system(("losetup -d " + path_).c_str());
  }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_, error_;
};

TEST(EngineBlockDeviceTest, WritesReadsAndReopensOnALoopDevice) {
  ScratchDir dir;
  LoopDevice loop(dir.path() + "/backing.img", 65 << 20);
  if (loop.path().empty()) GTEST_SKIP() << "no loop device here (" << loop.error() << ")";
  EngineOptions o;
  o.data_path = loop.path();
  o.index_dir = dir.path() + "/index";
  o.segment_bytes = 4 << 20;
  o.capacity_bytes = 1 << 30;  // ignored for a block device: its own size counts
  std::vector<std::pair<ShardKey, std::vector<std::byte>>> written;
  {
    auto e = Engine::Open(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ((*e)->Stats().capacity_bytes, 16u * (4 << 20));  // (65 MiB - 1 MiB header) / 4 MiB
    for (uint64_t i = 0; i < 20; ++i) {
      written.emplace_back(Key(1, i), Pattern(100000 + i * 4097, i));
      ASSERT_TRUE((*e)->Write(written.back().first, written.back().second, 1).ok());
    }
    for (auto& [k, d] : written) EXPECT_TRUE(SameBytes(*(*e)->Read(k), d));
  }
  auto e = Engine::Open(o);  // reopen: state from the index, data from the device
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->Stats().shards, written.size());
  for (auto& [k, d] : written) EXPECT_TRUE(SameBytes(*(*e)->Read(k), d));
}

}  // namespace
}  // namespace penstock::engine
