#include "services/alerting/targets/smtp_target.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/alerting/targets/targets_config.h"
#include "services/platform/config.h"

namespace goodput::alerting {
namespace {

// Decodes quoted-printable as a mail reader does (soft breaks joined, =XX decoded).
std::string DecodeQuotedPrintable(const std::string& qp) {
  std::string out;
  for (size_t i = 0; i < qp.size(); ++i) {
    if (qp[i] == '=' && i + 2 < qp.size() + 1 && qp.compare(i, 3, "=\r\n") == 0) {
      i += 2;
    } else if (qp[i] == '=' && i + 2 < qp.size()) {
      out.push_back(static_cast<char>(std::stoi(qp.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (qp.compare(i, 2, "\r\n") == 0) {
      out.push_back('\n');
      ++i;
    } else {
      out.push_back(qp[i]);
    }
  }
  return out;
}

// Decodes one header's RFC 2047 B encoded-words (UTF-8), unfolding it first.
std::string DecodeHeader(std::string value) {
  value = absl::StrReplaceAll(value, {{"\r\n ", " "}});
  std::string out;
  for (absl::string_view word : absl::StrSplit(value, ' ')) {
    if (absl::ConsumePrefix(&word, "=?UTF-8?B?") && absl::ConsumeSuffix(&word, "?=")) {
      std::string bytes;
      EXPECT_TRUE(absl::Base64Unescape(word, &bytes));
      out += bytes;  // adjacent encoded-words join without the space between them
    } else {
      if (!out.empty()) out += ' ';
      out += std::string(word);
    }
  }
  return out;
}

// The value of header `name` (folded lines included) in a rendered message.
std::string Header(const std::string& mail, const std::string& name) {
  const std::string head = mail.substr(0, mail.find("\r\n\r\n"));
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  std::string value;
  bool in = false;
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, name + ": ")) {
      value = line.substr(name.size() + 2);
      in = true;
    } else if (in && absl::StartsWith(line, " ")) {
      value += "\r\n" + line;
    } else {
      in = false;
    }
  }
  return value;
}

MailMessage Message() {
  return MailMessage{
      .from = "goodput@example.org",
      .from_name = "goodput",
      .to = {"alice@example.org"},
      .subject = "GPU efficiency digest for alice (user)",
      .body = "Jobs ended: 3\nGPU-hours wasted: 24.00\n",
      .date = absl::FromCivil(absl::CivilSecond(2026, 11, 26, 9, 5, 7), absl::UTCTimeZone()),
      .message_id =
          MessageIdFor("digest:user:alice:2026-11-23T00:00:00Z:mail", "goodput@example.org")};
}

TEST(RenderMail, HasTheHeadersOfAnRfc5322MimeMessage) {
  const std::string mail = RenderMail(Message());
  EXPECT_EQ(Header(mail, "Date"), "Thu, 26 Nov 2026 09:05:07 +0000");
  EXPECT_EQ(Header(mail, "From"), "\"goodput\" <goodput@example.org>");
  EXPECT_EQ(Header(mail, "To"), "alice@example.org");
  EXPECT_EQ(Header(mail, "Subject"), "GPU efficiency digest for alice (user)");
  EXPECT_EQ(Header(mail, "MIME-Version"), "1.0");
  EXPECT_EQ(Header(mail, "Content-Type"), "text/plain; charset=UTF-8");
  EXPECT_EQ(Header(mail, "Content-Transfer-Encoding"), "quoted-printable");
  EXPECT_EQ(Header(mail, "Auto-Submitted"), "auto-generated");
  const std::string id = Header(mail, "Message-ID");
  EXPECT_TRUE(absl::StartsWith(id, "<") && absl::EndsWith(id, "@example.org>")) << id;
  // Every attempt of a row has the same Message-ID; another row another one.
  EXPECT_EQ(id, MessageIdFor("digest:user:alice:2026-11-23T00:00:00Z:mail", "goodput@example.org"));
  EXPECT_NE(id, MessageIdFor("digest:user:bob:2026-11-23T00:00:00Z:mail", "goodput@example.org"));
  EXPECT_EQ(DecodeQuotedPrintable(mail.substr(mail.find("\r\n\r\n") + 4)),
            "Jobs ended: 3\nGPU-hours wasted: 24.00\n\n");
  for (absl::string_view line : absl::StrSplit(mail, "\r\n")) {
    EXPECT_LE(line.size(), 78u) << line;
    EXPECT_FALSE(absl::StrContains(line, "\n")) << "bare LF in: " << line;
  }
}

TEST(RenderMail, EncodesNonAsciiNamesAsEncodedWordsThatDecodeBack) {
  MailMessage m = Message();
  m.from_name = "goodput – Jülich";
  m.subject =
      "GPU efficiency digest for Jürgen Müller (user), 2026-11-23 00:00 to 2026-11-30 00:00 UTC "
      "— 漢字のチーム";
  const std::string mail = RenderMail(m);
  const std::string subject = Header(mail, "Subject");
  EXPECT_TRUE(absl::StartsWith(subject, "=?UTF-8?B?")) << subject;
  EXPECT_EQ(DecodeHeader(subject), m.subject);
  for (absl::string_view word :
       absl::StrSplit(absl::StrReplaceAll(subject, {{"\r\n ", " "}}), ' ')) {
    EXPECT_LE(word.size(), 75u) << word;
  }
  const std::string from = Header(mail, "From");
  EXPECT_TRUE(absl::EndsWith(from, " <goodput@example.org>")) << from;
  EXPECT_EQ(DecodeHeader(from.substr(0, from.find(" <"))), "goodput – Jülich");
  for (absl::string_view line : absl::StrSplit(mail, "\r\n")) EXPECT_LE(line.size(), 78u) << line;
}

TEST(RenderMail, AHeaderCannotBeInjectedThroughTheSubject) {
  MailMessage m = Message();
  m.subject = "digest\r\nBcc: everyone@example.org";
  const std::string mail = RenderMail(m);
  EXPECT_EQ(Header(mail, "Bcc"), "");
  EXPECT_EQ(Header(mail, "Subject"), "digest  Bcc: everyone@example.org");
}

TEST(RenderMail, LongLinesAndNonAsciiBodiesAreQuotedPrintableWithin76Characters) {
  MailMessage m = Message();
  std::string long_line;
  for (int i = 0; i < 40; ++i) long_line += "wasted GPU-hours = 12.5; ";
  m.body = absl::StrCat("Grüße, Jürgen\n", long_line, "\n.a line that starts with a dot\n",
                        "trailing space \n");
  const std::string mail = RenderMail(m);
  const std::string body = mail.substr(mail.find("\r\n\r\n") + 4);
  for (absl::string_view line : absl::StrSplit(body, "\r\n")) {
    EXPECT_LE(line.size(), 76u) << line;
    for (char c : line) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << line;
    EXPECT_FALSE(absl::EndsWith(line, " ")) << "trailing space survives transport badly";
  }
  EXPECT_TRUE(absl::StrContains(body, "Gr=C3=BC=C3=9Fe"));
  EXPECT_EQ(DecodeQuotedPrintable(body), m.body + "\n");
}

TEST(EncodeHeaderText, FoldsLongAsciiAtSpaces) {
  std::string subject;
  for (int i = 0; i < 12; ++i) subject += "efficiency ";
  subject += "digest";
  const std::string folded = EncodeHeaderText(subject, 9);
  for (absl::string_view line : absl::StrSplit(folded, "\r\n")) EXPECT_LE(line.size(), 76u);
  EXPECT_EQ(absl::StrReplaceAll(folded, {{"\r\n ", " "}}), subject);
}

TEST(AlertMail, SaysWhatFiredOnWhichJob) {
  Notification n;
  n.alert_id = 7;
  n.kind = "idle_gpus";
  n.severity = "warning";
  n.state = "firing";
  n.cluster = "eos";
  n.job_id = "4711";
  n.user = "alice";
  n.summary = "3 of 8 GPUs idle";
  n.description = "GPUs 5-7 did nothing for 2 hours.";
  n.dashboard_url = "https://goodput.example.org/#/job/eos/4711";
  MailMessage m = AlertMail(n);
  EXPECT_EQ(m.subject, "goodput warning: 3 of 8 GPUs idle");
  EXPECT_TRUE(absl::StrContains(m.body, "Job: eos/4711\n"));
  EXPECT_TRUE(absl::StrContains(m.body, "GPUs 5-7 did nothing for 2 hours."));
  n.state = "resolved";
  EXPECT_EQ(AlertMail(n).subject, "goodput resolved: 3 of 8 GPUs idle");
}

// A relay that speaks plain SMTP and offers AUTH PLAIN but not STARTTLS (a relay behind a
// misconfigured or stripping proxy looks the same), on a free loopback port, one connection
// at a time; it keeps every line the client sent.
class PlainSmtpRelay {
 public:
  PlainSmtpRelay() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 4) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~PlainSmtpRelay() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  std::vector<std::string> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  void Serve() {
    for (;;) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      Session(fd);
      close(fd);
    }
  }
  void Session(int fd) {
    auto send = [fd](const std::string& s) { (void)!write(fd, s.data(), s.size()); };
    send("220 relay.test ESMTP\r\n");
    std::string buffer;
    bool in_data = false;
    bool awaiting_credentials = false;
    for (;;) {
      const size_t eol = buffer.find("\r\n");
      if (eol == std::string::npos) {
        char chunk[4096];
        const ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n <= 0) return;
        buffer.append(chunk, static_cast<size_t>(n));
        continue;
      }
      const std::string line = buffer.substr(0, eol);
      buffer.erase(0, eol + 2);
      {
        absl::MutexLock lock(&mu_);
        lines_.push_back(line);
      }
      if (awaiting_credentials) {
        awaiting_credentials = false;
        send("235 2.7.0 accepted\r\n");
      } else if (in_data) {
        if (line == ".") {
          in_data = false;
          send("250 2.0.0 queued\r\n");
        }
      } else if (absl::StartsWith(line, "EHLO") || absl::StartsWith(line, "HELO")) {
        send("250-relay.test\r\n250-AUTH PLAIN\r\n250 SIZE 10485760\r\n");
      } else if (absl::StartsWith(line, "AUTH PLAIN")) {
        awaiting_credentials = line == "AUTH PLAIN";  // then they come on the next line
        send(awaiting_credentials ? "334 \r\n" : "235 2.7.0 accepted\r\n");
      } else if (absl::StartsWith(line, "MAIL") || absl::StartsWith(line, "RCPT") ||
                 line == "RSET" || line == "NOOP") {
        send("250 2.0.0 ok\r\n");
      } else if (line == "DATA") {
        in_data = true;
        send("354 go ahead\r\n");
      } else if (line == "QUIT") {
        send("221 2.0.0 bye\r\n");
        return;
      } else {
        send("502 5.5.2 not implemented\r\n");
      }
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// The smtp target `mail` as configuration gives it (`extra`: more keys of the entry).
ConfiguredTarget MailTarget(int port, const std::string& extra) {
  absl::StatusOr<platform::ConfigTree> tree = platform::ConfigTree::LoadString(absl::StrCat(
      "alerting:\n  targets:\n    - {name: mail, kind: smtp, url: \"smtp://127.0.0.1:", port,
      "\", from: goodput@example.org, to: [ops@example.org], timeout_s: 20", extra, "}\n"));
  EXPECT_TRUE(tree.ok()) << tree.status();
  absl::StatusOr<std::vector<ConfiguredTarget>> targets = ParseTargets(*tree);
  EXPECT_TRUE(targets.ok()) << targets.status();
  EXPECT_EQ(targets->size(), 1u);
  return std::move(targets->front());
}

absl::Status SendOne(Target& target) {
  Notification n;
  n.alert_id = 7;
  n.kind = "idle_gpus";
  n.severity = "warning";
  n.state = "firing";
  n.cluster = "eos";
  n.job_id = "4711";
  n.summary = "3 of 8 GPUs idle";
  return target.Send({.notification = &n, .idempotency_key = "7:mail:firing", .now = absl::Now()});
}

bool SentCredentials(const std::vector<std::string>& lines) {
  const std::string password = absl::Base64Escape(std::string("\0alice\0s3cret", 14));
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, "AUTH") || absl::StrContains(line, password)) return true;
  }
  return false;
}

TEST(SmtpTarget, WithCredentialsARelayWithoutStarttlsIsADeliveryErrorAndNothingIsSent) {
  PlainSmtpRelay relay;
  ConfiguredTarget mail = MailTarget(relay.port(), ", username: alice, password: s3cret");
  EXPECT_EQ(mail.warning, "");  // STARTTLS required: nothing to warn of
  const absl::Status sent = SendOne(*mail.target);
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable);  // retried: the relay may be fixed
  EXPECT_THAT(std::string(sent.message()),
              ::testing::HasSubstr(absl::StrCat("smtp target mail: smtp://127.0.0.1:", relay.port(),
                                                " did not start TLS")));
  EXPECT_THAT(std::string(sent.message()),
              ::testing::HasSubstr("the server answered: 250-relay.test | 250-AUTH PLAIN | "
                                   "250 SIZE 10485760"));
  const std::vector<std::string> lines = relay.lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(absl::StartsWith(lines.front(), "EHLO"));
  EXPECT_FALSE(SentCredentials(lines)) << absl::StrJoin(lines, "\n");
  for (const std::string& line : lines) EXPECT_FALSE(absl::StartsWith(line, "MAIL")) << line;
}

TEST(SmtpTarget, CredentialsInClearOnlyByExplicitChoiceWhichIsWarnedOfNamingTheTarget) {
  PlainSmtpRelay relay;
  ConfiguredTarget mail =
      MailTarget(relay.port(), ", username: alice, password: s3cret, starttls: none");
  EXPECT_THAT(mail.warning, ::testing::HasSubstr("smtp target mail: starttls: none sends the "
                                                 "credentials of alice to smtp://127.0.0.1:"));
  EXPECT_THAT(mail.warning, ::testing::HasSubstr("in clear text"));
  ASSERT_TRUE(SendOne(*mail.target).ok());
  EXPECT_TRUE(SentCredentials(relay.lines()));
  // Opportunistic STARTTLS is as clear with a relay that does not offer it: warned of too.
  EXPECT_THAT(MailTarget(relay.port(),
                         ", username: alice, password: s3cret, "
                         "starttls: opportunistic")
                  .warning,
              ::testing::HasSubstr("whenever the relay does not offer STARTTLS"));
}

TEST(SmtpTarget, WithoutCredentialsARelayWithoutStarttlsStillGetsTheMail) {
  PlainSmtpRelay relay;
  ConfiguredTarget mail = MailTarget(relay.port(), "");
  EXPECT_EQ(mail.warning, "");
  ASSERT_TRUE(SendOne(*mail.target).ok());
  const std::vector<std::string> lines = relay.lines();
  EXPECT_FALSE(SentCredentials(lines));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "DATA"), lines.end());
}

}  // namespace
}  // namespace goodput::alerting
