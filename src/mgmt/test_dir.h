// test_dir.h — a fresh temporary directory for one test, removed with its contents when the
// object goes out of scope. Test-only.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace penstock::mgmt {

class TestDir {
 public:
  TestDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/penstock_mgmt_test.XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    path_ = made ? made : "";
  }
  ~TestDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace penstock::mgmt
