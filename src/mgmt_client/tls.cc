#include "mgmt_client/tls.h"

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/stat.h>

#include "common/config.h"
#include "common/log.h"

namespace penstock {
namespace {

std::string Fix(const std::string& setting) {
  return "fix --" + setting + " (or " + EnvNameFor(setting) + ")";
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// Never prompt on the terminal for a passphrase (OpenSSL's default): an encrypted key is
// simply not usable.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate of `pem`, or null.
std::unique_ptr<X509, X509Free> FirstCert(const std::string& pem) {
  auto bio = MemBio(pem);
  return std::unique_ptr<X509, X509Free>(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
}

// Checks that the certificate in tls.cert and the key in tls.key belong together.
Status CheckPair(const TlsOptions& tls, const std::string& cert_pem, const std::string& key_pem) {
  auto cert = FirstCert(cert_pem);
  auto bio = MemBio(key_pem);
  std::unique_ptr<EVP_PKEY, PkeyFree> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (!cert || !key || X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("TLS key '" + tls.key + "' does not belong to certificate '" + tls.cert +
                           "'; give the key made with that certificate (--tls-key / --tls-cert)");
  }
  return OkStatus();
}

// Reads cert and key (both or neither) and checks they match.
Status ReadPair(const TlsOptions& tls, std::string* cert_pem, std::string* key_pem) {
  if (tls.cert.empty() != tls.key.empty()) {
    return InvalidArgument(std::string("TLS needs both a certificate and its key; --tls-") +
                           (tls.cert.empty() ? "cert" : "key") + " is missing (--tls-cert " +
                           (tls.cert.empty() ? "?" : tls.cert) + ", --tls-key " +
                           (tls.key.empty() ? "?" : tls.key) + ")");
  }
  if (tls.cert.empty()) return OkStatus();
  PS_ASSIGN_OR_RETURN(*cert_pem, ReadPemFile(tls.cert, "tls-cert", "CERTIFICATE"));
  PS_ASSIGN_OR_RETURN(*key_pem, ReadPemFile(tls.key, "tls-key", "PRIVATE KEY"));
  return CheckPair(tls, *cert_pem, *key_pem);
}

void LogGrpcLine(gpr_log_func_args* args) {
  if (args->severity == GPR_LOG_SEVERITY_ERROR) {
    PS_LOG_INFO("grpc: {}", args->message);
  } else {
    PS_LOG_DEBUG("grpc: {}", args->message);
  }
}

}  // namespace

void RouteGrpcLogsToSpdlog() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(LogGrpcLine); });
}

Result<std::string> ReadPemFile(const std::string& path, const std::string& setting,
                                const std::string& what) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgument("TLS file '" + path + "' (--" + setting + ") " +
                           (errno == ENOENT ? std::string("does not exist")
                                            : "cannot be read (" + std::string(std::strerror(errno)) + ")") +
                           "; " + Fix(setting));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("TLS file '" + path + "' (--" + setting + ") is not a regular file; " + Fix(setting));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("TLS file '" + path + "' (--" + setting + ") cannot be read (" +
                           std::strerror(errno) + "); check its permissions or " + Fix(setting));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string pem = buf.str();
  const bool is_key = what == "PRIVATE KEY";
  bool parsed = false;
  if (!pem.empty()) {
    auto bio = MemBio(pem);
    if (is_key) {
      std::unique_ptr<EVP_PKEY, PkeyFree> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
      parsed = key != nullptr;
    } else {
      parsed = FirstCert(pem) != nullptr;
    }
    ERR_clear_error();
  }
  if (!parsed) {
    return InvalidArgument("TLS file '" + path + "' (--" + setting + ") " +
                           (pem.empty() ? std::string("is empty") : "is not a PEM " + what) +
                           " (expected a '-----BEGIN " + what + "-----' block" +
                           (is_key ? ", unencrypted" : "") + "); " + Fix(setting));
  }
  return pem;
}

Result<std::shared_ptr<grpc::ServerCredentials>> MgmtServerCredentials(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.cert.empty() || tls.key.empty()) {
    return InvalidArgument("mgmt serves TLS only with a certificate and its key; pass --tls-cert and "
                           "--tls-key (or PENSTOCK_TLS_CERT and PENSTOCK_TLS_KEY)");
  }
  grpc::SslServerCredentialsOptions o(tls.ca.empty()
                                          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  PS_RETURN_IF_ERROR(ReadPair(tls, &pair.cert_chain, &pair.private_key));
  o.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.ca.empty()) {
    PS_ASSIGN_OR_RETURN(o.pem_root_certs, ReadPemFile(tls.ca, "tls-ca", "CERTIFICATE"));
  }
  return grpc::SslServerCredentials(o);
}

Result<std::shared_ptr<grpc::ChannelCredentials>> MgmtChannelCredentials(const TlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  if (!tls.ca.empty()) {
    PS_ASSIGN_OR_RETURN(o.pem_root_certs, ReadPemFile(tls.ca, "tls-ca", "CERTIFICATE"));
  }
  PS_RETURN_IF_ERROR(ReadPair(tls, &o.pem_cert_chain, &o.pem_private_key));
  return grpc::SslCredentials(o);
}

}  // namespace penstock
