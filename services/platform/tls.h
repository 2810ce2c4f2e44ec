// TLS for goodput's gRPC servers, its gRPC clients (calls between services, the command-line
// tools, the dashboard) and its HTTP listeners, from TlsConfig (config.h). Certificates and
// keys are read from files and re-read when they change, so that a rotated secret (a
// cert-manager renewal) is served without a restart: gRPC checks the files every
// reload_interval, HTTPS at each new connection.
//
//   if (absl::Status s = ValidateTlsFiles(config.tls); !s.ok()) { ...exit 2... }
//   auto creds = MakeServerCredentials(config.tls, policy, &metrics);   // grpc_server.cc
//   auto mfu = MakeChannel(address, ClientTlsFrom(config.tls));        // a forwarder
//   auto https = HttpsContext::Create(config.tls);                     // http_server.cc
//
// The bearer-token policy (auth.h) runs on TLS connections exactly as on plaintext ones.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "services/platform/auth.h"
#include "services/platform/config.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace goodput::platform {

class MetricsRegistry;

// Checks that the configured files hold what their keys promise: a certificate chain with its
// matching private key, CA bundles with at least one certificate. INVALID_ARGUMENT naming
// the key and the file otherwise (never the key material).
absl::Status ValidateTlsFiles(const TlsConfig& tls);

// gRPC server credentials: TLS when tls.serves_tls() (client certificates required and
// verified against tls.client_ca_file when it is set), plaintext otherwise. With `policy`,
// its bearer-token check runs on every call. `metrics` may be null.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TlsConfig& tls, std::shared_ptr<const AuthPolicy> policy, MetricsRegistry* metrics);

// What a gRPC client needs to call a goodput service.
struct ClientTls {
  std::string ca_file = {};    // empty: plaintext
  std::string cert_file = {};  // the client certificate for mTLS; empty: none
  std::string key_file = {};
  std::string server_name = {};  // the name the server's certificate must hold; empty: the host
  absl::Duration reload_interval = absl::Seconds(60);
};

// A service's client side: tls.ca_file, the client certificate (else the server one).
ClientTls ClientTlsFrom(const TlsConfig& tls);

// The command-line tools' client side, from GOODPUT_TLS_CA, GOODPUT_TLS_CERT,
// GOODPUT_TLS_KEY and GOODPUT_TLS_SERVER_NAME.
ClientTls ClientTlsFromEnvironment(const std::function<const char*(const char*)>& getenv);

// Channel credentials for `tls`: insecure when tls.ca_file is empty.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ClientTls& tls);

// A channel to `address` with MakeChannelCredentials(tls) and tls.server_name applied.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const ClientTls& tls,
                                           grpc::ChannelArguments args = {});

// The OpenSSL context an HTTPS listener hands to its connections, rebuilt when the
// certificate or key file changes (checked whenever Current() is called). A rebuild that
// fails (a half-written file) keeps the previous context.
class HttpsContext {
 public:
  // INVALID_ARGUMENT naming the file when the certificate and key cannot be loaded.
  static absl::StatusOr<std::shared_ptr<HttpsContext>> Create(const TlsConfig& tls);

  // The context for a new connection; never null.
  std::shared_ptr<SSL_CTX> Current();

 private:
  // What tells that the certificate or the key file changed.
  struct FileStamp {
    int64_t mtime_ns;
    int64_t size;
    uint64_t inode;
    bool operator==(const FileStamp&) const = default;
  };
  using Stamp = std::pair<FileStamp, FileStamp>;
  explicit HttpsContext(TlsConfig tls) : tls_(std::move(tls)) {}
  Stamp StampOf() const;

  const TlsConfig tls_;
  absl::Mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_ ABSL_GUARDED_BY(mu_);
  Stamp stamp_ ABSL_GUARDED_BY(mu_) = {};
};

}  // namespace goodput::platform
