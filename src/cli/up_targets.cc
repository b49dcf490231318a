#include "cli/up_targets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace penstock::cli {

namespace fs = std::filesystem;

namespace {

// A data dir of a target (DATA_DIR/target-*) that holds a uuid, by its current name.
struct TargetDir {
  std::string name;
  std::string uuid;
};

// The number in "target-12" (0 for a name without one), to keep the order a person expects.
uint32_t NameNumber(const std::string& name) {
  try {
    return static_cast<uint32_t>(std::stoul(name.substr(name.find('-') + 1)));
  } catch (const std::exception&) {
    return 0;
  }
}

std::vector<TargetDir> FindTargetDirs(const std::string& data_dir) {
  std::vector<TargetDir> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(data_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("target-", 0) != 0) continue;
    if (std::string uuid = ReadTargetUuid(e.path().string()); !uuid.empty()) dirs.push_back({name, uuid});
  }
  std::sort(dirs.begin(), dirs.end(), [](const TargetDir& a, const TargetDir& b) {
    return NameNumber(a.name) != NameNumber(b.name) ? NameNumber(a.name) < NameNumber(b.name) : a.name < b.name;
  });
  return dirs;
}

Status Rename(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) return Internal("cannot rename '" + from + "' to '" + to + "': " + ec.message() + "; rename it by hand");
  return OkStatus();
}

// Renames each target's data dir and log from its current name to the one in `renames`, in two
// steps so that names may swap (target-1 <-> target-2 in a dir from before ids were names).
Status RenameTargets(const std::string& data_dir, const std::map<std::string, std::string>& renames) {
  auto dir = [&](const std::string& n) { return data_dir + "/" + n; };
  auto log = [&](const std::string& n) { return data_dir + "/logs/" + n + ".log"; };
  for (const auto& [from, to] : renames) {
    PS_RETURN_IF_ERROR(Rename(dir(from), dir(from) + ".renaming"));
    if (fs::exists(log(from))) PS_RETURN_IF_ERROR(Rename(log(from), log(from) + ".renaming"));
  }
  for (const auto& [from, to] : renames) {
    if (fs::exists(dir(to))) {
      return AlreadyExists("'" + dir(to) + "' is in the way of target " + to.substr(7) +
                           "'s data dir (it holds no target uuid); move it out of " + data_dir);
    }
    PS_RETURN_IF_ERROR(Rename(dir(from) + ".renaming", dir(to)));
    if (fs::exists(log(from) + ".renaming")) PS_RETURN_IF_ERROR(Rename(log(from) + ".renaming", log(to)));
  }
  return OkStatus();
}

}  // namespace

std::string TargetName(uint32_t id) { return "target-" + std::to_string(id); }

std::string ReadTargetUuid(const std::string& target_dir) {
  std::ifstream in(target_dir + "/target.uuid");
  std::string uuid;
  if (!in || !std::getline(in, uuid) || uuid.size() != 36) return "";
  return uuid;
}

Result<TargetLayout> LayOutTargets(const std::string& data_dir, const v1::ClusterMap& map, int want) {
  std::map<std::string, const v1::Target*> by_uuid;
  uint32_t next_id = 1;  // mgmt's next id: ids are never reused
  for (const auto& t : map.targets()) {
    by_uuid[t.uuid()] = &t;
    next_id = std::max(next_id, t.id() + 1);
  }
  TargetLayout layout;
  std::map<std::string, std::string> renames;
  std::map<uint32_t, bool> has_dir;
  for (const TargetDir& d : FindTargetDirs(data_dir)) {
    auto known = by_uuid.find(d.uuid);
    const uint32_t id = known != by_uuid.end() ? known->second->id() : next_id++;
    if (known != by_uuid.end()) {
      has_dir[id] = true;
    } else {
      layout.fresh.push_back(id);  // mgmt does not know it: it registers as a new target
    }
    if (d.name != TargetName(id)) renames[d.name] = TargetName(id);
  }
  PS_RETURN_IF_ERROR(RenameTargets(data_dir, renames));
  for (const auto& t : map.targets()) {
    if (t.state() == v1::TARGET_STATE_LOST) {
      layout.lost.push_back(t.id());
    } else {
      (has_dir[t.id()] ? layout.restart : layout.missing).push_back(t.id());
    }
  }
  const int known = map.targets_size() + static_cast<int>(layout.fresh.size());
  for (int i = known; i < want; ++i) layout.fresh.push_back(next_id++);
  return layout;
}

}  // namespace penstock::cli
