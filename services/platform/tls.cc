#include "services/platform/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace goodput::platform {
namespace {

// The oldest error OpenSSL queued (clearing the queue), for a message.
std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no detail";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

absl::Status BadFile(absl::string_view key, const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("config key ", key, ": \"", path, "\" ", what, " (", OpenSslError(), ")"));
}

// Number of PEM certificates in `path`; -1 when it cannot be opened.
int CountCertificates(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return -1;
  int count = 0;
  while (X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr)) {
    X509_free(cert);
    ++count;
  }
  ERR_clear_error();
  std::fclose(file);
  return count;
}

absl::Status CheckCaFile(absl::string_view key, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  int count = CountCertificates(path);
  if (count < 0) return BadFile(key, path, "cannot be read");
  if (count == 0) return BadFile(key, path, "holds no PEM certificate");
  return absl::OkStatus();
}

// An SSL_CTX serving `cert_file` and `key_file` (TLS 1.2 and later).
absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerContext(absl::string_view cert_key,
                                                       const std::string& cert_file,
                                                       absl::string_view key_key,
                                                       const std::string& key_file) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError("cannot create an OpenSSL context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1) {
    return BadFile(cert_key, cert_file, "does not hold a PEM certificate chain");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return BadFile(key_key, key_file, "does not hold a PEM private key");
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return BadFile(key_key, key_file, absl::StrCat("is not the key of ", cert_file));
  }
  return ctx;
}

// Owns a C-core provider reference for as long as the options need it.
struct ProviderRelease {
  void operator()(grpc_tls_certificate_provider* p) const {
    grpc_tls_certificate_provider_release(p);
  }
};

unsigned int RefreshSeconds(absl::Duration interval) {
  return static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(interval)));
}

}  // namespace

absl::Status ValidateTlsFiles(const TlsConfig& tls) {
  if (tls.serves_tls()) {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx =
        ServerContext("tls.cert_file", tls.cert_file, "tls.key_file", tls.key_file);
    if (!ctx.ok()) return ctx.status();
  }
  if (!tls.client_cert_file.empty()) {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ServerContext(
        "tls.client_cert_file", tls.client_cert_file, "tls.client_key_file", tls.client_key_file);
    if (!ctx.ok()) return ctx.status();
  }
  if (absl::Status s = CheckCaFile("tls.client_ca_file", tls.client_ca_file); !s.ok()) return s;
  return CheckCaFile("tls.ca_file", tls.ca_file);
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TlsConfig& tls, std::shared_ptr<const AuthPolicy> policy, MetricsRegistry* metrics) {
  if (!tls.serves_tls()) {
    return WrapServerCredentials(grpc_insecure_server_credentials_create(), std::move(policy),
                                 metrics);
  }
  const bool mtls = !tls.client_ca_file.empty();
  std::unique_ptr<grpc_tls_certificate_provider, ProviderRelease> provider(
      grpc_tls_certificate_provider_file_watcher_create(tls.key_file.c_str(), tls.cert_file.c_str(),
                                                        mtls ? tls.client_ca_file.c_str() : nullptr,
                                                        RefreshSeconds(tls.reload_interval)));
  grpc_tls_credentials_options* options = grpc_tls_credentials_options_create();
  grpc_tls_credentials_options_set_certificate_provider(options, provider.get());
  grpc_tls_credentials_options_watch_identity_key_cert_pairs(options);
  if (mtls) {
    grpc_tls_credentials_options_watch_root_certs(options);
    grpc_tls_credentials_options_set_cert_request_type(
        options, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    grpc_tls_credentials_options_set_cert_request_type(options,
                                                       GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return WrapServerCredentials(grpc_tls_server_credentials_create(options), std::move(policy),
                               metrics);
}

ClientTls ClientTlsFrom(const TlsConfig& tls) {
  ClientTls client{.ca_file = tls.ca_file,
                   .server_name = tls.server_name,
                   .reload_interval = tls.reload_interval};
  if (!tls.client_cert_file.empty()) {
    client.cert_file = tls.client_cert_file;
    client.key_file = tls.client_key_file;
  } else {
    client.cert_file = tls.cert_file;
    client.key_file = tls.key_file;
  }
  return client;
}

ClientTls ClientTlsFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) {
    const char* value = getenv(name);
    return value != nullptr ? std::string(value) : std::string();
  };
  return ClientTls{.ca_file = get("GOODPUT_TLS_CA"),
                   .cert_file = get("GOODPUT_TLS_CERT"),
                   .key_file = get("GOODPUT_TLS_KEY"),
                   .server_name = get("GOODPUT_TLS_SERVER_NAME")};
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ClientTls& tls) {
  if (tls.ca_file.empty()) return grpc::InsecureChannelCredentials();
  const unsigned int refresh = RefreshSeconds(tls.reload_interval);
  const bool identity = !tls.cert_file.empty() && !tls.key_file.empty();
  auto provider = identity ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                                 tls.key_file, tls.cert_file, tls.ca_file, refresh)
                           : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                                 tls.ca_file, refresh);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(std::move(provider));
  options.watch_root_certs();
  if (identity) options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const ClientTls& tls,
                                           grpc::ChannelArguments args) {
  if (!tls.ca_file.empty() && !tls.server_name.empty()) {
    args.SetSslTargetNameOverride(tls.server_name);
  }
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(tls), args);
}

absl::StatusOr<std::shared_ptr<HttpsContext>> HttpsContext::Create(const TlsConfig& tls) {
  std::shared_ptr<HttpsContext> https(new HttpsContext(tls));
  const Stamp stamp = https->StampOf();
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx =
      ServerContext("tls.cert_file", tls.cert_file, "tls.key_file", tls.key_file);
  if (!ctx.ok()) return ctx.status();
  absl::MutexLock lock(&https->mu_);
  https->ctx_ = *std::move(ctx);
  https->stamp_ = stamp;
  return https;
}

HttpsContext::Stamp HttpsContext::StampOf() const {
  auto of = [](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return FileStamp{};
    return FileStamp{
        .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
        .size = static_cast<int64_t>(st.st_size),
        .inode = static_cast<uint64_t>(st.st_ino)};
  };
  return {of(tls_.cert_file), of(tls_.key_file)};
}

std::shared_ptr<SSL_CTX> HttpsContext::Current() {
  const Stamp stamp = StampOf();
  absl::MutexLock lock(&mu_);
  if (stamp != stamp_) {
    // Remember the stamp either way: a file caught half-written is retried once it changes
    // again (writers that rename a complete file into place never show one).
    stamp_ = stamp;
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx =
        ServerContext("tls.cert_file", tls_.cert_file, "tls.key_file", tls_.key_file);
    if (ctx.ok()) ctx_ = *std::move(ctx);
  }
  return ctx_;
}

}  // namespace goodput::platform
