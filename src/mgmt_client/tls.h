// tls.h — TLS for the gRPC control plane: which PEM files a party uses, turned into gRPC
// credentials in one place for mgmt (server), targets, the CLI and the client library.
//
// Mgmt serves TLS when given a certificate and key; with a CA as well it requires every
// client to present a certificate that chains to that CA (mutual TLS). A client speaks TLS
// when given a CA (to verify mgmt's certificate), a certificate and key (to prove itself), or
// both. All paths empty means plaintext, as before.
//
// The PEM files are read once, when the credentials are built; errors name the file and the
// setting to fix (kInvalidArgument: do not retry until fixed).
// Thread safety: plain functions over values; the credentials returned may be shared.
#pragma once

#include <memory>
#include <string>

#include "penstock/status.h"

namespace grpc {
class ChannelCredentials;
class ServerCredentials;
}  // namespace grpc

namespace penstock {

struct TlsOptions {
  // The CA certificate(s) the peer's certificate must chain to (PEM file). On mgmt: the CA
  // of client certificates, which are then required; on a client: mgmt's CA (empty: the
  // system's roots).
  std::string ca;
  // This party's certificate chain and private key (PEM files).
  std::string cert;
  std::string key;

  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// Server credentials: insecure when !tls.enabled(); else TLS with tls.cert/tls.key, requiring
// and verifying client certificates against tls.ca when it is given.
// Errors: kInvalidArgument when cert or key is missing, or a file is absent, unreadable,
// empty or not PEM.
Result<std::shared_ptr<grpc::ServerCredentials>> MgmtServerCredentials(const TlsOptions& tls);

// Channel credentials for a client of mgmt: insecure when !tls.enabled(); else TLS verifying
// mgmt against tls.ca and presenting tls.cert/tls.key when given (both or neither).
// Errors: as MgmtServerCredentials.
Result<std::shared_ptr<grpc::ChannelCredentials>> MgmtChannelCredentials(const TlsOptions& tls);

// The contents of PEM file `path`, given by setting `setting` ("tls-ca"). `what` says what
// the file should hold: "CERTIFICATE" or "PRIVATE KEY" (any "-----BEGIN ...PRIVATE KEY-----"
// matches the latter). Errors: kInvalidArgument naming the file, the setting and the fix.
Result<std::string> ReadPemFile(const std::string& path, const std::string& setting,
                                const std::string& what);

// Sends gRPC's own log lines (one per refused TLS handshake, for example) through spdlog:
// gRPC errors at info level (in a daemon's log; hidden by the CLI's default "warn", whose
// one-line error already says what failed), the rest at debug. Idempotent, thread-safe.
void RouteGrpcLogsToSpdlog();

}  // namespace penstock
