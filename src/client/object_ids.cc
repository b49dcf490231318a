#include "client/object_ids.h"

#include <openssl/sha.h>

#include <cstring>
#include <random>

namespace penstock {

std::pair<uint64_t, uint64_t> HeadObjectId(uint64_t container_id, const std::string& name) {
  std::string input(sizeof(container_id), '\0');
  std::memcpy(input.data(), &container_id, sizeof(container_id));
  input += name;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  uint64_t hi, lo;
  std::memcpy(&hi, digest, 8);
  std::memcpy(&lo, digest + 8, 8);
  return {hi, lo};
}

uint64_t RecordGroupHi(uint64_t container_id, const std::string& group) {
  // Apart from every object name: names cannot hold a NUL.
  return HeadObjectId(container_id, std::string("\0group\0", 7) + group).first;
}

std::pair<uint64_t, uint64_t> RecordObjectId(uint64_t container_id, const std::string& group, const std::string& key) {
  uint64_t lo = HeadObjectId(container_id, std::string("\0record\0", 8) + group + std::string(1, '\0') + key).second;
  return {RecordGroupHi(container_id, group), lo | 1};
}

std::pair<uint64_t, uint64_t> NewDataId() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  return {rng(), rng()};
}

}  // namespace penstock
