// tls_list.h — what a UCX_TLS value names, read as UCX reads it.
//
// UCX_TLS is a comma-separated list of transport names ("tcp", "rc_x", "cuda_copy") and aliases
// ("sm", "shm", "ib", "all"); a leading '^' turns it into a list of exclusions (everything
// else is allowed). UcxWorker decides from it which environment defaults to set (ucx_worker.cc).
// Names are matched as whole names or by family prefix ("rc" matches rc, rc_x, rc_verbs,
// rc_mlx5), never as substrings: "cuda_copy" names no "ud" transport.
// A value type; no I/O.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace penstock {

class TlsList {
 public:
  // `tls` may be null (UCX_TLS unset: UCX's own choice, as "all").
  explicit TlsList(const char* tls);

  bool unset() const { return unset_; }
  // True when UCX may use a transport of one of `families`: a name of the list is a family or
  // starts with one followed by '_' ("rc" → "rc_x"), or the list is "all", unset, or an
  // exclusion list that does not exclude it.
  bool Allows(std::initializer_list<std::string_view> families) const;
  // True only when the list itself names one of `families` (as above); never for "all",
  // unset, or an exclusion list.
  bool Names(std::initializer_list<std::string_view> families) const;

 private:
  static bool InFamily(std::string_view name, std::string_view family);
  bool Listed(std::initializer_list<std::string_view> families) const;

  bool unset_ = false;
  bool all_ = false;
  bool exclusions_ = false;
  std::vector<std::string> names_;
};

}  // namespace penstock
