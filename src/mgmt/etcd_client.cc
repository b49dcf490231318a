#include "mgmt/etcd_client.h"

#include <httplib.h>

#include <algorithm>

namespace penstock::mgmt {

using json = nlohmann::json;

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// int64 fields come as decimal strings from the gateway (numbers are accepted too); absent
// means 0 (proto3 omits defaults).
int64_t JsonInt(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

// The smallest key greater than every key starting with `prefix` ("\0" = no end).
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char c = static_cast<unsigned char>(end.back());
    if (c < 0xff) {
      end.back() = static_cast<char>(c + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

Result<std::vector<EtcdKv>> ParseKvs(const json& range_response) {
  std::vector<EtcdKv> out;
  auto it = range_response.find("kvs");
  if (it == range_response.end()) return out;
  for (const json& kv : *it) {
    EtcdKv e;
    PS_ASSIGN_OR_RETURN(e.key, Base64Decode(kv.value("key", "")));
    PS_ASSIGN_OR_RETURN(e.value, Base64Decode(kv.value("value", "")));
    e.create_revision = JsonInt(kv, "create_revision");
    e.mod_revision = JsonInt(kv, "mod_revision");
    e.lease = JsonInt(kv, "lease");
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) |
                 uint8_t(in[i + 2]);
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += kB64[(n >> 6) & 63];
    out += kB64[n & 63];
  }
  if (i < in.size()) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(const std::string& in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const char* p = std::find(kB64, kB64 + 64, c);
    if (p == kB64 + 64) return DataLoss("etcd returned malformed base64 '" + in + "'");
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

namespace etcd {
json Put(const std::string& key, const std::string& value, int64_t lease) {
  json put = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return {{"request_put", put}};
}
json DeleteKey(const std::string& key) {
  return {{"request_delete_range", {{"key", Base64Encode(key)}}}};
}
json Range(const std::string& key) { return {{"request_range", {{"key", Base64Encode(key)}}}}; }
json CreateRevisionIs(const std::string& key, int64_t rev) {
  return {{"key", Base64Encode(key)},
          {"target", "CREATE"},
          {"result", "EQUAL"},
          {"create_revision", std::to_string(rev)}};
}
}  // namespace etcd

EtcdClient::EtcdClient(std::vector<std::pair<std::string, int>> endpoints,
                       std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(const std::string& spec,
                                                       std::chrono::milliseconds timeout) {
  std::string list = spec;
  if (list.rfind("etcd://", 0) == 0) list = list.substr(7);
  std::vector<std::pair<std::string, int>> eps;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string ep = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = ep.rfind(':');
    int port = 0;
    if (colon != std::string::npos && colon > 0 && colon + 1 < ep.size() && ep.size() - colon <= 6 &&
        std::all_of(ep.begin() + colon + 1, ep.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      port = std::stoi(ep.substr(colon + 1));
    }
    if (port < 1 || port > 65535) {
      return InvalidArgument("etcd endpoint '" + ep + "' in '" + spec +
                             "' is not host:port; fix --meta (e.g. etcd://127.0.0.1:2379)");
    }
    eps.emplace_back(ep.substr(0, colon), port);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(eps), timeout));
}

std::string EtcdClient::endpoints() const {
  std::string s;
  for (const auto& [host, port] : endpoints_) {
    if (!s.empty()) s += ",";
    s += host + ":" + std::to_string(port);
  }
  return s;
}

Result<json> EtcdClient::Call(const std::string& path, const json& body) {
  const std::string payload = body.dump();
  std::string why;
  const size_t start = current_.load();
  for (size_t n = 0; n < endpoints_.size(); ++n) {
    const size_t idx = (start + n) % endpoints_.size();
    const auto& [host, port] = endpoints_[idx];
    httplib::Client cli(host, port);
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
    const auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - secs);
    cli.set_connection_timeout(std::min<time_t>(secs.count(), 1), secs.count() >= 1 ? 0 : usecs.count());
    cli.set_read_timeout(secs.count(), usecs.count());
    cli.set_write_timeout(secs.count(), usecs.count());
    httplib::Result res = cli.Post(path, payload, "application/json");
    if (!res) {
      why += (why.empty() ? "" : "; ") + host + ":" + std::to_string(port) + ": " +
             httplib::to_string(res.error());
      continue;
    }
    current_.store(idx);
    json answer = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (answer.is_discarded()) {
      return Internal("etcd at " + host + ":" + std::to_string(port) + " answered " + path +
                      " with HTTP " + std::to_string(res->status) + " and a body that is not JSON");
    }
    if (res->status != 200 || answer.contains("error")) {
      int code = static_cast<int>(JsonInt(answer, "code"));
      if (code <= 0 || code > 16) code = static_cast<int>(StatusCode::kInternal);
      std::string msg = answer.value("message", answer.value("error", res->body));
      return Status(static_cast<StatusCode>(code),
                    "etcd at " + host + ":" + std::to_string(port) + " failed " + path + ": " + msg);
    }
    return answer;
  }
  return Unavailable("etcd at " + endpoints() + " is unreachable (" + why + "); check --meta");
}

Result<std::vector<EtcdKv>> EtcdClient::Get(const std::string& key, bool prefix) {
  json req = {{"key", Base64Encode(prefix && key.empty() ? std::string(1, '\0') : key)}};
  if (prefix) req["range_end"] = Base64Encode(PrefixEnd(key));
  PS_ASSIGN_OR_RETURN(json r, Call("/v3/kv/range", req));
  return ParseKvs(r);
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  return Call("/v3/kv/put", etcd::Put(key, value, lease)["request_put"]).status();
}

Status EtcdClient::Delete(const std::string& key) {
  return Call("/v3/kv/deleterange", {{"key", Base64Encode(key)}}).status();
}

Result<EtcdTxnResult> EtcdClient::Txn(const json& compare, const json& success,
                                      const json& failure) {
  json req = {{"compare", compare}, {"success", success}, {"failure", failure}};
  PS_ASSIGN_OR_RETURN(json r, Call("/v3/kv/txn", req));
  EtcdTxnResult out;
  out.succeeded = r.value("succeeded", false);
  if (auto it = r.find("responses"); it != r.end()) {
    for (const json& op : *it) {
      if (auto rr = op.find("response_range"); rr != op.end()) {
        PS_ASSIGN_OR_RETURN(std::vector<EtcdKv> kvs, ParseKvs(*rr));
        out.ranges.push_back(std::move(kvs));
      }
    }
  }
  return out;
}

Result<int64_t> EtcdClient::LeaseGrant(int64_t ttl_s) {
  PS_ASSIGN_OR_RETURN(json r, Call("/v3/lease/grant", {{"TTL", std::to_string(ttl_s)}}));
  int64_t id = JsonInt(r, "ID");
  if (id == 0) return Internal("etcd at " + endpoints() + " granted a lease without an id");
  return id;
}

Result<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease) {
  // A streaming endpoint: one request in the body gives one {"result": ...} back.
  PS_ASSIGN_OR_RETURN(json r, Call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}));
  auto it = r.find("result");
  return JsonInt(it == r.end() ? r : *it, "TTL");
}

Status EtcdClient::LeaseRevoke(int64_t lease) {
  return Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}}).status();
}

}  // namespace penstock::mgmt
