// meta_store_test_util.h — helpers shared by the tests of MetaStore implementations.
// Test-only.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mgmt/meta_store.h"

namespace penstock::mgmt {

using Rows = std::vector<std::pair<std::string, std::string>>;

// The value of `key`, "<absent>" when missing, "<error>" on failure.
inline std::string ValueOf(MetaStore& s, const std::string& key) {
  Result<std::optional<std::string>> v = s.Get(key);
  if (!v.ok()) return "<error>";
  return v->value_or("<absent>");
}

}  // namespace penstock::mgmt
