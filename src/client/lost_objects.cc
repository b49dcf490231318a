#include "client/lost_objects.h"

#include <ctime>

namespace penstock {

namespace {

std::string UtcIso(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string LostText(const v1::LostObject& o) {
  return "target " + std::to_string(o.target_id()) + " held its data and was declared lost with --force-data-loss at " +
         UtcIso(o.declared_ms());
}

Status LostObjectError(const std::string& container, const std::string& name, const std::string& why) {
  return DataLoss("object '" + name + "' in container '" + container + "' is lost: " + why +
                  "; delete it or put it again");
}

Result<LostRecords> FindLost(MgmtClient& mgmt, const std::string& container, const std::string& name,
                             uint64_t data_hi, uint64_t data_lo) {
  v1::ListLostObjectsRequest req;
  req.set_container(container);
  req.set_name(name);
  PS_ASSIGN_OR_RETURN(v1::ListLostObjectsResponse r, mgmt.ListLostObjects(req));
  LostRecords out;
  for (v1::LostObject& o : *r.mutable_objects()) {
    if (o.name().empty()) {
      out.unnamed = std::move(o);
    } else if ((data_hi == 0 && data_lo == 0) || (o.data_hi() == data_hi && o.data_lo() == data_lo)) {
      // (A head naming other data is a newer object of that name, whose failure is its own.)
      out.object = std::move(o);
    }
  }
  return out;
}

Status ExplainLoss(MgmtClient& mgmt, const std::string& container, const std::string& name, uint64_t data_hi,
                   uint64_t data_lo, Status failed) {
  if (failed.code() != StatusCode::kNotFound && failed.code() != StatusCode::kDataLoss) return failed;
  auto r = FindLost(mgmt, container, name, data_hi, data_lo);
  if (!r.ok()) return failed;
  if (r->object) return LostObjectError(container, name, LostText(*r->object));
  if (r->unnamed && failed.code() == StatusCode::kNotFound) {
    return NotFound(failed.message() + " (it may have been lost: target " + std::to_string(r->unnamed->target_id()) +
                    " was declared lost with --force-data-loss, and objects of '" + container +
                    "' whose only head copy it held went with it)");
  }
  return failed;
}

Result<std::vector<v1::LostObject>> ListLost(MgmtClient& mgmt, const std::string& container,
                                             const std::string& prefix) {
  v1::ListLostObjectsRequest req;
  req.set_container(container);
  PS_ASSIGN_OR_RETURN(v1::ListLostObjectsResponse r, mgmt.ListLostObjects(req));
  std::vector<v1::LostObject> out;
  for (v1::LostObject& o : *r.mutable_objects()) {
    if (!o.name().empty() && o.name().starts_with(prefix)) out.push_back(std::move(o));
  }
  return out;
}

}  // namespace penstock
