#include "mgmt_client/redundancy_proto.h"

namespace penstock {

v1::Redundancy RedundancyToProto(const Redundancy& r) {
  v1::Redundancy p;
  switch (r.kind) {
    case Redundancy::Kind::kNone: p.set_kind(v1::Redundancy::NONE); break;
    case Redundancy::Kind::kReplicate: p.set_kind(v1::Redundancy::REPLICATE); break;
    case Redundancy::Kind::kErasure: p.set_kind(v1::Redundancy::ERASURE); break;
  }
  p.set_k(r.k);
  p.set_m(r.m);
  p.set_min_durable(r.min_durable);
  return p;
}

Result<Redundancy> RedundancyFromProto(const v1::Redundancy& p) {
  Redundancy r;
  switch (p.kind()) {
    case v1::Redundancy::NONE: r.kind = Redundancy::Kind::kNone; break;
    case v1::Redundancy::REPLICATE: r.kind = Redundancy::Kind::kReplicate; break;
    case v1::Redundancy::ERASURE: r.kind = Redundancy::Kind::kErasure; break;
    default:
      return InvalidArgument("redundancy of kind " + std::to_string(p.kind()) +
                             ", which this build does not know; upgrade it");
  }
  r.k = p.k();
  r.m = p.m();
  r.min_durable = p.min_durable();
  PS_RETURN_IF_ERROR(ValidateRedundancy(r));
  return r;
}

Result<Redundancy> ContainerRedundancy(const v1::Container& c) {
  auto r = c.has_scheme() ? RedundancyFromProto(c.scheme()) : ParseRedundancy(c.redundancy());
  if (!r.ok()) return r.status().WithContext("container '" + c.name() + "'");
  return r;
}

}  // namespace penstock
