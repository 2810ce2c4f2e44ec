// SMTP target: digests (and alerts, to a fixed list of addresses) as e-mail, sent with
// libcurl's SMTP client to a relay (`smtp://host:port`, or `smtps://` for TLS from the first
// byte), with STARTTLS none, opportunistic or required, and optional AUTH. Configuration
// (targets_config.h) requires STARTTLS by default when a username is set, so credentials go
// out in clear only by explicit choice.
//
// Each row is one RFC 5322 message: Date, Message-ID (derived from the row's idempotency key,
// so every retry carries the same one and a receiver can drop a second copy), From, To,
// Subject (RFC 2047 encoded-words when not plain ASCII), MIME 1.0 text/plain UTF-8 in
// quoted-printable (lines of at most 76 characters, whatever the text), Auto-Submitted.
// SMTP's end-of-data dot-stuffing is libcurl's: it escapes a line-leading "." on upload.
//
// Statuses: connection failures, timeouts, STARTTLS refused or not offered when required (the
// message names the target and the relay's answer; nothing was sent) and SMTP 4xx are
// retried; SMTP 5xx (recipient or sender refused) is permanent; a login refused is
// PERMISSION_DENIED (retried: a credential can be fixed).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct SmtpTargetConfig {
  enum class StartTls { kOff, kOpportunistic, kRequired };
  std::string name = {};
  std::string url = {};  // smtp://host:port or smtps://host:port
  StartTls starttls = StartTls::kOff;
  std::string username = {};  // AUTH when set
  std::string password = {};
  std::string ca_file = {};  // CA bundle for the relay's certificate; empty: the system's
  std::string from = {};     // envelope and header sender (addr-spec)
  std::string from_name = "goodput";
  std::vector<std::string> to = {};  // recipients of alerts (digests carry their own)
  absl::Duration timeout = absl::Seconds(30);
};

// One message to render.
struct MailMessage {
  std::string from = {};
  std::string from_name = {};
  std::vector<std::string> to = {};
  std::string subject = {};  // UTF-8; control characters become spaces
  std::string body = {};     // UTF-8 text, lines separated by "\n"
  absl::Time date = {};
  std::string message_id = {};  // "<...@...>"
};

// The whole message, CRLF line endings, every line at most 78 characters.
std::string RenderMail(const MailMessage& message);

// An unstructured header's value (`used` characters of the line are taken by "Name: "):
// as it is when printable ASCII that fits, folded at spaces when long, RFC 2047 "B"
// encoded-words (UTF-8, at most 75 characters each, never splitting a character) otherwise.
std::string EncodeHeaderText(absl::string_view text, size_t used);

// Quoted-printable (RFC 2045) of UTF-8 text, "\n" line breaks become CRLF.
std::string QuotedPrintable(absl::string_view text);

// "<hex>@<domain of from>": the same for every attempt of the row.
std::string MessageIdFor(const std::string& idempotency_key, const std::string& from);

// What an alert mail says: its subject and body.
MailMessage AlertMail(const Notification& n);
// What a digest mail says.
MailMessage DigestMail(const Digest& digest);

class SmtpTarget final : public Target {
 public:
  explicit SmtpTarget(SmtpTargetConfig config) : config_(std::move(config)) {}

  // Target:
  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "smtp"; }
  absl::Status Send(const SendRequest& request) override;
  bool delivers_digests() const override { return true; }
  absl::Status SendDigest(const DigestSendRequest& request) override;

  // False when alerts routed here would have nobody to go to (no `to`).
  bool has_alert_recipients() const { return !config_.to.empty(); }

 private:
  absl::Status Deliver(MailMessage message, const std::string& idempotency_key, absl::Time now);

  SmtpTargetConfig config_;
};

}  // namespace goodput::alerting
