#include "services/alerting/targets/smtp_target.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/signing.h"

namespace goodput::alerting {
namespace {

constexpr size_t kMaxLine = 76;          // quoted-printable and folded header lines
constexpr size_t kMaxEncodedBytes = 45;  // UTF-8 bytes per encoded-word: 60 base64 + 12 = 72

bool PlainAscii(absl::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// Control characters (CR and LF above all: header injection) become spaces.
std::string NoControls(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

// Length of the UTF-8 character that starts with `lead` (1 for a stray byte).
size_t Utf8Length(unsigned char lead) {
  if (lead >= 0xf0 && lead < 0xf8) return 4;
  if (lead >= 0xe0) return lead < 0xf0 ? 3 : 1;
  if (lead >= 0xc0) return 2;
  return 1;
}

// RFC 2047 "B" encoded-words for `text`, folded so that no line is longer than kMaxLine
// when `used` characters of the first line are taken.
std::string EncodedWords(absl::string_view text, size_t used) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    // 12 characters of "=?UTF-8?B?" and "?="; base64 turns 3 bytes into 4 characters.
    const size_t room = kMaxLine - (words.empty() ? used : 1) - 12;
    const size_t budget = std::min(kMaxEncodedBytes, std::max<size_t>(room / 4 * 3, 3));
    size_t end = i;
    while (end < text.size()) {
      const size_t n =
          std::min(Utf8Length(static_cast<unsigned char>(text[end])), text.size() - end);
      if (end + n - i > budget) break;
      end += n;
    }
    if (end == i) end = std::min(text.size(), i + budget);
    words.push_back(absl::StrCat("=?UTF-8?B?", absl::Base64Escape(text.substr(i, end - i)), "?="));
    i = end;
  }
  return absl::StrJoin(words, "\r\n ");
}

// Folds printable ASCII at spaces so that no line is longer than kMaxLine (a word longer
// than a line stays whole: RFC 5322 allows up to 998).
std::string FoldAscii(absl::string_view text, size_t used) {
  std::string out;
  size_t line = used;
  for (absl::string_view word : absl::StrSplit(text, ' ')) {
    if (!out.empty() || line > used) {
      if (line + 1 + word.size() > kMaxLine) {
        absl::StrAppend(&out, "\r\n ");
        line = 1;
      } else {
        out.push_back(' ');
        ++line;
      }
    }
    absl::StrAppend(&out, word);
    line += word.size();
  }
  return out;
}

// "name <address>" for the From header ("From: " takes 6 characters).
std::string Mailbox(const std::string& name, const std::string& address) {
  if (name.empty()) return address;
  const std::string clean = NoControls(name);
  std::string display;
  if (!PlainAscii(clean)) {
    display = EncodedWords(clean, 6);
  } else {
    display = "\"";
    for (char c : clean) {
      if (c == '"' || c == '\\') display.push_back('\\');
      display.push_back(c);
    }
    display.push_back('"');
  }
  const size_t last_line =
      display.size() - (display.rfind('\n') == std::string::npos ? 0 : display.rfind('\n') + 1);
  const size_t first = display.find('\n') == std::string::npos ? 6 : 0;
  const bool fold = first + last_line + 2 + address.size() > kMaxLine;
  return absl::StrCat(display, fold ? "\r\n <" : " <", address, ">");
}

std::string DomainOf(const std::string& address) {
  const size_t at = address.rfind('@');
  return at == std::string::npos ? "goodput.invalid" : address.substr(at + 1);
}

struct Upload {
  const std::string* data;
  size_t offset = 0;
};

// What the server answered (libcurl's CURLINFO_HEADER_IN lines), its last kMaxAnswer bytes,
// for error messages: a relay that does not offer STARTTLS is named with its EHLO answer.
constexpr size_t kMaxAnswer = 1024;
int KeepServerAnswer(CURL*, curl_infotype type, char* data, size_t size, void* user) {
  if (type != CURLINFO_HEADER_IN) return 0;
  auto* answer = static_cast<std::string*>(user);
  answer->append(data, size);
  if (answer->size() > 4 * kMaxAnswer) answer->erase(0, answer->size() - kMaxAnswer);
  return 0;
}

// The server's lines since its last greeting or EHLO answer began, on one line.
std::string LastAnswer(const std::string& answer) {
  std::vector<std::string> lines = absl::StrSplit(answer, "\r\n", absl::SkipEmpty());
  // The EHLO answer is the last run of "250-" lines ended by a "250 " line.
  size_t begin = lines.size();
  while (begin > 0 && (absl::StartsWith(lines[begin - 1], "250-") ||
                       (begin == lines.size() && absl::StartsWith(lines[begin - 1], "250 ")))) {
    --begin;
  }
  if (begin == lines.size() && !lines.empty()) begin = lines.size() - 1;
  std::string out =
      NoControls(absl::StrJoin(lines.begin() + static_cast<long>(begin), lines.end(), " | "));
  if (out.size() > kMaxAnswer) out = out.substr(out.size() - kMaxAnswer);
  return out.empty() ? "nothing" : out;
}

size_t ReadUpload(char* buffer, size_t size, size_t count, void* user) {
  auto* up = static_cast<Upload*>(user);
  const size_t n = std::min(size * count, up->data->size() - up->offset);
  std::memcpy(buffer, up->data->data() + up->offset, n);
  up->offset += n;
  return n;
}

}  // namespace

std::string EncodeHeaderText(absl::string_view text, size_t used) {
  const std::string clean = NoControls(text);
  if (!PlainAscii(clean)) return EncodedWords(clean, used);
  return FoldAscii(clean, used);
}

std::string QuotedPrintable(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (size_t l = 0; l < lines.size(); ++l) {
    absl::string_view line = lines[l];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t column = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      const bool last = i + 1 == line.size();
      std::string piece;
      if ((c >= 33 && c <= 126 && c != '=') || ((c == ' ' || c == '\t') && !last)) {
        piece = std::string(1, static_cast<char>(c));
      } else {
        piece = {'=', kHex[c >> 4], kHex[c & 15]};
      }
      // Keep room for the soft break "=" unless this is the line's last piece.
      const size_t limit = last ? kMaxLine : kMaxLine - 1;
      if (column + piece.size() > limit) {
        absl::StrAppend(&out, "=\r\n");
        column = 0;
      }
      absl::StrAppend(&out, piece);
      column += piece.size();
    }
    if (l + 1 < lines.size()) absl::StrAppend(&out, "\r\n");
  }
  return out;
}

std::string MessageIdFor(const std::string& idempotency_key, const std::string& from) {
  return absl::StrCat("<", HmacSha256Hex("goodput message-id", idempotency_key).substr(0, 32), "@",
                      DomainOf(from), ">");
}

std::string RenderMail(const MailMessage& m) {
  std::string out;
  absl::StrAppend(
      &out, "Date: ", absl::FormatTime("%a, %d %b %Y %H:%M:%S +0000", m.date, absl::UTCTimeZone()),
      "\r\n");
  absl::StrAppend(&out, "Message-ID: ", m.message_id, "\r\n");
  absl::StrAppend(&out, "From: ", Mailbox(m.from_name, m.from), "\r\n");
  absl::StrAppend(&out, "To: ", absl::StrJoin(m.to, ",\r\n "), "\r\n");
  absl::StrAppend(&out, "Subject: ", EncodeHeaderText(m.subject, 9), "\r\n");
  absl::StrAppend(&out, "MIME-Version: 1.0\r\n");
  absl::StrAppend(&out, "Content-Type: text/plain; charset=UTF-8\r\n");
  absl::StrAppend(&out, "Content-Transfer-Encoding: quoted-printable\r\n");
  absl::StrAppend(&out, "Auto-Submitted: auto-generated\r\n");
  absl::StrAppend(&out, "\r\n", QuotedPrintable(m.body), "\r\n");
  return out;
}

MailMessage AlertMail(const Notification& n) {
  MailMessage m;
  m.subject = n.state == "resolved" ? absl::StrCat("goodput resolved: ", n.summary)
                                    : absl::StrCat("goodput ", n.severity, ": ", n.summary);
  std::string body = absl::StrCat(n.summary, "\n\n");
  if (!n.description.empty()) absl::StrAppend(&body, n.description, "\n\n");
  absl::StrAppend(&body, "Job: ", n.cluster, "/", n.job_id, "\n");
  if (!n.user.empty()) absl::StrAppend(&body, "User: ", n.user, "\n");
  if (!n.team.empty()) absl::StrAppend(&body, "Team: ", n.team, "\n");
  absl::StrAppend(&body, "Kind: ", n.kind, ", severity ", n.severity, ", ", n.state, "\n");
  absl::StrAppend(&body, "Since: ", Rfc3339(ToAbslTime(n.start_time)), "\n");
  if (n.end_time) absl::StrAppend(&body, "Ended: ", Rfc3339(ToAbslTime(*n.end_time)), "\n");
  if (!n.dashboard_url.empty()) absl::StrAppend(&body, "\n", n.dashboard_url, "\n");
  m.body = std::move(body);
  return m;
}

MailMessage DigestMail(const Digest& digest) {
  return MailMessage{.subject = DigestSubject(digest), .body = DigestText(digest)};
}

absl::Status SmtpTarget::Send(const SendRequest& request) {
  if (config_.to.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("smtp target ", name(), " has no recipients for alerts (to)"));
  }
  MailMessage m = AlertMail(*request.notification);
  m.to = config_.to;
  return Deliver(std::move(m), request.idempotency_key, request.now);
}

absl::Status SmtpTarget::SendDigest(const DigestSendRequest& request) {
  if (request.to.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("digest for ", DigestGroupName(request.digest->group), " ",
                     request.digest->name, " has no e-mail recipient"));
  }
  MailMessage m = DigestMail(*request.digest);
  m.to = request.to;
  return Deliver(std::move(m), request.idempotency_key, request.now);
}

absl::Status SmtpTarget::Deliver(MailMessage m, const std::string& idempotency_key,
                                 absl::Time now) {
  for (const std::string& to : m.to) {
    // Recipients come from configuration, checked at start-up; a payload is checked again
    // because it is what reaches the SMTP envelope.
    if (absl::Status s = CheckMailAddress(to); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("recipient ", s.message()));
    }
  }
  m.from = config_.from;
  m.from_name = config_.from_name;
  m.date = now;
  m.message_id = MessageIdFor(idempotency_key, config_.from);
  const std::string data = RenderMail(m);

  CurlGlobalInitOnce();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* rcpt = nullptr;
  for (const std::string& to : m.to)
    rcpt = curl_slist_append(rcpt, absl::StrCat("<", to, ">").c_str());
  const std::string mail_from = absl::StrCat("<", config_.from, ">");
  Upload upload{.data = &data};
  curl_easy_setopt(curl, CURLOPT_URL, config_.url.c_str());
  curl_easy_setopt(curl, CURLOPT_MAIL_FROM, mail_from.c_str());
  curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, rcpt);
  curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadUpload);
  curl_easy_setopt(curl, CURLOPT_READDATA, &upload);
  curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(data.size()));
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(
      curl, CURLOPT_TIMEOUT_MS,
      static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(config_.timeout))));
  switch (config_.starttls) {
    case SmtpTargetConfig::StartTls::kOff:
      curl_easy_setopt(curl, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_NONE));
      break;
    case SmtpTargetConfig::StartTls::kOpportunistic:
      curl_easy_setopt(curl, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_TRY));
      break;
    case SmtpTargetConfig::StartTls::kRequired:
      curl_easy_setopt(curl, CURLOPT_USE_SSL, static_cast<long>(CURLUSESSL_ALL));
      break;
  }
  if (!config_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
  std::string answer;
  curl_easy_setopt(curl, CURLOPT_DEBUGFUNCTION, KeepServerAnswer);
  curl_easy_setopt(curl, CURLOPT_DEBUGDATA, &answer);
  curl_easy_setopt(curl, CURLOPT_VERBOSE, 1L);  // the debug function sees the server's lines
  if (!config_.username.empty()) {
    curl_easy_setopt(curl, CURLOPT_USERNAME, config_.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, config_.password.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  long reply = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply);
  curl_slist_free_all(rcpt);
  curl_easy_cleanup(curl);
  if (rc == CURLE_OK) return absl::OkStatus();
  if (rc == CURLE_USE_SSL_FAILED && config_.starttls == SmtpTargetConfig::StartTls::kRequired) {
    // Nothing was sent after EHLO: neither credentials nor the message. Retried, so that the
    // rows are delivered once the relay offers STARTTLS again.
    return absl::UnavailableError(absl::StrCat(
        "smtp target ", name(), ": ", config_.url,
        " did not start TLS (STARTTLS not offered or refused), which is required (starttls: "
        "required",
        config_.username.empty() ? "" : ", the default with a username",
        "); nothing was sent; the server answered: ", LastAnswer(answer)));
  }
  const std::string message = absl::StrCat("smtp target ", name(), ": ", config_.url, ": ",
                                           error[0] != 0 ? error : curl_easy_strerror(rc),
                                           reply != 0 ? absl::StrCat(" (reply ", reply, ")") : "");
  if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(message);
  if (rc == CURLE_LOGIN_DENIED) return absl::PermissionDeniedError(message);
  if (reply >= 500 && reply < 600) return absl::InvalidArgumentError(message);
  return absl::UnavailableError(message);
}

}  // namespace goodput::alerting
