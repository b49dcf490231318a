// TLS on the control plane over real gRPC on 127.0.0.1: certificates from GenerateLocalTls,
// a mgmt requiring client certificates, and clients with good, missing, foreign and no TLS.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "common/temp_dir.h"
#include "mgmt/local_tls.h"
#include "mgmt_client/mgmt_client.h"
#include "mgmt/mgmt_server.h"
#include "mgmt_client/tls.h"

namespace penstock {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class MgmtTls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto good = GenerateLocalTls(dir_.path() + "/tls");
    ASSERT_TRUE(good.ok()) << good.status().ToString();
    good_ = *good;
    auto other = GenerateLocalTls(dir_.path() + "/other");
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    other_ = *other;
    MgmtServerOptions o;
    o.data_dir = dir_.path() + "/mgmt";
    o.tls = good_.Server();
    auto s = MgmtServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }

  // Connects with `tls` and asks for the status: the first call that needs the handshake.
  Status Try(const TlsOptions& tls) {
    auto c = MgmtClient::Connect(server_->address(), 2000ms, tls);
    if (!c.ok()) return c.status();
    return (*c)->GetStatus().status();
  }

  ::penstock::testing::TempDir dir_{"tls"};
  LocalTlsFiles good_, other_;
  std::unique_ptr<MgmtServer> server_;
};

TEST_F(MgmtTls, GeneratedFilesAndModes) {
  for (const std::string& f : {good_.ca_cert, good_.ca_key, good_.server_cert, good_.server_key,
                               good_.client_cert, good_.client_key}) {
    struct stat st{};
    ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
    EXPECT_GT(st.st_size, 100) << f;
    if (f.ends_with(".key")) {
      EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
    }
  }
  struct stat st{};
  ASSERT_EQ(::stat((dir_.path() + "/tls").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(MgmtTls, ClientWithGoodCertificateWorks) {
  auto c = MgmtClient::Connect(server_->address(), 2000ms, good_.Client());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto st = (*c)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  v1::CreateContainerRequest req;
  req.set_name("secure");
  ASSERT_TRUE((*c)->CreateContainer(req).ok());
  // The server certificate names localhost as well as 127.0.0.1.
  std::string port = server_->address().substr(server_->address().rfind(':'));
  auto by_name = MgmtClient::Connect("localhost" + port, 2000ms, good_.Client());
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_TRUE((*by_name)->GetStatus().ok());
}

TEST_F(MgmtTls, ClientWithoutCertificateRefused) {
  Status s = Try({good_.ca_cert, "", ""});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), server_->address())) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "--tls-cert")) << s.ToString();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.ToString();
}

TEST_F(MgmtTls, CertificateFromAnotherCaRefused) {
  // mgmt does not trust the client's CA.
  Status s = Try({good_.ca_cert, other_.client_cert, other_.client_key});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), server_->address())) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "--tls-cert")) << s.ToString();
  // The client does not trust mgmt's CA.
  s = Try(other_.Client());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "--tls-ca")) << s.ToString();
}

TEST_F(MgmtTls, PlaintextClientRefused) {
  Status s = Try({});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), server_->address())) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "--tls-ca")) << s.ToString();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.ToString();
}

TEST_F(MgmtTls, BadFilesNamed) {
  Status missing = Try({dir_.path() + "/nope.pem", "", ""});
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(missing.message(), "nope.pem' (--tls-ca) does not exist")) << missing.ToString();
  EXPECT_TRUE(Contains(missing.message(), "PENSTOCK_TLS_CA")) << missing.ToString();

  std::string junk = dir_.path() + "/junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  Status not_pem = Try({good_.ca_cert, junk, good_.client_key});
  EXPECT_EQ(not_pem.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(not_pem.message(), "junk.pem' (--tls-cert) is not a PEM CERTIFICATE"))
      << not_pem.ToString();

  Status cert_as_key = Try({good_.ca_cert, good_.client_cert, good_.client_cert});
  EXPECT_EQ(cert_as_key.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(cert_as_key.message(), "(--tls-key) is not a PEM PRIVATE KEY")) << cert_as_key.ToString();

  Status mismatch = Try({good_.ca_cert, good_.client_cert, other_.client_key});
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(mismatch.message(), "does not belong to certificate")) << mismatch.ToString();

  Status half = Try({good_.ca_cert, good_.client_cert, ""});
  EXPECT_EQ(half.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(half.message(), "--tls-key is missing")) << half.ToString();

  // A server needs its certificate and key.
  MgmtServerOptions o;
  o.data_dir = dir_.path() + "/mgmt2";
  o.tls.ca = good_.ca_cert;
  auto s = MgmtServer::Start(o);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.status().message(), "--tls-cert and --tls-key")) << s.status().ToString();
}

TEST(MgmtTlsServerOnly, ServerWithoutCaAcceptsClientsWithoutCertificates) {
  ::penstock::testing::TempDir dir("tls");
  auto files = GenerateLocalTls(dir.path() + "/tls", {"penstock.test"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  MgmtServerOptions o;
  o.data_dir = dir.path() + "/mgmt";
  o.tls.cert = files->server_cert;
  o.tls.key = files->server_key;
  auto s = MgmtServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto c = MgmtClient::Connect((*s)->address(), 2000ms, TlsOptions{files->ca_cert, "", ""});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->GetStatus().ok());
}

}  // namespace
}  // namespace penstock
