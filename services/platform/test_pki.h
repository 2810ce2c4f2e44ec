// Test-only: a small PKI made with the `openssl` command line when a test runs (no key
// material in the repository). CAs and the leaf certificates they sign, for 127.0.0.1 and
// localhost, usable by servers and clients alike.
//
//   absl::StatusOr<TestPki> pki = TestPki::Create();
//   ASSERT_TRUE(pki->MakeCa("ca").ok());
//   ASSERT_TRUE(pki->Issue("ca", "server").ok());
//   tls.cert_file = pki->crt("server"); tls.key_file = pki->key("server");
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace goodput::platform {

class TestPki {
 public:
  // A fresh directory under $TMPDIR (else /tmp), removed with the object.
  static absl::StatusOr<TestPki> Create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/goodput-pki-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create ", pattern));
    }
    return TestPki(pattern);
  }
  TestPki(TestPki&& other) noexcept : dir_(std::exchange(other.dir_, "")) {}
  TestPki& operator=(TestPki&&) = delete;
  ~TestPki() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // A self-signed CA named `name`.
  absl::Status MakeCa(const std::string& name) const {
    return Run(
        absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                     "-nodes -days 2 -subj /CN=goodput-test-",
                     name, " -keyout ", key(name), " -out ", crt(name)));
  }

  // A certificate `name` for localhost and 127.0.0.1 (server and client use) signed by `ca`.
  // Issuing a name again replaces its files: the new ones are written beside and renamed into
  // place, as a secret volume would swap them.
  absl::Status Issue(const std::string& ca, const std::string& name,
                     const std::string& cn = "localhost") const {
    const std::string ext = absl::StrCat(dir_, "/", name, ".ext");
    std::ofstream(ext) << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                          "basicConstraints=CA:FALSE\n"
                          "keyUsage=digitalSignature,keyEncipherment\n"
                          "extendedKeyUsage=serverAuth,clientAuth\n";
    const std::string tmp_key = key(name) + ".new", tmp_crt = crt(name) + ".new";
    const std::string csr = absl::StrCat(dir_, "/", name, ".csr");
    absl::Status s = Run(absl::StrCat(
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=", cn,
        " -keyout ", tmp_key, " -out ", csr, " && openssl x509 -req -in ", csr, " -CA ", crt(ca),
        " -CAkey ", key(ca), " -CAcreateserial -days 2 -extfile ", ext, " -out ", tmp_crt));
    if (!s.ok()) return s;
    std::filesystem::rename(tmp_key, key(name));
    std::filesystem::rename(tmp_crt, crt(name));
    return absl::OkStatus();
  }

  std::string crt(const std::string& name) const { return absl::StrCat(dir_, "/", name, ".crt"); }
  std::string key(const std::string& name) const { return absl::StrCat(dir_, "/", name, ".key"); }
  const std::string& dir() const { return dir_; }

 private:
  explicit TestPki(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Run(const std::string& command) const {
    const std::string log = absl::StrCat(dir_, "/openssl.log");
    if (std::system(absl::StrCat("(", command, ") >", log, " 2>&1").c_str()) != 0) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return absl::InternalError(absl::StrCat("`", command, "` failed: ", text));
    }
    return absl::OkStatus();
  }

  std::string dir_;
};

}  // namespace goodput::platform
