#include "mgmt/local_tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

namespace penstock {
namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using CertPtr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

constexpr long kValidDays = 365;

// kInternal naming `what` and OpenSSL's last error.
Status OpenSslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  char reason[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, reason, sizeof(reason));
  ERR_clear_error();
  return Internal("generating TLS certificates: " + what + " failed (" + reason + ")");
}

Result<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("EC P-256 key generation");
  return key;
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return OpenSslError(std::string("extension ") + OBJ_nid2sn(nid) + " = " + value);
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? OkStatus() : OpenSslError(std::string("adding extension ") + OBJ_nid2sn(nid));
}

// A certificate for `key` named `common_name`, signed by `issuer`/`issuer_key` (self-signed
// when `issuer` is null), with `extensions` as (nid, value) pairs.
Result<CertPtr> NewCert(EVP_PKEY* key, const std::string& common_name, X509* issuer, EVP_PKEY* issuer_key,
                        const std::vector<std::pair<int, std::string>>& extensions) {
  CertPtr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return OpenSslError("X509_new");
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  if (!serial || BN_rand(serial.get(), 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpenSslError("serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValidDays * 24 * 3600) == nullptr) {
    return OpenSslError("validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("penstock local cluster"), -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0) != 1) {
    return OpenSslError("subject name");
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("issuer and public key");
  }
  for (const auto& [nid, value] : extensions) {
    PS_RETURN_IF_ERROR(AddExt(cert.get(), signer, nid, value));
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) <= 0) {
    return OpenSslError("signing " + common_name);
  }
  return cert;
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, "cannot create '" + path + "'");
  bool ok = ::fchmod(fd, mode) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  ::close(fd);
  return ok ? OkStatus() : ErrnoStatus(err, "cannot write '" + path + "'");
}

Status WriteCert(const std::string& path, X509* cert) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslError("PEM encoding " + path);
  return WriteFile(path, BioText(bio.get()), 0644);
}

Status WriteKey(const std::string& path, EVP_PKEY* key) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("PEM encoding " + path);
  }
  return WriteFile(path, BioText(bio.get()), 0600);
}

// "IP:127.0.0.1,IP:::1,DNS:localhost" plus `extra` (IP or DNS entries by their form).
std::string SubjectAltNames(const std::vector<std::string>& extra) {
  std::string out = "IP:127.0.0.1,IP:::1,DNS:localhost";
  for (std::string h : extra) {
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (h.empty() || h == "127.0.0.1" || h == "::1" || h == "localhost") continue;
    unsigned char buf[16];
    bool ip = ::inet_pton(AF_INET, h.c_str(), buf) == 1 || ::inet_pton(AF_INET6, h.c_str(), buf) == 1;
    out += (ip ? ",IP:" : ",DNS:") + h;
  }
  return out;
}

}  // namespace

LocalTlsFiles LocalTlsPaths(const std::string& dir) {
  return {dir + "/ca.pem",     dir + "/ca.key",     dir + "/server.pem",
          dir + "/server.key", dir + "/client.pem", dir + "/client.key"};
}

Result<LocalTlsFiles> GenerateLocalTls(const std::string& dir, const std::vector<std::string>& extra_hosts) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || ::chmod(dir.c_str(), 0700) != 0) {
    return ErrnoStatus(ec ? ec.value() : errno, "cannot create the TLS directory '" + dir + "'");
  }
  LocalTlsFiles files = LocalTlsPaths(dir);

  PS_ASSIGN_OR_RETURN(KeyPtr ca_key, NewKey());
  PS_ASSIGN_OR_RETURN(CertPtr ca, NewCert(ca_key.get(), "penstock local CA", nullptr, nullptr,
                                          {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                           {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                           {NID_subject_key_identifier, "hash"}}));
  PS_ASSIGN_OR_RETURN(KeyPtr server_key, NewKey());
  // serverAuth and clientAuth: mgmt's repair service connects to mgmt with this certificate.
  PS_ASSIGN_OR_RETURN(CertPtr server, NewCert(server_key.get(), "penstock mgmt", ca.get(), ca_key.get(),
                                              {{NID_basic_constraints, "critical,CA:FALSE"},
                                               {NID_key_usage, "critical,digitalSignature"},
                                               {NID_ext_key_usage, "serverAuth,clientAuth"},
                                               {NID_subject_key_identifier, "hash"},
                                               {NID_authority_key_identifier, "keyid:always"},
                                               {NID_subject_alt_name, SubjectAltNames(extra_hosts)}}));
  PS_ASSIGN_OR_RETURN(KeyPtr client_key, NewKey());
  PS_ASSIGN_OR_RETURN(CertPtr client, NewCert(client_key.get(), "penstock client", ca.get(), ca_key.get(),
                                              {{NID_basic_constraints, "critical,CA:FALSE"},
                                               {NID_key_usage, "critical,digitalSignature"},
                                               {NID_ext_key_usage, "clientAuth"},
                                               {NID_subject_key_identifier, "hash"},
                                               {NID_authority_key_identifier, "keyid:always"}}));

  PS_RETURN_IF_ERROR(WriteKey(files.ca_key, ca_key.get()));
  PS_RETURN_IF_ERROR(WriteCert(files.ca_cert, ca.get()));
  PS_RETURN_IF_ERROR(WriteKey(files.server_key, server_key.get()));
  PS_RETURN_IF_ERROR(WriteCert(files.server_cert, server.get()));
  PS_RETURN_IF_ERROR(WriteKey(files.client_key, client_key.get()));
  PS_RETURN_IF_ERROR(WriteCert(files.client_cert, client.get()));
  return files;
}

}  // namespace penstock
