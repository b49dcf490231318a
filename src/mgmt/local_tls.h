// local_tls.h — a throw-away certificate authority for a local cluster (`penstock up --tls`)
// and for tests: a CA, a server certificate for mgmt and one client certificate for targets
// and clients, made with OpenSSL's C API (no `openssl` binary needed).
//
// Keys are ECDSA P-256, certificates are signed with SHA-256 and valid from an hour ago for
// 365 days. The server certificate names 127.0.0.1, ::1 and localhost (and any extra hosts)
// in its subjectAltName, so clients that dial mgmt by those names verify it. Private keys are
// written unencrypted with mode 0600 in a directory of mode 0700: they protect a local test
// cluster, not production.
// Thread safety: plain functions; concurrent calls must use different directories.
#pragma once

#include <string>
#include <vector>

#include "mgmt_client/tls.h"
#include "penstock/status.h"

namespace penstock {

// The PEM files of a local CA set, all in one directory.
struct LocalTlsFiles {
  std::string ca_cert;      // DIR/ca.pem
  std::string ca_key;       // DIR/ca.key
  std::string server_cert;  // DIR/server.pem
  std::string server_key;   // DIR/server.key
  std::string client_cert;  // DIR/client.pem
  std::string client_key;   // DIR/client.key

  // What mgmt serves with: its certificate, requiring client certificates from this CA.
  TlsOptions Server() const { return {ca_cert, server_cert, server_key}; }
  // What targets and clients dial mgmt with.
  TlsOptions Client() const { return {ca_cert, client_cert, client_key}; }
};

// The paths GenerateLocalTls(dir) writes (nothing is read or written).
LocalTlsFiles LocalTlsPaths(const std::string& dir);

// Creates `dir` if needed and writes a fresh CA, server and client certificate and key into
// it, replacing files of the same names. `extra_hosts` (IP addresses or DNS names) are added to
// the server certificate's names. Errors: the directory or a file cannot be written
// (ErrnoStatus naming it); kInternal if OpenSSL fails (with its reason).
Result<LocalTlsFiles> GenerateLocalTls(const std::string& dir,
                                       const std::vector<std::string>& extra_hosts = {});

}  // namespace penstock
