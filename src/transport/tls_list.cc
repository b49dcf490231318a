#include "transport/tls_list.h"

namespace penstock {

TlsList::TlsList(const char* tls) {
  if (tls == nullptr) {
    unset_ = all_ = true;
    return;
  }
  std::string_view rest(tls);
  if (!rest.empty() && rest.front() == '^') {
    exclusions_ = true;
    rest.remove_prefix(1);
  }
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (name.empty()) continue;
    if (name == "all" && !exclusions_) all_ = true;
    names_.emplace_back(name);
  }
}

bool TlsList::InFamily(std::string_view name, std::string_view family) {
  return name == family || (name.size() > family.size() && name.substr(0, family.size()) == family &&
                            name[family.size()] == '_');
}

bool TlsList::Listed(std::initializer_list<std::string_view> families) const {
  for (const std::string& name : names_) {
    for (std::string_view family : families) {
      if (InFamily(name, family)) return true;
    }
  }
  return false;
}

bool TlsList::Names(std::initializer_list<std::string_view> families) const {
  return !exclusions_ && Listed(families);
}

bool TlsList::Allows(std::initializer_list<std::string_view> families) const {
  if (all_) return true;
  if (exclusions_) return !Listed(families);
  return Listed(families);
}

}  // namespace penstock
