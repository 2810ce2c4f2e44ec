#include "services/alerting/targets/signing.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"

namespace goodput::alerting {

std::string HmacSha256Hex(absl::string_view key, absl::string_view text) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &mac_len);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), static_cast<size_t>(mac_len)));
}

absl::StatusOr<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) != 1) {
    return absl::InternalError("the cryptographic random source failed (RAND_bytes)");
  }
  return absl::BytesToHexString(raw);
}

}  // namespace goodput::alerting
