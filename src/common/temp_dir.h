// temp_dir.h — a fresh directory for one test, removed with everything in it when the object
// goes out of scope. Test-only; not thread-safe.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace penstock::testing {

class TempDir {
 public:
  // Created under $TEST_TMPDIR (else /tmp) as penstock_<tag>.XXXXXX; path() is empty on failure.
  explicit TempDir(const std::string& tag = "test") {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/penstock_" + tag + ".XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace penstock::testing
